// Bounded, stoppable statements on a plain libpq connection (the follower's, storage/follow/; the clock reader's,
// storage/clock/; the peers' threads, storage/peers/): one statement sent and waited for on the socket a slice at a
// time, so that neither a network that drops packets silently nor a frozen server holds the thread — or the Stop()
// that joins it — longer than the caller's bound.
// Invariant: ExecWithin never waits longer than `within` (rounded up to a slice) nor a slice past `stop`.
#pragma once

#include <libpq-fe.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <span>
#include <string>

#include "storage/pg/libpq_handles.h"  // PgConnPtr, PgResultPtr

namespace scangate::storage {

// The longest a thread in ExecWithin waits on its socket at once: how late it sees `stop`.
inline constexpr auto kPgWaitSlice = std::chrono::milliseconds(10);
// No client-side bound: only `stop` ends the wait (a statement that may legitimately wait long).
inline constexpr auto kPgNoBound = std::chrono::milliseconds::max();

// Sends one statement (`params` as text; the answer in binary when `binary`; no params and text: the simple query
// protocol, the only one a replication connection takes) and waits for its answer in kPgWaitSlice slices. Returns
// its first result (the connection is then idle, or in COPY mode after a COPY or START_REPLICATION). Returns null
// with `*error` set when libpq fails, when no answer came within `within` (the connection must then be dropped:
// a network dropping packets, or a frozen server), or when `stop` is set.
PgResultPtr ExecWithin(PGconn* conn, const char* sql, std::span<const char* const> params, bool binary,
                       std::chrono::milliseconds within, const std::atomic<bool>& stop, std::string* error);

}  // namespace scangate::storage
