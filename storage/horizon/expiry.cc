#include "storage/horizon/expiry.h"

#include <algorithm>
#include <exception>
#include <string>
#include <string_view>
#include <utility>

#include <boost/json/object.hpp>
#include <pqxx/pqxx>

#include "storage/pg/error_summary.h"
#include "storage/pg/table_layout.h"

namespace scangate::storage {
namespace {

// One slice: the oldest expired rows without a keep_until, at most $2 of them, locked (rows a writer is taking
// over, or another instance's expiry holds, are skipped), then deleted by ctid — one index-ordered read of the
// partial btree on first_seen (sql/006, which holds exactly the rows without a keep_until), no sort. $1 = the
// horizon in µs. Autocommit: each slice is its own transaction.
// {KEY} is that btree's (leading) key, {CUT} the horizon's edge in it: first_seen itself (the layout of sql/006), or
// its second (sql/013's index leads with it, then the transaction), where only whole seconds before the edge's are
// taken — a row expired less than a second ago waits for the next pass; none is ever taken before it expired.
constexpr const char* kDeleteSliceSql = R"sql(
DELETE FROM scan_keys
WHERE ctid = ANY(ARRAY(
  SELECT ctid FROM scan_keys
  WHERE keep_until IS NULL AND {KEY} < {CUT} AND {GUARD}
  ORDER BY {KEY}
  LIMIT $2::int8
  FOR UPDATE SKIP LOCKED))
)sql";

// The pack slice: the rows whose own keep_until has passed, earliest first, at most $1, as above — through the
// partial btree on keep_until (sql/006; `keep_until < x` implies the index's `keep_until IS NOT NULL`). Both slices'
// edges are less every forward step of PostgreSQL's clock recorded (sql/017): a row is deleted only once it is past
// its horizon whatever steps came after it.
constexpr const char* kDeleteKeepUntilSliceSql = R"sql(
DELETE FROM scan_keys
WHERE ctid = ANY(ARRAY(
  SELECT ctid FROM scan_keys
  WHERE keep_until < now() - (SELECT scangate_clock_ahead_total()) AND ($2::int8 IS NULL OR now() <= 'epoch'::timestamptz + $2::int8 * interval '1 microsecond')
  ORDER BY keep_until
  LIMIT $1::int8
  FOR UPDATE SKIP LOCKED))
)sql";

// The vital signs: the oldest unpinned row's age in seconds and the earliest keep_until's distance from now
// (NULL: no such row; one descent of each partial btree), table and index bytes, and the statistics
// collector's dead and live tuple estimates (NULL before its first report). {OLDEST}: the oldest first_seen as
// the btree holds it (sql/013's: its second, so the age may read up to a second more).
constexpr const char* kVitalSignsSql = R"sql(
SELECT extract(epoch FROM now() - (SELECT {OLDEST} FROM scan_keys WHERE keep_until IS NULL))::float8,
       pg_table_size('scan_keys'::regclass),
       pg_indexes_size('scan_keys'::regclass),
       (SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = 'scan_keys'::regclass),
       (SELECT n_live_tup FROM pg_stat_user_tables WHERE relid = 'scan_keys'::regclass),
       extract(epoch FROM (SELECT min(keep_until) FROM scan_keys WHERE keep_until IS NOT NULL) - now())::float8
)sql";

// The first_seen btree's key in each layout (storage/pg/table_layout.h): the statements above for it.
std::string ForKey(std::string_view sql, TableLayout layout) {
  constexpr std::string_view kSecond = "date_trunc('second', first_seen AT TIME ZONE 'UTC')";
  // Less every forward step of the clock recorded (sql/017): a row the clock ages early is deleted late, never early.
  constexpr std::string_view kCut = "now() - $1::int8 * interval '1 microsecond' - (SELECT scangate_clock_ahead_total())";
  // Nothing while PostgreSQL's now() is past the instance's bounds of its clock ($3, µs; NULL: no bounds to judge
  // by): a step forward not recorded yet (ExpiryOptions::clock). No column in it: a one-time filter.
  constexpr std::string_view kGuard = "($3::int8 IS NULL OR now() <= 'epoch'::timestamptz + $3::int8 * interval '1 microsecond')";
  if (layout == TableLayout::kBytea32) {
    return Substitute(sql, {{"{KEY}", "first_seen"}, {"{CUT}", kCut}, {"{GUARD}", kGuard}, {"{OLDEST}", "min(first_seen)"}});
  }
  const std::string cut = "date_trunc('second', (" + std::string(kCut) + ") AT TIME ZONE 'UTC')";
  const std::string oldest = "min(" + std::string(kSecond) + ") AT TIME ZONE 'UTC'";
  return Substitute(sql, {{"{KEY}", kSecond}, {"{CUT}", cut}, {"{GUARD}", kGuard}, {"{OLDEST}", oldest}});
}

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
      log_(options_.log ? options_.log : StderrLogSink()),
      target_(options_.conninfo) {}

Expiry::~Expiry() { Shutdown(); }

void Expiry::Start() {
  loop_.Start("sg-expiry", interval_, /*first_at_once=*/true, [this] {
    Pass();
    return true;
  });
}

void Expiry::Shutdown() { loop_.Stop(); }

std::optional<std::int64_t> Expiry::Guard() const {
  return options_.clock == nullptr ? std::nullopt : options_.clock->GuardUs();
}

ExpiryStats Expiry::Stats() const {
  const MutexLock lk(&mu_);
  return stats_;
}

template <typename Slice>
std::uint64_t Expiry::DeleteSlices(Slice slice, bool keep_until) {
  std::uint64_t deleted = 0;
  for (;;) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto n = static_cast<std::uint64_t>(slice());
    deleted += n;
    {
      const MutexLock lk(&mu_);
      stats_.rows_expired += n;
      if (keep_until) stats_.rows_expired_keep_until += n;
    }
    if (n < static_cast<std::uint64_t>(options_.slice_rows)) break;  // nothing more expired (or all locked)
    // A backlog (e.g. the first start with a horizon on a large table): at most half of one backend's time,
    // so the expiry never crowds out the writers. Shutdown() cuts the pause short.
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
    if (loop_.Wait(std::max(took, std::chrono::milliseconds(1)))) break;
  }
  return deleted;
}

std::uint64_t Expiry::RunOnce() {
  try {
    if (target_.Changed(target_seen_)) conn_.reset();  // retargeted: the old database is left
    if (!conn_) conn_ = std::make_unique<Conn>(target_.Get(&target_seen_));
    // Read every pass: the table may have moved to sql/013's layout (its online swap) since the last one.
    const TableLayout layout = ReadTableLayout(conn_->c);
    std::uint64_t deleted = 0;
    if (options_.retention.count() > 0) {
      const auto horizon_us = std::chrono::duration_cast<std::chrono::microseconds>(options_.retention).count();
      const std::string sql = ForKey(kDeleteSliceSql, layout);
      deleted += DeleteSlices(
          [&] {
            pqxx::nontransaction tx(conn_->c);
            return tx.exec_params(sql, horizon_us, options_.slice_rows, Guard()).affected_rows();
          },
          false);
    }
    if (options_.pack_horizons) {
      deleted += DeleteSlices(
          [&] {
            pqxx::nontransaction tx(conn_->c);
            return tx.exec_params(kDeleteKeepUntilSliceSql, options_.slice_rows, Guard()).affected_rows();
          },
          true);
    }
    pqxx::nontransaction tx(conn_->c);
    const pqxx::row v = tx.exec1(ForKey(kVitalSignsSql, layout));
    std::optional<double> oldest, earliest;
    if (!v[0].is_null()) oldest = v[0].as<double>();
    if (!v[5].is_null()) earliest = v[5].as<double>();
    {
      const MutexLock lk(&mu_);
      ++stats_.passes;
      stats_.oldest_age_seconds = oldest;
      stats_.earliest_keep_until_in_seconds = earliest;
      stats_.table_bytes = v[1].as<std::int64_t>();
      stats_.index_bytes = v[2].as<std::int64_t>();
      stats_.dead_tuples = v[3].is_null() ? 0 : v[3].as<std::int64_t>();
      stats_.live_tuples = v[4].is_null() ? 0 : v[4].as<std::int64_t>();
      const double horizon = static_cast<double>(options_.retention.count());
      double lag = options_.retention.count() > 0 && oldest ? std::max(0.0, *oldest - horizon) : 0.0;
      if (options_.pack_horizons && earliest) lag = std::max(lag, -*earliest);
      stats_.lag_seconds = lag;
    }
    NoteAge(oldest, earliest);
    return deleted;
  } catch (...) {
    // After an error the session may be in any state (e.g. a statement_timeout mid-slice): start afresh.
    conn_.reset();
    throw;
  }
}

void Expiry::NoteAge(std::optional<double> oldest_age_seconds, std::optional<double> earliest_keep_until_in_seconds) {
  const bool by_retention = options_.retention.count() > 0;
  if (!by_retention && !options_.pack_horizons) return;
  const double horizon = static_cast<double>(options_.retention.count());
  const double pass_seconds = std::chrono::duration<double>(interval_).count();
  const bool behind_retention = by_retention && oldest_age_seconds && *oldest_age_seconds > kBehindFactor * horizon;
  const bool behind_packs = options_.pack_horizons && earliest_keep_until_in_seconds &&
                            -*earliest_keep_until_in_seconds > kBehindFactor * pass_seconds;
  const bool behind = behind_retention || behind_packs;
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
    boost::json::object fields{{"state", "behind"}, {"retention_s", horizon},
                               {"effect", "verdicts stay exact (expired rows count as absent); the table holds more "
                                          "than the horizon until the expiry catches up"}};
    if (oldest_age_seconds) fields["oldest_age_s"] = *oldest_age_seconds;
    if (behind_packs) fields["keep_until_overdue_s"] = -*earliest_keep_until_in_seconds;
    log_->Write(LogSeverity::kWarn, "expiry_behind", std::move(fields));
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
