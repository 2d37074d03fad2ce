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
// With the database's clock epoch (sql/016; opened first when the server restarted): the reading's regime.
constexpr const char* kReadSql =
    "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::int8, scangate_clock_epoch()";
// A step seen (PgClock::Record): the next epoch, unless another instance opened it since (issue 55).
constexpr const char* kStepSql = "SELECT scangate_clock_step($1::int8)";
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
      const std::optional<double> step =
          clock_.Record({std::strtoll(PQgetvalue(r.get(), 0, 0), nullptr, 10), sent, answered, epoch});
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

void PgClockReader::OnStep(Session& s, double step_seconds, std::int64_t epoch) {
  // The bounds are already the new reading's alone (of the new clock). The next epoch makes every instance's
  // watermark of the old clock cover nothing until it publishes again (issue 55): opened before the next reading.
  std::string error;
  std::int64_t opened = epoch;
  const std::string seen = std::to_string(epoch);
  const char* const params[] = {seen.c_str()};
  PgResultPtr r = ExecWithin(s.conn.get(), kStepSql, params, false, kReadBound, stop_, &error);
  if (r && PQresultStatus(r.get()) == PGRES_TUPLES_OK && PQntuples(r.get()) == 1) {
    opened = std::strtoll(PQgetvalue(r.get(), 0, 0), nullptr, 10);
    clock_.Reepoch(epoch, opened);
  } else {
    // Not opened: the bounds keep the old number, and the publishers' own checks (which saw the same step) open
    // it; this reader tries again at its next step only. Said in the event.
    error = r ? ErrorSummary(PQresultErrorMessage(r.get())) : error;
    if (!r) s.conn.reset();  // unanswered (pg_exec.h): the connection is dropped; the next reading reconnects
  }
  const auto o = clock_.OffsetNow();
  boost::json::object f{{"state", "stepped"}, {"by", "clock"}, {"partition", options_.label},
                        {"step_seconds", step_seconds}, {"epoch_before", epoch}, {"epoch", opened},
                        {"note", "PostgreSQL's clock stepped: the bounds were re-established from the new clock, and "
                                 "every instance's watermark of the old one covers nothing until it publishes again"}};
  if (o) f["offset_seconds"] = o->seconds;
  if (!error.empty()) f["error"] = "opening the next clock epoch: " + error;
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
