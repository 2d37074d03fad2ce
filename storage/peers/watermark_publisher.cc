#include "storage/peers/watermark_publisher.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

#include "core/boot_clock.h"
#include "core/thread_name.h"
#include "storage/clock/pg_clock.h"
#include "storage/peers/peer_connection.h"
#include "storage/peers/watermark_session.h"

namespace scangate::storage {
namespace {

using peers_detail::ConnPtr;
using peers_detail::Exec;
using peers_detail::PeerError;
using peers_detail::ResultPtr;
using watermark_detail::kSessionSql;
using watermark_detail::kSyncSql;
using watermark_detail::LeaseLost;

// Every timed statement answers now() (µs), a second figure (the lag, NULL here) and the clock epoch (sql/016) its
// now() belongs to — the session's clock sample (THE CLOCK EPOCH, E1).
constexpr const char* kNowSql = "SELECT (extract(epoch FROM now()) * 1000000)::int8, NULL::int8, scangate_clock_epoch()";
// E3: a step seen; opens the next epoch unless another instance did since (sql/016). Synchronous like the
// registration: a lost bump would leave the stale rows trusted.
constexpr const char* kStepSql = "SELECT scangate_clock_step($1::int8)";
// $6, $7: as the registration's $11, $12 (E1, E2).
constexpr const char* kBeatSql = R"sql(
WITH e AS (SELECT scangate_clock_epoch() AS epoch)
UPDATE scangate_instances AS i
   SET covered_until = CASE
         WHEN $6::int8 IS DISTINCT FROM e.epoch OR now() < 'epoch'::timestamptz + $7::int8 * interval '1 microsecond'
           THEN 'epoch'::timestamptz
         WHEN i.clock_epoch IS DISTINCT FROM e.epoch
           THEN coalesce('epoch'::timestamptz + $3::int8 * interval '1 microsecond', 'epoch'::timestamptz)
         ELSE greatest(i.covered_until, 'epoch'::timestamptz + $3::int8 * interval '1 microsecond') END,
       clock_epoch = e.epoch, heartbeat_at = now(), uncommitted = $4::int8
  FROM e
 WHERE i.instance_id = $1::uuid AND i.partition = $2::int AND i.state = 'running' AND i.incarnation = $5::uuid
RETURNING (extract(epoch FROM now()) * 1000000)::int8, (extract(epoch FROM now() - i.covered_until) * 1000000)::int8,
          e.epoch
)sql";
constexpr const char* kStopSql = R"sql(
UPDATE scangate_instances
   SET state = 'stopped', heartbeat_at = now(), uncommitted = 0,
       covered_until = greatest(covered_until, 'epoch'::timestamptz + $3::int8 * interval '1 microsecond')
 WHERE instance_id = $1::uuid AND partition = $2::int AND state = 'running' AND incarnation = $4::uuid
)sql";

}  // namespace

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

std::optional<std::int64_t> WatermarkPublisher::Timed(Session& s, const char* sql,
                                                      const std::vector<std::optional<std::string>>& params,
                                                      const char* what) {
  const std::int64_t sent = BootClock::NowNs();
  ResultPtr r = Exec(s.conn.get(), sql, params, what);
  const std::int64_t received = BootClock::NowNs();
  if (PQntuples(r.get()) == 0) return std::nullopt;
  const std::int64_t lag = PQgetisnull(r.get(), 0, 1) ? 0 : std::stoll(PQgetvalue(r.get(), 0, 1));
  CheckStep(s, std::stoll(PQgetvalue(r.get(), 0, 0)), sent, received, std::stoll(PQgetvalue(r.get(), 0, 2)));
  return lag;
}

bool WatermarkPublisher::CheckStep(Session& s, std::int64_t now_us, std::int64_t sent_ns, std::int64_t answered_ns,
                                   std::int64_t epoch) {
  // Only within one epoch: a sample of an older one was already refused by the statement (E1), and a new epoch's
  // first reading starts its continuity.
  const bool checked = s.epoch == epoch;
  const std::int64_t floor_us = s.FloorUs(sent_ns), ceil_us = s.CeilUs(answered_ns);
  const bool stepped = checked && (now_us < floor_us || now_us > ceil_us);
  s.t_us = now_us;
  s.r_ns = answered_ns;
  s.sent_ns = sent_ns;
  s.epoch = epoch;
  if (stepped) {
    // E3: the next epoch before anything else is published (synchronously committed, as the registration).
    Exec(s.conn.get(), kSyncSql, {}, "clock step");
    ResultPtr r = Exec(s.conn.get(), kStepSql, {std::to_string(epoch)}, "clock step");
    Exec(s.conn.get(), kSessionSql, {}, "clock step");
    s.epoch = std::stoll(PQgetvalue(r.get(), 0, 0));
    clock_steps_.fetch_add(1);
    if (options_.on_clock_step) options_.on_clock_step();
    const double expected_us = (static_cast<double>(floor_us) + static_cast<double>(ceil_us)) / 2;
    boost::json::object f{{"state", "stepped"}, {"by", "watermark"},
                          {"step_seconds", (static_cast<double>(now_us) - expected_us) * 1e-6},
                          {"epoch_before", epoch}, {"epoch", s.epoch},
                          {"note", "PostgreSQL's clock stepped: every instance's watermark of the old epoch covers "
                                   "nothing until it publishes again (new keys wait or get 503 meanwhile)"}};
    if (!options_.label.empty()) f["partition"] = options_.label;
    options_.log->Write(LogSeverity::kWarn, "pg_clock", std::move(f));
  }
  clock_epoch_.store(s.epoch);
  return stepped;
}

void WatermarkPublisher::Run() {
  Session s;
  while (!stop_.load()) {
    try {
      Serve(s);
    } catch (const LeaseLost& e) {
      Lose(registered_once_.load() ? Lost::kFenced : Lost::kRefused, e.what());
      first_claim_done_.store(true);
      s.conn.reset();
      connected_.store(false);
      while (!stop_.load()) peers_detail::SleepUnlessStopped(std::chrono::milliseconds(100), stop_);
      return;  // the row is another process's: no final update either
    } catch (const std::exception& e) {
      connected_.store(false);
      s.conn.reset();
      first_claim_done_.store(true);
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
  // Another server from here on: the sample (and its epoch number, the old database's) says nothing of its clock.
  if (retarget_.exchange(false)) s.epoch = -1;
  s.conn = peers_detail::Open(conninfo, "scangate-watermark", "watermark connection");
  Exec(s.conn.get(), kSessionSql, {}, "watermark connection");
  if (!Timed(s, kNowSql, {}, "watermark clock")) throw PeerError("watermark clock: no row");
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

bool WatermarkPublisher::Beat(Session& s) {
  const Journal::Uncommitted u = options_.uncommitted();  // before the statement: its commits are acknowledged
  std::optional<std::string> covered;  // NULL: a recovered record of unknown age is outstanding — unchanged
  if (u.oldest_ns != Journal::kAgeUnknown) covered = std::to_string(s.LowerUs(u.oldest_ns == 0 ? u.now_ns : u.oldest_ns));
  const std::string floor_us = std::to_string(s.FloorUs(BootClock::NowNs()));  // E1: before the sending
  const auto lag = Timed(s, kBeatSql,
                         {options_.instance_id, std::to_string(options_.partition), covered,
                          std::to_string(u.count), options_.incarnation, s.Epoch(), floor_us},
                         "watermark update");
  if (!lag) {
    // Not ours any more: another incarnation took it (Register throws LeaseLost), or it was retired or removed.
    boost::json::object f{{"state", "not running"}, {"instance", options_.instance_id},
                          {"note", "the row was retired, removed or taken over while this instance runs"}};
    if (!options_.label.empty()) f["partition"] = options_.label;
    options_.log->Write(LogSeverity::kWarn, "watermark", std::move(f));
    return false;
  }
  updates_.fetch_add(1);
  uncommitted_.store(u.count);
  lag_us_.store(*lag);
  last_update_ns_.store(s.r_ns);
  held_until_ns_.store(s.sent_ns + std::chrono::nanoseconds(kSelfFence).count(), std::memory_order_relaxed);
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
       {options_.instance_id, std::to_string(options_.partition), std::to_string(s.LowerUs(u.now_ns)),
        options_.incarnation},
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
  s.lease = lease_state_.load();
  s.clock_epoch = clock_epoch_.load();
  s.clock_steps = clock_steps_.load();
  MutexLock lock(&mu_);
  s.error = error_;
  return s;
}

}  // namespace scangate::storage
