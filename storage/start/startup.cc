#include "storage/start/startup.h"

#include <algorithm>
#include <exception>
#include <thread>

#include <pqxx/pqxx>

#include "storage/epochs/catalog.h"
#include "storage/start/migrations.h"
#include "storage/start/start_error.h"

namespace scangate::storage {

bool RetryWithBackoff(const RetryPolicy& policy,
                      absl::FunctionRef<bool(int attempt, std::chrono::milliseconds retry_in)> attempt,
                      absl::FunctionRef<bool(std::chrono::milliseconds pause)> wait) {
  auto pause = policy.first;
  for (int n = 1;; ++n) {
    if (attempt(n, pause)) return true;
    if (policy.deadline && std::chrono::steady_clock::now() + pause > *policy.deadline) return false;
    if (!wait(pause)) return false;
    pause = std::min(pause * 2, std::max(policy.max, policy.first));
  }
}

bool SleepFor(std::chrono::milliseconds pause) {
  std::this_thread::sleep_for(pause);
  return true;
}

void MigrateWithRetry(const std::string& conninfo, const RetryPolicy& policy) {
  std::optional<StartError> last;
  const bool done = RetryWithBackoff(
      policy,
      [&](int, std::chrono::milliseconds) {
        try {
          pqxx::connection conn(conninfo);
          ApplyMigrations(conn);
          RequireWritableByThisVersion(ReadEpochCatalog(conn));
          return true;
        } catch (const SchemaTooNew& e) {
          throw StartError(std::string("schema: ") + e.what(), "", true);
        } catch (const EpochsNotChecked& e) {
          throw StartError(std::string("epochs: ") + e.what(), "", true);
        } catch (const std::exception& e) {
          StartError error = ClassifyStartError(e);
          // Only a connection failure that may heal is retried.
          if (error.permanent() || dynamic_cast<const pqxx::broken_connection*>(&e) == nullptr) throw error;
          last = std::move(error);
          return false;
        }
      },
      SleepFor);
  if (!done) throw *last;
}

}  // namespace scangate::storage
