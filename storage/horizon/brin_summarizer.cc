#include "storage/horizon/brin_summarizer.h"

#include <exception>
#include <utility>

#include <pqxx/pqxx>

#include "storage/pg/error_summary.h"
#include "storage/pg/sql_state.h"

namespace scangate::storage {
namespace {

// After connecting: wait at most this long for the table lock. A VACUUM of the table (manual or autovacuum,
// which summarizes the ranges too) holds it for its whole run; skipping a turn is free, queueing is not (a
// waiting SHARE UPDATE EXCLUSIVE request would make later lockers, e.g. a migration, queue behind it).
constexpr const char* kSessionSql = "SET lock_timeout = '1s'";
constexpr const char* kSummarizeSql = "SELECT brin_summarize_new_values('scan_keys_first_seen_brin'::regclass)";

constexpr std::string_view kLockNotAvailable = "55P03";
constexpr std::string_view kInsufficientPrivilege = "42501";
constexpr std::string_view kUndefinedTable = "42P01";  // ::regclass of a missing index

}  // namespace

struct BrinSummarizer::Conn {
  explicit Conn(const std::string& conninfo) : c(conninfo) {}
  pqxx::connection c;
};

BrinSummarizer::BrinSummarizer(BrinSummarizerOptions options)
    : options_(std::move(options)), log_(options_.log ? options_.log : StderrLogSink()), target_(options_.conninfo) {}

BrinSummarizer::~BrinSummarizer() { Shutdown(); }

void BrinSummarizer::Start() {
  loop_.Start("sg-brin", options_.interval, /*first_at_once=*/false, [this] { return Pass(); });
}

void BrinSummarizer::Shutdown() { loop_.Stop(); }

BrinSummarizerStats BrinSummarizer::Stats() const {
  const MutexLock lk(&mu_);
  return stats_;
}

int BrinSummarizer::RunOnce() {
  try {
    if (target_.Changed(target_seen_)) conn_.reset();  // retargeted: the old database is left
    if (!conn_) {
      conn_ = std::make_unique<Conn>(target_.Get(&target_seen_));
      pqxx::nontransaction session(conn_->c);
      session.exec(kSessionSql);
    }
    // Autocommit: the function summarizes range by range; there is nothing to roll back.
    pqxx::nontransaction tx(conn_->c);
    const int ranges = tx.exec1(kSummarizeSql)[0].as<int>();
    const MutexLock lk(&mu_);
    ++stats_.passes;
    stats_.ranges += static_cast<std::uint64_t>(ranges);
    return ranges;
  } catch (...) {
    // After an error the session may be in any state (e.g. a statement_timeout mid-pass): start afresh.
    conn_.reset();
    throw;
  }
}

bool BrinSummarizer::Pass() {
  std::string error, sqlstate;
  try {
    RunOnce();
    if (failing_) log_->Write(LogSeverity::kInfo, "brin_summarize", {{"state", "recovered"}});
    failing_ = false;
    return true;
  } catch (const pqxx::sql_error& e) {
    error = ErrorSummary(e.what());
    sqlstate = SqlStateOf(e);
  } catch (const std::exception& e) {
    error = ErrorSummary(e.what());
  }
  {
    const MutexLock lk(&mu_);
    ++stats_.failures;
  }
  if (sqlstate == kInsufficientPrivilege || sqlstate == kUndefinedTable) {
    // Retrying cannot help: the index belongs to another role, or this database has no such index.
    // Results are unaffected (unsummarized ranges are read); autovacuum's VACUUM still summarizes.
    {
      const MutexLock lk(&mu_);
      stats_.stopped = true;
    }
    log_->Write(LogSeverity::kWarn, "brin_summarize",
                {{"state", "stopped"}, {"sqlstate", sqlstate}, {"error", error},
                 {"effect", "ranges are summarized by VACUUM only; warm starts read more of the table"}});
    return false;
  }
  // A lock timeout means a VACUUM holds the table (and summarizes it): normal, not worth a log line.
  if (sqlstate != kLockNotAvailable && !failing_) {
    log_->Write(LogSeverity::kWarn, "brin_summarize", {{"state", "failing"}, {"error", error}});
    failing_ = true;
  }
  return true;
}

}  // namespace scangate::storage
