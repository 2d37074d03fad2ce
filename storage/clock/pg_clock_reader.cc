#include "storage/clock/pg_clock_reader.h"

#include <cmath>
#include <cstdlib>
#include <optional>
#include <utility>

#include "core/thread_name.h"
#include "storage/pg/error_summary.h"
#include "storage/pg/pg_exec.h"

namespace scangate::storage {
namespace {

// The clock in µs since the epoch, as an integer (no parsing of a timestamp's text). clock_timestamp(), not now():
// the statement's own moment, inside the round trip (now() is the transaction's start, the same here, but said).
// With the database's clock epoch (sql/016; opened first when the server restarted): the reading's regime; and the
// forward and back steps recorded so far (sql/017), in µs, for PgClock::AheadUs and BehindUs.
constexpr const char* kReadSql =
    "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::int8, scangate_clock_epoch(), "
    "(extract(epoch FROM scangate_clock_ahead_total()) * 1000000)::int8, "
    "(extract(epoch FROM scangate_clock_behind(NULL)) * 1000000)::int8";
// A step seen within one epoch (PgClock::Record): the next epoch, unless another instance opened it since (issue 55).
constexpr const char* kStepSql = "SELECT scangate_clock_step($1::int8)";
// Any step seen: its size, recorded for the epoch it led to (sql/017), so PostgreSQL ages the rows stamped before it
// by the real time since, not by the clock's jump. $1 the epoch measured from, $2 the step's, $3 the step in µs,
// $4 PgClockStep::before_us.
constexpr const char* kRecordStepSql = "SELECT scangate_clock_record_step($1::int8, $2::int8, $3::int8, $4::int8)";
// A reading unanswered this long is given up (statement_timeout 1 s on the server first): only a tight round trip
// is worth keeping anyway, and the bounds held stay valid meanwhile.
constexpr auto kReadBound = std::chrono::seconds(2);
constexpr auto kStatementTimeout = std::chrono::seconds(1);
constexpr auto kStartWait = std::chrono::seconds(2);

}  // namespace

struct PgClockReader::Session {
  PgConnPtr conn;
  std::uint64_t generation = 0;
};

PgClockReader::PgClockReader(PgClock& clock, PgClockReaderOptions options)
    : clock_(clock), options_(std::move(options)), target_(options_.conninfo), session_(std::make_unique<Session>()) {
  if (!options_.log) options_.log = StderrLogSink();
  options_.connection.application_name = "scangate-clock";
  options_.connection.statement_timeout = kStatementTimeout;
}

PgClockReader::~PgClockReader() { Stop(); }

bool PgClockReader::ReadOnce(Session& s) {
  std::string error;
  if (std::uint64_t seen = s.generation; target_.Changed(seen)) s.conn.reset();  // moved: read the new server
  if (!s.conn) {
    try {
      const std::string conninfo = WithConnectionDefaults(target_.Get(&s.generation), options_.connection);
      PgConnPtr c(PQconnectdb(conninfo.c_str()));
      DropNotices(c.get());
      if (!c || PQstatus(c.get()) != CONNECTION_OK) {
        error = "clock connection: " + ErrorSummary(c ? PQerrorMessage(c.get()) : "out of memory");
      } else {
        s.conn = std::move(c);
      }
    } catch (const std::exception& e) {  // an unparsable string (the map's are checked before they get here)
      error = e.what();
    }
  }
  if (s.conn) {
    const auto sent = std::chrono::steady_clock::now();
    PgResultPtr r = ExecWithin(s.conn.get(), kReadSql, {}, false, kReadBound, stop_, &error);
    const auto answered = std::chrono::steady_clock::now();
    if (r && PQresultStatus(r.get()) == PGRES_TUPLES_OK && PQntuples(r.get()) == 1) {
      const std::int64_t epoch = std::strtoll(PQgetvalue(r.get(), 0, 1), nullptr, 10);
      const std::optional<PgClockStep> step =
          clock_.Record({std::strtoll(PQgetvalue(r.get(), 0, 0), nullptr, 10), sent, answered, epoch});
      clock_.SetSteps(std::strtoll(PQgetvalue(r.get(), 0, 2), nullptr, 10),
                      std::strtoll(PQgetvalue(r.get(), 0, 3), nullptr, 10));
      // Moved while this reading was on its way: it may be the old server's. Retarget sets the target before it
      // forgets the clock, so either its Forget comes after this Record, or the change is seen here.
      if (std::uint64_t seen = s.generation; target_.Changed(seen)) {
        clock_.Forget();
        s.conn.reset();
        return false;
      }
      if (step) OnStep(s, *step, epoch);
      if (!last_error_.empty()) {
        last_error_.clear();
        options_.log->Write(LogSeverity::kInfo, "pg_clock", {{"state", "up"}, {"partition", options_.label}});
      }
      return true;
    }
    if (r) error = "clock reading: " + ErrorSummary(PQresultErrorMessage(r.get()));
    s.conn.reset();
  }
  if (error != last_error_ && !stop_.load()) {
    last_error_ = error;
    options_.log->Write(LogSeverity::kWarn, "pg_clock",
                        {{"state", "down"}, {"partition", options_.label}, {"error", error}});
  }
  return false;
}

void PgClockReader::OnStep(Session& s, const PgClockStep& step, std::int64_t epoch) {
  // The bounds are still the old clock's (PgClock::Record keeps the step's reading pending). Within one epoch, the
  // next epoch makes every instance's watermark of the old clock cover nothing until it publishes again (issue 55):
  // opened before the next reading. Across epochs (a restart, a failover, another instance's step) it is open
  // already.
  std::string error;
  std::int64_t opened = epoch;
  bool recorded = false;
  if (step.from_epoch == epoch) {
    const std::string seen = std::to_string(epoch);
    const char* const params[] = {seen.c_str()};
    PgResultPtr r = ExecWithin(s.conn.get(), kStepSql, params, false, kReadBound, stop_, &error);
    if (r && PQresultStatus(r.get()) == PGRES_TUPLES_OK && PQntuples(r.get()) == 1) {
      opened = std::strtoll(PQgetvalue(r.get(), 0, 0), nullptr, 10);
    } else {
      // Not opened: the bounds keep the old number, and the publishers' own checks (which saw the same step) open
      // it; this reader tries again at its next step only. Said in the event.
      error = "opening the next clock epoch: " + (r ? ErrorSummary(PQresultErrorMessage(r.get())) : error);
      if (!r) s.conn.reset();  // unanswered (pg_exec.h): the connection is dropped; the next reading reconnects
    }
  }
  // The step's size for the epoch it led to: PostgreSQL then ages the rows stamped before it by the time since, not
  // by the jump (sql/017). Not recorded (an error, or the epoch not opened): rows within the step of the horizon may
  // be taken over that much early; said in the event.
  if (opened != step.from_epoch && s.conn) {
    const std::string from = std::to_string(step.from_epoch), to = std::to_string(opened),
                      us = std::to_string(static_cast<std::int64_t>(std::llround(step.seconds * 1e6))),
                      before = std::to_string(step.before_us);
    const char* const params[] = {from.c_str(), to.c_str(), us.c_str(), before.c_str()};
    std::string record_error;
    PgResultPtr r = ExecWithin(s.conn.get(), kRecordStepSql, params, false, kReadBound, stop_, &record_error);
    if (r && PQresultStatus(r.get()) == PGRES_TUPLES_OK) {
      recorded = true;
    } else {
      record_error = r ? ErrorSummary(PQresultErrorMessage(r.get())) : record_error;
      if (!r) s.conn.reset();
      error += (error.empty() ? "" : "; ") + std::string("recording the step: ") + record_error;
    }
  }
  // The new clock from now on, recorded or not (a database that cannot record it must not hold the bounds back for
  // ever; the event says so).
  clock_.AcceptStep(opened);
  const auto o = clock_.OffsetNow();
  boost::json::object f{{"state", "stepped"}, {"by", step.from_epoch == epoch ? "clock" : "epoch"},
                        {"partition", options_.label}, {"step_seconds", step.seconds},
                        {"epoch_before", step.from_epoch}, {"epoch", opened}, {"recorded", recorded},
                        {"note", "PostgreSQL's clock stepped: the bounds were re-established from the new clock, "
                                 "every instance's watermark of the old one covers nothing until it publishes again, "
                                 "and rows written before the step age by the time since, not by the jump"}};
  if (o) f["offset_seconds"] = o->seconds;
  if (!error.empty()) f["error"] = error;
  options_.log->Write(LogSeverity::kWarn, "pg_clock", std::move(f));
}

bool PgClockReader::Start() {
  thread_ = std::thread([this] {
    SetThreadName("sg-pg-clock");
    Run();
  });
  // The first reading on the thread, waited for at most kStartWait: a partition that is down must not hold the
  // start for its connect_timeout.
  const auto deadline = std::chrono::steady_clock::now() + kStartWait;
  while (!clock_.LowerUs() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(kPgWaitSlice);
  const auto o = clock_.OffsetNow();
  if (o) {
    // An instance whose clock is far off PostgreSQL's works the same (first_seen and the horizon follow
    // PostgreSQL's clock), but its own log timestamps are off: said once at start.
    options_.log->Write(std::abs(o->seconds) > 1 ? LogSeverity::kWarn : LogSeverity::kInfo, "pg_clock",
                        {{"partition", options_.label},
                         {"offset_seconds", o->seconds},
                         {"uncertainty_seconds", o->uncertainty}});
  }
  return o.has_value();
}

void PgClockReader::Run() {
  while (!stop_.load()) {
    const auto next = std::chrono::steady_clock::now() + options_.interval;
    ReadOnce(*session_);
    while (!stop_.load() && std::chrono::steady_clock::now() < next) std::this_thread::sleep_for(kPgWaitSlice);
  }
  session_->conn.reset();
}

void PgClockReader::Stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

void PgClockReader::Retarget(std::string conninfo) {
  target_.Set(std::move(conninfo));
  clock_.Forget();  // the new server's clock is unknown until read: its keys are decided in PostgreSQL meanwhile
}

}  // namespace scangate::storage
