#include "storage/clock/pg_clock_reader.h"

#include <cmath>
#include <cstdlib>
#include <utility>

#include "core/thread_name.h"
#include "storage/pg/error_summary.h"
#include "storage/pg/pg_exec.h"

namespace scangate::storage {
namespace {

// The clock in µs since the epoch, as an integer (no parsing of a timestamp's text). clock_timestamp(), not now():
// the statement's own moment, inside the round trip (now() is the transaction's start, the same here, but said).
constexpr const char* kReadSql = "SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::int8";
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
      clock_.Record({std::strtoll(PQgetvalue(r.get(), 0, 0), nullptr, 10), sent, answered});
      // Moved while this reading was on its way: it may be the old server's. Retarget sets the target before it
      // forgets the clock, so either its Forget comes after this Record, or the change is seen here.
      if (std::uint64_t seen = s.generation; target_.Changed(seen)) {
        clock_.Forget();
        s.conn.reset();
        return false;
      }
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
