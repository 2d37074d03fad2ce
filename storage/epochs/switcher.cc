#include "storage/epochs/switcher.h"

#include <optional>
#include <string_view>
#include <thread>
#include <utility>

#include <boost/json/array.hpp>
#include <pqxx/pqxx>

#include "storage/epochs/closer.h"
#include "storage/pg/error_summary.h"
#include "storage/pg/pg_connection.h"
#include "storage/pg/sql_state.h"

namespace scangate::storage {
namespace {

// The open epoch: its id, age (s), live rows (PostgreSQL's statistics), the epochs not open, and whether the next
// one is prepared.
constexpr const char* kViewSql =
    "SELECT e.id, extract(epoch FROM now() - e.opened_at)::float8, "
    "coalesce((SELECT n_live_tup FROM pg_stat_user_tables WHERE relid = 'scan_keys'::regclass), 0), "
    "(SELECT count(*) FROM scangate_epochs WHERE state <> 'open'), to_regclass('scan_keys_upcoming') IS NOT NULL "
    "FROM scangate_epochs e WHERE e.state = 'open'";
constexpr const char* kPrepareSql = "SELECT scangate_epoch_prepare()";
// $2: the size bound again for a switch by size (NULL by age), checked under the switch's lock (sql/019).
constexpr const char* kSwitchSql = "SELECT scangate_epoch_switch($1, $2)";
constexpr const char* kDropSql = "SELECT epoch, relation, coalesce(keys, 0) FROM scangate_epoch_drop_expired($1, $2)";
constexpr const char* kLockNotAvailable = "55P03";
constexpr auto kRetryPause = std::chrono::milliseconds(20);

}  // namespace

struct EpochSwitcher::Conn {
  explicit Conn(const std::string& conninfo) : c(conninfo) {}
  PgConnection c;  // raw(): the close's summary is read by COPY
};

EpochSwitcher::EpochSwitcher(EpochSwitcherOptions options)
    : options_(std::move(options)), log_(options_.log ? options_.log : StderrLogSink()), target_(options_.conninfo) {}

EpochSwitcher::~EpochSwitcher() { Shutdown(); }

void EpochSwitcher::Start() {
  loop_.Start("sg-epochs", options_.interval, /*first_at_once=*/true, [this] {
    Pass();
    return true;
  });
}

void EpochSwitcher::Shutdown() { loop_.Stop(); }

EpochSwitcherStats EpochSwitcher::Stats() const {
  const MutexLock lk(&mu_);
  return stats_;
}

bool EpochSwitcher::Switch(std::int64_t open_id, const char* reason) {
  for (int attempt = 1;; ++attempt) {
    const auto began = std::chrono::steady_clock::now();
    try {
      pqxx::work tx(conn_->c, "scangate_epoch_switch");
      tx.exec("SET LOCAL lock_timeout = " + std::to_string(options_.lock_timeout.count()));
      const std::optional<std::int64_t> min_keys =
          std::string_view(reason) == "size" ? std::optional<std::int64_t>(options_.max_keys) : std::nullopt;
      const pqxx::row r = tx.exec_params1(kSwitchSql, open_id, min_keys);
      tx.commit();
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
      if (r[0].is_null()) return false;  // an instance beside this one switched it first (or not past the bound)
      {
        const MutexLock lk(&mu_);
        ++stats_.switches;
        stats_.last_switch_seconds = seconds;
      }
      log_->Write(LogSeverity::kInfo, "epoch_switch",
                  {{"state", "switched"}, {"closed_epoch", std::to_string(open_id)}, {"reason", reason},
                   {"seconds", seconds},
                   {"attempts", attempt}});
      return true;
    } catch (const pqxx::sql_error& e) {
      if (SqlStateOf(e) != kLockNotAvailable) throw;
      {
        const MutexLock lk(&mu_);
        ++stats_.lock_timeouts;
      }
      if (attempt >= options_.attempts) {
        log_->Write(LogSeverity::kWarn, "epoch_switch",
                    {{"state", "postponed"}, {"reason", reason}, {"attempts", attempt},
                     {"effect", "the open epoch grows past its bound until a later pass gets the locks (a long "
                                "reader of scan_keys holds them); verdicts unaffected"}});
        return false;
      }
    }
    if (loop_.Wait(kRetryPause)) return false;
  }
}

bool EpochSwitcher::RunOnce() {
  try {
    if (target_.Changed(target_seen_)) conn_.reset();
    if (!conn_) conn_ = std::make_unique<Conn>(target_.Get(&target_seen_));
    pqxx::row view;
    {
      pqxx::nontransaction tx(conn_->c);
      view = tx.exec1(kViewSql);
    }
    const auto open_id = view[0].as<std::int64_t>();
    const double age = view[1].as<double>();
    const auto keys = view[2].as<std::int64_t>();
    const bool prepared = view[4].as<bool>();
    {
      const MutexLock lk(&mu_);
      stats_.open_keys = keys;
      stats_.open_age_seconds = age;
      stats_.closed_epochs = view[3].as<std::int64_t>();
    }
    if (!prepared) {
      pqxx::nontransaction tx(conn_->c);
      tx.exec(kPrepareSql);
    }
    const char* reason = nullptr;
    if (options_.max_keys > 0 && keys >= options_.max_keys) reason = "size";
    else if (options_.max_age.count() > 0 && age >= static_cast<double>(options_.max_age.count())) reason = "age";
    bool switched = false;
    if (reason != nullptr && Switch(open_id, reason)) {
      switched = true;
      pqxx::nontransaction tx(conn_->c);
      tx.exec(kPrepareSql);  // the next one, at once: a switch finds it ready
    }
    CloseOne();
    DropExpired();
    MergeTwo();
    const MutexLock lk(&mu_);
    ++stats_.passes;
    return switched;
  } catch (...) {
    conn_.reset();  // the session may be in any state: start afresh
    throw;
  }
}

void EpochSwitcher::CloseOne() {
  const auto began = std::chrono::steady_clock::now();
  const auto close = CloseOneEpoch(conn_->c, options_.lock_timeout, options_.attempts,
                                   [this](std::chrono::milliseconds d) { return loop_.Wait(d); });
  if (!close) return;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  {
    const MutexLock lk(&mu_);
    if (close->closed) {
      ++stats_.closes;
      stats_.last_close_seconds = seconds;
    } else {
      ++stats_.closes_postponed;
    }
  }
  if (close->closed) {
    log_->Write(LogSeverity::kInfo, "epoch_close",
                {{"state", "closed"}, {"epoch", std::to_string(close->epoch)}, {"keys", close->keys},
                 {"summary_bytes", close->summary_bytes}, {"compact_seconds", close->compact_seconds},
                 {"summary_seconds", close->summary_seconds}, {"swap_seconds", close->swap_seconds},
                 {"attempts", close->attempts}});
  } else {
    log_->Write(LogSeverity::kWarn, "epoch_close",
                {{"state", "postponed"}, {"epoch", std::to_string(close->epoch)}, {"attempts", close->attempts},
                 {"effect", "the epoch is probed row by row until a later pass gets the locks (a long reader of it "
                            "holds them); verdicts unaffected"}});
  }
}

void EpochSwitcher::DropExpired() {
  const std::int64_t retention_us = std::chrono::duration_cast<std::chrono::microseconds>(options_.retention).count();
  const std::optional<std::int64_t> guard =
      options_.clock == nullptr ? std::nullopt : options_.clock->GuardUs();
  pqxx::result dropped;
  try {
    pqxx::work tx(conn_->c, "scangate_epoch_drop");
    tx.exec("SET LOCAL lock_timeout = " + std::to_string(options_.lock_timeout.count()));
    dropped = tx.exec_params(kDropSql, retention_us, guard);
    tx.commit();
  } catch (const pqxx::sql_error& e) {
    if (SqlStateOf(e) != kLockNotAvailable) throw;
    const MutexLock lk(&mu_);
    ++stats_.lock_timeouts;  // a reader of an epoch past the horizon: the next pass drops it
    return;
  }
  for (const auto& row : dropped) {
    const auto keys = row[2].as<std::int64_t>();
    {
      const MutexLock lk(&mu_);
      ++stats_.drops;
      stats_.dropped_keys += static_cast<std::uint64_t>(keys);
    }
    log_->Write(LogSeverity::kInfo, "epoch_drop",
                {{"epoch", row[0].as<std::string>()}, {"relation", row[1].as<std::string>()}, {"keys", keys}});
  }
}

void EpochSwitcher::MergeTwo() {
  const auto merge =
      MergeTwoEpochs(conn_->c, options_.max_closed_epochs, options_.retention, options_.lock_timeout, options_.attempts,
                     [this](std::chrono::milliseconds d) { return loop_.Wait(d); });
  if (!merge) return;
  {
    const MutexLock lk(&mu_);
    if (merge->merged) {
      ++stats_.merges;
    } else {
      ++stats_.merges_postponed;
    }
  }
  boost::json::array ids;
  for (const std::int64_t id : merge->epochs) ids.emplace_back(std::to_string(id));
  log_->Write(merge->merged ? LogSeverity::kInfo : LogSeverity::kWarn, "epoch_merge",
              {{"state", merge->merged ? "merged" : "postponed"}, {"epochs", std::move(ids)},
               {"keys_before", merge->keys_before}, {"keys", merge->keys}, {"seconds", merge->seconds}});
}

// As the expiry's Pass (storage/horizon/expiry.cc); the events are literal for docs/metrics.md's check.
void EpochSwitcher::Pass() {
  std::string error;
  try {
    RunOnce();
    if (failing_) log_->Write(LogSeverity::kInfo, "epoch_switch", {{"state", "recovered"}});
    failing_ = false;
    return;
  } catch (const std::exception& e) {
    error = ErrorSummary(e.what());
  }
  {
    const MutexLock lk(&mu_);
    ++stats_.failures;
  }
  if (failing_) return;
  failing_ = true;
  log_->Write(LogSeverity::kWarn, "epoch_switch",
              {{"state", "failing"}, {"error", error},
               {"effect", "retried every pass; the open epoch grows past its bound and closing epochs wait meanwhile; "
                          "verdicts unaffected"}});
}

}  // namespace scangate::storage
