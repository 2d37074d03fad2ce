#include "storage/expiry.h"

#include <algorithm>
#include <exception>
#include <utility>

#include <pqxx/pqxx>

#include "storage/pg/error_summary.h"

namespace scangate::storage {
namespace {

// One slice: the oldest expired rows, at most $2 of them, locked (rows a writer is taking over, or another
// instance's expiry holds, are skipped), then deleted by ctid — one index-ordered read of the btree on
// first_seen (sql/004), no sort. $1 = the horizon in µs. Autocommit: each slice is its own transaction.
constexpr const char* kDeleteSliceSql = R"sql(
DELETE FROM scan_keys
WHERE ctid = ANY(ARRAY(
  SELECT ctid FROM scan_keys
  WHERE first_seen < now() - $1::int8 * interval '1 microsecond'
  ORDER BY first_seen
  LIMIT $2::int8
  FOR UPDATE SKIP LOCKED))
)sql";

// The vital signs: the oldest row's age in seconds (NULL: empty table; one descent of the btree), table and
// index bytes, and the statistics collector's dead and live tuple estimates (NULL before its first report).
constexpr const char* kVitalSignsSql = R"sql(
SELECT extract(epoch FROM now() - (SELECT min(first_seen) FROM scan_keys))::float8,
       pg_table_size('scan_keys'::regclass),
       pg_indexes_size('scan_keys'::regclass),
       (SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = 'scan_keys'::regclass),
       (SELECT n_live_tup FROM pg_stat_user_tables WHERE relid = 'scan_keys'::regclass)
)sql";

// An expiry this far behind (oldest row older than this times the horizon) is logged and counted.
constexpr double kBehindFactor = 1.5;

std::chrono::milliseconds DeriveInterval(const ExpiryOptions& o) {
  if (o.interval.count() > 0) return o.interval;
  if (o.retention.count() <= 0) return std::chrono::seconds(60);
  const auto tenth = std::chrono::duration_cast<std::chrono::milliseconds>(o.retention) / 10;
  return std::clamp<std::chrono::milliseconds>(tenth, std::chrono::seconds(1), std::chrono::seconds(60));
}

}  // namespace

struct Expiry::Conn {
  explicit Conn(const std::string& conninfo) : c(conninfo) {}
  pqxx::connection c;
};

Expiry::Expiry(ExpiryOptions options)
    : options_(std::move(options)),
      interval_(DeriveInterval(options_)),
      log_(options_.log ? options_.log : StderrLogSink()) {}

Expiry::~Expiry() { Shutdown(); }

void Expiry::Start() {
  loop_.Start("sg-expiry", interval_, /*first_at_once=*/true, [this] {
    Pass();
    return true;
  });
}

void Expiry::Shutdown() { loop_.Stop(); }

ExpiryStats Expiry::Stats() const {
  const MutexLock lk(&mu_);
  return stats_;
}

std::uint64_t Expiry::RunOnce() {
  try {
    if (!conn_) conn_ = std::make_unique<Conn>(options_.conninfo);
    std::uint64_t deleted = 0;
    if (options_.retention.count() > 0) {
      const auto horizon_us = std::chrono::duration_cast<std::chrono::microseconds>(options_.retention).count();
      for (;;) {
        const auto t0 = std::chrono::steady_clock::now();
        pqxx::nontransaction tx(conn_->c);
        const auto n = static_cast<std::uint64_t>(
            tx.exec_params(kDeleteSliceSql, horizon_us, options_.slice_rows).affected_rows());
        deleted += n;
        {
          const MutexLock lk(&mu_);
          stats_.rows_expired += n;
        }
        if (n < static_cast<std::uint64_t>(options_.slice_rows)) break;  // nothing more expired (or all locked)
        // A backlog (e.g. the first start with a horizon on a large table): at most half of one backend's time,
        // so the expiry never crowds out the writers. Shutdown() cuts the pause short.
        const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
        if (loop_.Wait(std::max(took, std::chrono::milliseconds(1)))) break;
      }
    }
    pqxx::nontransaction tx(conn_->c);
    const pqxx::row v = tx.exec1(kVitalSignsSql);
    std::optional<double> oldest;
    if (!v[0].is_null()) oldest = v[0].as<double>();
    {
      const MutexLock lk(&mu_);
      ++stats_.passes;
      stats_.oldest_age_seconds = oldest;
      stats_.table_bytes = v[1].as<std::int64_t>();
      stats_.index_bytes = v[2].as<std::int64_t>();
      stats_.dead_tuples = v[3].is_null() ? 0 : v[3].as<std::int64_t>();
      stats_.live_tuples = v[4].is_null() ? 0 : v[4].as<std::int64_t>();
      const double horizon = static_cast<double>(options_.retention.count());
      stats_.lag_seconds = options_.retention.count() > 0 && oldest ? std::max(0.0, *oldest - horizon) : 0.0;
    }
    NoteAge(oldest);
    return deleted;
  } catch (...) {
    // After an error the session may be in any state (e.g. a statement_timeout mid-slice): start afresh.
    conn_.reset();
    throw;
  }
}

void Expiry::NoteAge(std::optional<double> oldest_age_seconds) {
  if (options_.retention.count() <= 0) return;
  const double horizon = static_cast<double>(options_.retention.count());
  const bool behind = oldest_age_seconds && *oldest_age_seconds > kBehindFactor * horizon;
  bool changed = false;
  {
    const MutexLock lk(&mu_);
    if (behind != stats_.behind) {
      changed = true;
      stats_.behind = behind;
      if (behind) ++stats_.behind_events;
    }
  }
  if (!changed) return;
  if (behind) {
    log_->Write(LogSeverity::kWarn, "expiry_behind",
                {{"state", "behind"}, {"oldest_age_s", *oldest_age_seconds}, {"retention_s", horizon},
                 {"effect", "verdicts stay exact (expired rows count as absent); the table holds more than the "
                            "horizon until the expiry catches up"}});
  } else {
    log_->Write(LogSeverity::kInfo, "expiry_behind", {{"state", "caught_up"}, {"retention_s", horizon}});
  }
}

void Expiry::Pass() {
  std::string error;
  try {
    RunOnce();
    if (failing_) log_->Write(LogSeverity::kInfo, "expiry", {{"state", "recovered"}});
    failing_ = false;
    return;
  } catch (const std::exception& e) {
    error = ErrorSummary(e.what());
  }
  {
    const MutexLock lk(&mu_);
    ++stats_.failures;
  }
  if (!failing_) {
    log_->Write(LogSeverity::kWarn, "expiry",
                {{"state", "failing"}, {"error", error}, {"effect", "retried every pass; verdicts unaffected"}});
    failing_ = true;
  }
}

}  // namespace scangate::storage
