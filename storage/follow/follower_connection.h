// The follower's PostgreSQL connections (storage/follow/follower.h), shared by its two ways of following:
// logical decoding (follower_logical.cc) and polling the commit-ordered column (follower_poll.cc). libpq
// handles that close themselves, the error the follower retries, and the one connection a session holds.
// Internal to storage/follow/: the follower's thread alone uses them.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include <libpq-fe.h>

#include "storage/follow/follower.h"
#include "storage/pg/libpq_handles.h"

namespace scangate::storage {
namespace follow_detail {

using ConnPtr = PgConnPtr;
using ResultPtr = PgResultPtr;

// A connection failure the follower retries (reconnects, then reloads the window).
struct FollowError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The longest the follower's thread sleeps or waits on its socket at once: bounds Stop()'s wait.
inline constexpr auto kStopSlice = std::chrono::milliseconds(10);

inline std::int64_t SteadyNs(BootClock::time_point t) { return t.time_since_epoch().count(); }

// Opens `conninfo` (URL or key=value) as `application_name`, with replication=database when `replication`.
// Throws FollowError naming `what` and libpq's message (its password never: ErrorSummary).
ConnPtr Open(const std::string& conninfo, const char* application_name, bool replication, const char* what);

}  // namespace follow_detail

// One session's connections. Logical: the replication connection, its TEMPORARY slot, and the probe connection
// that reads the server's flush position. Poll: one connection, and the snapshot the next poll starts from
// (pg_current_snapshot()'s text: what is visible in it has been applied).
struct Follower::Connections {
  follow_detail::ConnPtr repl, probe;
  std::string slot;
  follow_detail::ConnPtr poll;
  std::string snapshot;
};

}  // namespace scangate::storage
