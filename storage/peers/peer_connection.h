// The libpq plumbing of the peers' threads (issue 42): the watermark publisher and --ack=commit's PeerWatch each hold
// one ordinary connection and run one small statement per interval. Handles that close themselves, a bounded
// sleep that Stop() can cut short, and one parameterised statement with an int8 first column. Internal to
// storage/peers/.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <libpq-fe.h>

#include "storage/pg/libpq_handles.h"

namespace scangate::storage::peers_detail {

using ConnPtr = PgConnPtr;
using ResultPtr = PgResultPtr;

// A failed connection or statement; the thread reconnects after its delay.
struct PeerError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Opens `conninfo` (URL or key=value, with the caller's timeouts) as `application_name`. Throws PeerError naming
// `what` and libpq's first error line (never the password).
ConnPtr Open(const std::string& conninfo, const char* application_name, const char* what);

// Runs `sql` with text parameters (nullopt = NULL) and returns its rows; throws PeerError on failure.
ResultPtr Exec(PGconn* c, const char* sql, const std::vector<std::optional<std::string>>& params, const char* what);

// Sleeps `d` in slices of at most 10 ms, returning early once `stop` is set.
void SleepUnlessStopped(std::chrono::nanoseconds d, const std::atomic<bool>& stop);

}  // namespace scangate::storage::peers_detail
