// The follower's PostgreSQL connections (storage/follow/follower.h), shared by its two ways of following:
// logical decoding (follower_logical.cc) and polling the commit-ordered column (follower_poll.cc). libpq
// handles that close themselves, the error the follower retries, and the one connection a session holds.
// Internal to storage/follow/: the follower's thread alone uses them.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>

#include <libpq-fe.h>

#include "storage/follow/follower.h"
#include "storage/pg/conninfo.h"
#include "storage/pg/pg_exec.h"
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
inline constexpr auto kStopSlice = kPgWaitSlice;
// How long past its statement_timeout a statement may stay unanswered before the connection is given up: the
// server cancels the statement at its timeout and answers with an error within a round trip, so silence past
// this is a network that drops packets without a reset (keepalives are not sent while a query waits for its
// answer; tcp_user_timeout only sees data the peer never acknowledged) or a frozen server.
inline constexpr auto kAnswerGrace = std::chrono::seconds(1);
// No client-side bound (CREATE_REPLICATION_SLOT waits for the transactions running anywhere to end): only Stop().
inline constexpr auto kNoAnswerBound = kPgNoBound;

// A boot-clock instant in ns since boot (core/boot_clock.h): the unit of the freshness and lag stamps.
inline std::int64_t BootNs(BootClock::time_point t) { return t.time_since_epoch().count(); }

// Opens `conninfo` (URL or key=value) with `defaults` added where it sets none (storage/pg/conninfo.h), as
// `application_name`, with replication=database when `replication`. Throws FollowError naming `what` and libpq's
// message (its password never: ErrorSummary); std::invalid_argument when libpq cannot parse `conninfo`.
ConnPtr Open(const std::string& conninfo, const ConnectionDefaults& defaults, const char* application_name,
             bool replication, const char* what);

// ExecWithin (storage/pg/pg_exec.h) throwing FollowError naming `what` where it fails (stopping included: the
// caller's loop ends on `stop`).
ResultPtr Exec(PGconn* conn, const char* sql, std::span<const char* const> params, bool binary,
               std::chrono::milliseconds within, const std::atomic<bool>& stop, const char* what);

// Throws FollowError when the server of `conn` is in recovery (a standby): its snapshots list no running
// transactions (they are the primary's), so the rows of transactions running at a poll would never be read, and
// it has none of the primary's commits it has not replayed yet. Retried like a lost connection: a promotion, a
// multi-host URL's next attempt or a map change may lead to the primary.
void RefuseStandby(PGconn* conn, std::chrono::milliseconds within, const std::atomic<bool>& stop);

}  // namespace follow_detail

// One session's connections. Logical: the replication connection, its TEMPORARY slot, and the probe connection
// that reads the server's flush position. Poll: one connection, and the snapshot the next poll starts from
// (pg_current_snapshot()'s text: what is visible in it has been applied).
// `generation`: the ConnTarget generation of the string they were opened with; `moved` latches Follower::Moved.
struct Follower::Connections {
  follow_detail::ConnPtr repl, probe;
  std::string slot;
  follow_detail::ConnPtr poll;
  std::string snapshot;
  bool switched_epochs = false;  // poll: the schema has sql/019's scangate_follow_switched (an epoch switch's rows)
  std::uint64_t generation = 0;
  bool moved = false;
};

}  // namespace scangate::storage
