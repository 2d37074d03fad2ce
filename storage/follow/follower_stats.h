// What a follower (storage/follow/follower.h) reports to /metrics and /stats: its connection, whether the filter
// may be trusted now, how stale it may be, and what it applied. A plain value, copied per scrape.
#pragma once

#include <cstdint>
#include <string>

namespace scangate::storage {

struct FollowerStats {
  bool connected = false;      // streaming now
  bool fresh = false;          // Fresh() now
  double lag_seconds = -1;     // how stale the filter may be now (since the last passed probe); -1 = never fresh
  std::uint64_t keys = 0;      // digests applied to the filter (repeats included)
  std::uint64_t transactions = 0;  // logical: transactions decoded; poll: polls
  std::uint64_t reconnects = 0;  // connections lost or refused after the first
  std::uint64_t reloads = 0;     // windows read again after a (re)connection
  std::string error;             // the last connection error ("" while streaming)
};

}  // namespace scangate::storage
