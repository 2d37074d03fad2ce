#include "storage/epochs/closer.h"

#include <string>

#include <pqxx/pqxx>

#include "storage/epochs/catalog.h"
#include "storage/epochs/summary_build.h"
#include "storage/pg/sql_state.h"

namespace scangate::storage {
namespace {

constexpr const char* kOldestClosingSql =
    "SELECT id FROM scangate_epochs WHERE state = 'closing' ORDER BY opened_at, id LIMIT 1";
// A session lock: one closer per database. Released when the close ends, or with the session.
constexpr const char* kTryCloserLockSql = "SELECT pg_try_advisory_lock(scangate_epoch_lock_key() + 2)";
constexpr const char* kCloserUnlockSql = "SELECT pg_advisory_unlock(scangate_epoch_lock_key() + 2)";
constexpr const char* kCompactSql = "SELECT scangate_epoch_compact($1)";
constexpr const char* kCloseSql = "SELECT scangate_epoch_close($1, $2)";
constexpr const char* kClosedSql =
    "SELECT id, coalesce(keys, 0) FROM scangate_epochs WHERE state = 'closed' ORDER BY opened_at, id";
constexpr const char* kMergeBuildSql = "SELECT scangate_epoch_merge_build($1::int8[], $2)";
constexpr const char* kMergeSwapSql = "SELECT scangate_epoch_merge_swap($1, $2::int8[], $3)";
constexpr const char* kLockNotAvailable = "55P03";
constexpr auto kRetryPause = std::chrono::milliseconds(20);

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// The close proper, with the closer's lock held.
EpochClose Close(PgConnection& conn, std::int64_t epoch, std::chrono::milliseconds lock_timeout, int attempts,
                 const std::function<bool(std::chrono::milliseconds)>& wait) {
  EpochClose out;
  out.epoch = epoch;
  auto began = std::chrono::steady_clock::now();
  std::string compact;
  {
    pqxx::work tx(conn, "scangate_epoch_compact");
    compact = tx.exec_params1(kCompactSql, epoch)[0].as<std::string>();
    tx.commit();
  }
  out.compact_seconds = SecondsSince(began);
  began = std::chrono::steady_clock::now();
  const std::string summary = BuildEpochSummary(conn.raw(), RequirePlainRelation(compact)).Serialize();
  out.summary_seconds = SecondsSince(began);
  out.summary_bytes = summary.size();
  for (out.attempts = 1;; ++out.attempts) {
    began = std::chrono::steady_clock::now();
    try {
      pqxx::work tx(conn, "scangate_epoch_close");
      tx.exec("SET LOCAL lock_timeout = " + std::to_string(lock_timeout.count()));
      tx.exec_params1(kCloseSql, epoch, pqxx::binarystring(summary.data(), summary.size()));
      out.keys = tx.exec_params1("SELECT coalesce(keys, 0) FROM scangate_epochs WHERE id = $1", epoch)[0]
                     .as<std::int64_t>();
      tx.commit();
      out.swap_seconds = SecondsSince(began);
      out.closed = true;
      return out;
    } catch (const pqxx::sql_error& e) {
      if (SqlStateOf(e) != kLockNotAvailable) throw;
    }
    out.swap_seconds = SecondsSince(began);
    if (out.attempts >= attempts || wait(kRetryPause)) return out;  // postponed: the compact table is kept
  }
}

// The int8[] literal of `ids`.
std::string ArrayOf(const std::vector<std::int64_t>& ids) {
  std::string out = "{";
  for (std::size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + std::to_string(ids[i]);
  return out + "}";
}

// The merge proper, with the closer's lock held.
EpochMerge Merge(PgConnection& conn, std::vector<std::int64_t> epochs, std::int64_t keys_before,
                 std::chrono::seconds retention, std::chrono::milliseconds lock_timeout, int attempts,
                 const std::function<bool(std::chrono::milliseconds)>& wait) {
  const auto began = std::chrono::steady_clock::now();
  EpochMerge out;
  out.epochs = std::move(epochs);
  out.keys_before = keys_before;
  const std::string ids = ArrayOf(out.epochs);
  std::string target;
  {
    pqxx::work tx(conn, "scangate_epoch_merge_build");
    target = tx.exec_params1(kMergeBuildSql, ids,
                             std::chrono::duration_cast<std::chrono::microseconds>(retention).count())[0]
                 .as<std::string>();
    tx.commit();
  }
  const std::string summary = BuildEpochSummary(conn.raw(), RequirePlainRelation(target)).Serialize();
  for (int attempt = 1;; ++attempt) {
    try {
      pqxx::work tx(conn, "scangate_epoch_merge_swap");
      tx.exec("SET LOCAL lock_timeout = " + std::to_string(lock_timeout.count()));
      out.merged = tx.exec_params1(kMergeSwapSql, target, ids, pqxx::binarystring(summary.data(), summary.size()))[0]
                       .as<bool>();
      if (out.merged) {
        out.keys = tx.exec_params1("SELECT coalesce(keys, 0) FROM scangate_epochs WHERE relation = $1", target)[0]
                       .as<std::int64_t>();
      }
      tx.commit();
      break;
    } catch (const pqxx::sql_error& e) {
      if (SqlStateOf(e) != kLockNotAvailable) throw;
    }
    // Postponed: the merged table is left for the next merge to drop (it is no epoch of the catalog).
    if (attempt >= attempts || wait(kRetryPause)) break;
  }
  out.seconds = SecondsSince(began);
  return out;
}

}  // namespace

std::optional<EpochMerge> MergeTwoEpochs(PgConnection& conn, std::size_t max_closed, std::chrono::seconds retention,
                                         std::chrono::milliseconds lock_timeout, int attempts,
                                         const std::function<bool(std::chrono::milliseconds)>& wait) {
  std::vector<std::int64_t> pick;
  std::int64_t keys = 0;
  {
    pqxx::nontransaction tx(conn);
    const pqxx::result closed = tx.exec(kClosedSql);  // a cheap look first: most passes have nothing to merge
    if (closed.size() <= max_closed) return std::nullopt;
    if (!tx.exec1(kTryCloserLockSql)[0].as<bool>()) return std::nullopt;
  }
  {
    pqxx::nontransaction tx(conn);
    const pqxx::result closed = tx.exec(kClosedSql);  // again with the lock held
    for (std::size_t i = 0; closed.size() > max_closed && i + 1 < closed.size(); ++i) {
      const std::int64_t sum = closed[i][1].as<std::int64_t>() + closed[i + 1][1].as<std::int64_t>();
      if (pick.empty() || sum < keys) {
        pick = {closed[i][0].as<std::int64_t>(), closed[i + 1][0].as<std::int64_t>()};
        keys = sum;
      }
    }
  }
  std::optional<EpochMerge> out;
  if (!pick.empty()) out = Merge(conn, pick, keys, retention, lock_timeout, attempts, wait);
  pqxx::nontransaction tx(conn);
  tx.exec(kCloserUnlockSql);
  return out;
}

std::optional<EpochClose> CloseOneEpoch(PgConnection& conn, std::chrono::milliseconds lock_timeout, int attempts,
                                        const std::function<bool(std::chrono::milliseconds)>& wait) {
  std::optional<std::int64_t> epoch;
  {
    pqxx::nontransaction tx(conn);
    if (!tx.exec1(kTryCloserLockSql)[0].as<bool>()) return std::nullopt;  // another session closes one
    // Read with the lock held: an epoch another closer finished before it is not closing any more.
    const pqxx::result r = tx.exec(kOldestClosingSql);
    if (!r.empty()) epoch = r[0][0].as<std::int64_t>();
  }
  // When Close throws, the caller drops the connection, and the session's lock goes with it.
  std::optional<EpochClose> out;
  if (epoch) out = Close(conn, *epoch, lock_timeout, attempts, wait);
  pqxx::nontransaction tx(conn);
  tx.exec(kCloserUnlockSql);
  return out;
}

}  // namespace scangate::storage
