#include "storage/peers/watermark_publisher.h"

#include <unistd.h>

#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "core/boot_clock.h"
#include "core/thread_name.h"
#include "storage/peers/peer_connection.h"

namespace scangate::storage {
namespace {

using peers_detail::ConnPtr;
using peers_detail::Exec;
using peers_detail::PeerError;
using peers_detail::ResultPtr;

// The updates' commits need not wait for their WAL flush: a row only ever claims commits that were themselves
// acknowledged (synchronously) before it was written, so an update lost to a crash or a failover leaves an older,
// smaller covered_until — the others wait a little longer, never trust more. Spares every 50 ms update its flush.
// The registration is the exception (kSyncSql around it): lost, the others would not know this instance exists.
constexpr const char* kSessionSql = "SET synchronous_commit = off";
constexpr const char* kSyncSql = "SET synchronous_commit = on";
constexpr const char* kNowSql = "SELECT (extract(epoch FROM now()) * 1000000)::int8";
constexpr const char* kPreviousSql =
    "SELECT state FROM scangate_instances WHERE instance_id = $1::uuid AND partition = $2::int";
// $3: covered_until in µs since the epoch, NULL = unchanged (a recovered record of unknown age is outstanding).
constexpr const char* kRegisterSql = R"sql(
INSERT INTO scangate_instances AS i
  (instance_id, partition, state, covered_until, heartbeat_at, started_at, host, pid, uncommitted)
VALUES ($1::uuid, $2::int, 'running',
        coalesce('epoch'::timestamptz + $3::int8 * interval '1 microsecond', 'epoch'::timestamptz),
        now(), now(), $4, $5::int, $6::int8)
ON CONFLICT (instance_id, partition) DO UPDATE
  SET state = 'running', covered_until = greatest(i.covered_until, excluded.covered_until), heartbeat_at = now(),
      started_at = now(), host = excluded.host, pid = excluded.pid, uncommitted = excluded.uncommitted,
      retired_at = NULL
RETURNING (extract(epoch FROM now()) * 1000000)::int8, (extract(epoch FROM now() - i.covered_until) * 1000000)::int8
)sql";
constexpr const char* kBeatSql = R"sql(
UPDATE scangate_instances
   SET covered_until = greatest(covered_until, 'epoch'::timestamptz + $3::int8 * interval '1 microsecond'),
       heartbeat_at = now(), uncommitted = $4::int8
 WHERE instance_id = $1::uuid AND partition = $2::int AND state = 'running'
RETURNING (extract(epoch FROM now()) * 1000000)::int8, (extract(epoch FROM now() - covered_until) * 1000000)::int8
)sql";
constexpr const char* kStopSql = R"sql(
UPDATE scangate_instances
   SET state = 'stopped', heartbeat_at = now(), uncommitted = 0,
       covered_until = greatest(covered_until, 'epoch'::timestamptz + $3::int8 * interval '1 microsecond')
 WHERE instance_id = $1::uuid AND partition = $2::int AND state = 'running'
)sql";

// Floor division (a lower bound must round down, negative differences included).
std::int64_t FloorDiv(std::int64_t a, std::int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return {};
  return buf;
}

}  // namespace

// One connection and its latest clock sample: a statement answered at boot time r_ns whose now() was t_us, so
// PG(x) >= t_us + (x - r_ns) for any boot time x (peer_view.h, the argument, 2.).
struct WatermarkPublisher::Session {
  ConnPtr conn;
  std::int64_t t_us = 0;
  std::int64_t r_ns = 0;
  // PostgreSQL's clock at boot time x, a lower bound (µs since the epoch).
  std::int64_t LowerUs(std::int64_t x_ns) const { return t_us + FloorDiv(x_ns - r_ns, 1000); }
  // Runs `sql` and takes its first column (now() in µs) as the new clock sample; nullopt when it returned no row.
  std::optional<std::int64_t> Timed(const char* sql, const std::vector<std::optional<std::string>>& params,
                                    const char* what) {
    ResultPtr r = Exec(conn.get(), sql, params, what);
    const std::int64_t received = BootClock::NowNs();
    if (PQntuples(r.get()) == 0) return std::nullopt;
    t_us = std::stoll(PQgetvalue(r.get(), 0, 0));
    r_ns = received;
    if (PQnfields(r.get()) > 1 && !PQgetisnull(r.get(), 0, 1)) return std::stoll(PQgetvalue(r.get(), 0, 1));
    return std::int64_t{0};
  }
};

WatermarkPublisher::WatermarkPublisher(WatermarkPublisherOptions options) : options_(std::move(options)) {
  if (!options_.log) options_.log = StderrLogSink();
  MutexLock lock(&mu_);
  conninfo_ = options_.conninfo;
}

WatermarkPublisher::~WatermarkPublisher() { Stop(false); }

void WatermarkPublisher::Start() {
  thread_ = std::thread([this] {
    SetThreadName("sg-watermark");
    Run();
  });
}

void WatermarkPublisher::Stop(bool clean) {
  clean_.store(clean);
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

void WatermarkPublisher::Retarget(std::string conninfo) {
  {
    MutexLock lock(&mu_);
    conninfo_ = std::move(conninfo);
  }
  retarget_.store(true);
}

void WatermarkPublisher::Fail(const std::string& what) {
  failures_.fetch_add(1);
  {
    MutexLock lock(&mu_);
    if (error_ == what) return;  // logged once per cause
    error_ = what;
  }
  boost::json::object f{{"state", "down"}, {"error", what}};
  if (!options_.label.empty()) f["partition"] = options_.label;
  options_.log->Write(LogSeverity::kWarn, "watermark", std::move(f));
}

void WatermarkPublisher::Run() {
  Session s;
  while (!stop_.load()) {
    try {
      Serve(s);
    } catch (const std::exception& e) {
      connected_.store(false);
      s.conn.reset();
      if (stop_.load()) break;
      Fail(e.what());
      peers_detail::SleepUnlessStopped(options_.reconnect_delay, stop_);
    }
  }
  if (!clean_.load()) return;
  if (!s.conn) {  // not connected (PostgreSQL down): no new connection at shutdown; the row stays as it is
    Fail("final update: not connected; the row is left as it was (the others wait for this instance's restart)");
    return;
  }
  try {
    Final(s);
  } catch (const std::exception& e) {
    Fail(std::string("final update: ") + e.what());
  }
}

void WatermarkPublisher::Serve(Session& s) {
  std::string conninfo;
  {
    MutexLock lock(&mu_);
    conninfo = conninfo_;
  }
  retarget_.store(false);
  s.conn = peers_detail::Open(conninfo, "scangate-watermark", "watermark connection");
  Exec(s.conn.get(), kSessionSql, {}, "watermark connection");
  if (!s.Timed(kNowSql, {}, "watermark clock")) throw PeerError("watermark clock: no row");
  Register(s);
  connected_.store(true);
  {
    MutexLock lock(&mu_);
    error_.clear();
  }
  while (!stop_.load() && !retarget_.load()) {
    const std::int64_t began = BootClock::NowNs();
    if (!Beat(s)) Register(s);
    peers_detail::SleepUnlessStopped(std::chrono::nanoseconds(options_.interval) -
                                         std::chrono::nanoseconds(BootClock::NowNs() - began),
                                     stop_);
  }
  if (retarget_.load() && !stop_.load()) throw PeerError("the partition moved: reconnecting to its new server");
}

void WatermarkPublisher::Register(Session& s) {
  const std::vector<std::optional<std::string>> key = {options_.instance_id, std::to_string(options_.partition)};
  ResultPtr prev = Exec(s.conn.get(), kPreviousSql, key, "watermark registration");
  const std::string previous = PQntuples(prev.get()) == 0 ? "none" : PQgetvalue(prev.get(), 0, 0);
  const Journal::Uncommitted u = options_.uncommitted();
  std::optional<std::string> covered;
  if (u.oldest_ns != Journal::kAgeUnknown) covered = std::to_string(s.LowerUs(u.oldest_ns == 0 ? u.now_ns : u.oldest_ns));
  Exec(s.conn.get(), kSyncSql, {}, "watermark registration");
  const auto lag = s.Timed(kRegisterSql,
                           {options_.instance_id, std::to_string(options_.partition), covered, HostName(),
                            std::to_string(::getpid()), std::to_string(u.count)},
                           "watermark registration");
  Exec(s.conn.get(), kSessionSql, {}, "watermark registration");
  if (!lag) throw PeerError("watermark registration: no row");
  updates_.fetch_add(1);
  uncommitted_.store(u.count);
  lag_us_.store(*lag);
  last_update_ns_.store(s.r_ns);
  // release: the row is committed (autocommit) before a journal `new` of this partition may be given.
  published_.store(true, std::memory_order_release);
  boost::json::object f{{"state", "registered"}, {"instance", options_.instance_id}, {"previous", previous},
                        {"uncommitted", u.count}};
  if (!options_.label.empty()) f["partition"] = options_.label;
  options_.log->Write(previous == "retired" ? LogSeverity::kWarn : LogSeverity::kInfo, "watermark", std::move(f));
}

bool WatermarkPublisher::Beat(Session& s) {
  const Journal::Uncommitted u = options_.uncommitted();  // before the statement: its commits are acknowledged
  std::optional<std::string> covered;  // NULL: a recovered record of unknown age is outstanding — unchanged
  if (u.oldest_ns != Journal::kAgeUnknown) covered = std::to_string(s.LowerUs(u.oldest_ns == 0 ? u.now_ns : u.oldest_ns));
  const auto lag = s.Timed(
      kBeatSql, {options_.instance_id, std::to_string(options_.partition), covered, std::to_string(u.count)},
      "watermark update");
  if (!lag) {
    boost::json::object f{{"state", "not running"}, {"instance", options_.instance_id},
                          {"note", "the row was retired or removed while this instance runs: registering again"}};
    if (!options_.label.empty()) f["partition"] = options_.label;
    options_.log->Write(LogSeverity::kWarn, "watermark", std::move(f));
    return false;
  }
  updates_.fetch_add(1);
  uncommitted_.store(u.count);
  lag_us_.store(*lag);
  last_update_ns_.store(s.r_ns);
  return true;
}

void WatermarkPublisher::Final(Session& s) {
  const Journal::Uncommitted u = options_.uncommitted();
  boost::json::object f{{"instance", options_.instance_id}, {"uncommitted", u.count}};
  if (!options_.label.empty()) f["partition"] = options_.label;
  if (u.count != 0) {
    f["state"] = "left running";
    f["note"] = "keys answered new are not committed yet: the other instances wait for this instance's restart "
                "(its journal is replayed) or its retirement (scangate --retire-instance)";
    options_.log->Write(LogSeverity::kWarn, "watermark", std::move(f));
    return;
  }
  Exec(s.conn.get(), kStopSql,
       {options_.instance_id, std::to_string(options_.partition), std::to_string(s.LowerUs(u.now_ns))},
       "watermark stop");
  f["state"] = "stopped";
  options_.log->Write(LogSeverity::kInfo, "watermark", std::move(f));
}

WatermarkPublisherStats WatermarkPublisher::Stats() const {
  WatermarkPublisherStats s;
  s.published = published();
  s.connected = connected_.load();
  const std::int64_t last = last_update_ns_.load();
  s.age_seconds = last == 0 ? -1 : static_cast<double>(BootClock::NowNs() - last) * 1e-9;
  const std::int64_t lag = lag_us_.load();
  s.lag_seconds = lag < 0 && last == 0 ? -1 : static_cast<double>(lag) * 1e-6;
  s.updates = updates_.load();
  s.failures = failures_.load();
  s.uncommitted = uncommitted_.load();
  MutexLock lock(&mu_);
  s.error = error_;
  return s;
}

}  // namespace scangate::storage
