// How a follower (storage/follow/follower.h) learns what other writers commit: --follow=logical|poll. Its own
// header so that configuration (server/config/config.h) names it without the follower's libpq dependencies.
#pragma once

#include <cstdint>

namespace scangate::storage {

enum class FollowMethod : std::uint8_t {
  kLogical,  // logical decoding: pgoutput on a TEMPORARY slot (wal_level=logical, a REPLICATION role)
  kPoll,     // one statement per interval on an ordinary connection, by sql/010's commit_xid
};

inline const char* FollowMethodName(FollowMethod m) { return m == FollowMethod::kPoll ? "poll" : "logical"; }

}  // namespace scangate::storage
