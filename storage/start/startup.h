// The start-up retry policy: how scangate waits for a PostgreSQL that is down or still starting — one
// attempt, then pauses doubling from `first` up to `max`, until an attempt succeeds, the deadline passes, or
// the caller's wait says stop (a signal). Used by Store::Start() (migrations) and by server/main.cc (the
// store, the journal's identity query, the warm load), so every start-up wait backs off alike. Invariant: an
// attempt is never started past the deadline, and a pause never ends past it. Also: the migrations step of
// Store::Start(), retried under this policy.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include <absl/functional/function_ref.h>

namespace scangate::storage {

struct RetryPolicy {
  std::chrono::milliseconds first{50};  // the pause after the first failed attempt
  std::chrono::milliseconds max{2000};  // pauses double up to this
  // No attempt starts after it (and a pause that would end past it is not taken); empty = retry forever.
  std::optional<std::chrono::steady_clock::time_point> deadline;
};

// Runs `attempt(n, retry_in)` (n = 1, 2, ...; retry_in = the pause that follows if it fails) until it
// returns true, pausing by `wait(pause)` between attempts. `wait` returns false to stop (e.g. a signal).
// Returns true when an attempt succeeded; false when `wait` stopped it or the next pause would cross the
// deadline. An exception from `attempt` propagates (the caller decides what is permanent). Caller's thread.
bool RetryWithBackoff(const RetryPolicy& policy,
                      absl::FunctionRef<bool(int attempt, std::chrono::milliseconds retry_in)> attempt,
                      absl::FunctionRef<bool(std::chrono::milliseconds pause)> wait);

// `wait` for RetryWithBackoff when nothing can interrupt it: sleeps, returns true.
bool SleepFor(std::chrono::milliseconds pause);

// Connects on `conninfo` and applies the embedded migrations (storage/start/migrations.h), retrying a connection
// failure that may heal under `policy`. Throws StartError (storage/start/start_error.h): at once when it is
// permanent or not a connection failure, else the last one once the policy's deadline passed.
// Then reads the epochs' catalog and refuses (permanent) one this version cannot write under
// (storage/epochs/catalog.h RequireWritableByThisVersion).
void MigrateWithRetry(const std::string& conninfo, const RetryPolicy& policy);

}  // namespace scangate::storage
