#include "storage/peers/watermark_publisher.h"

#include <unistd.h>

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
// Every timed statement answers now() (µs), a second figure (the lag, NULL here) and the clock epoch (sql/016) its
// now() belongs to — the session's clock sample (THE CLOCK EPOCH, E1).
constexpr const char* kNowSql = "SELECT (extract(epoch FROM now()) * 1000000)::int8, NULL::int8, scangate_clock_epoch()";
// E3: a step seen; opens the next epoch unless another instance did since (sql/016). Synchronous like the
// registration: a lost bump would leave the stale rows trusted.
constexpr const char* kStepSql = "SELECT scangate_clock_step($1::int8)";
// The row as a claimant sees it (the header's L2): its holder, and its heartbeat both as a value (compared by the
// claim) and as an age in PostgreSQL's clock.
constexpr const char* kPreviousSql = R"sql(
SELECT state, coalesce(incarnation::text, ''), (extract(epoch FROM heartbeat_at) * 1000000)::int8,
       (extract(epoch FROM now() - heartbeat_at) * 1000000)::int8, coalesce(host, ''), coalesce(pid, 0), uncommitted
  FROM scangate_instances WHERE instance_id = $1::uuid AND partition = $2::int
)sql";
// $3: covered_until in µs since the epoch, NULL = unchanged (a recovered record of unknown age is outstanding).
// $7: this incarnation. $8, $9: the holder and heartbeat (µs) the claimant read, to take over a lapsed lease ($10 µs);
// NULL when the row is not running or is this process's own (then the first two conditions decide).
// $11: the clock epoch of the sample $3 was computed from, $12: the least now() that sample allows (µs; THE CLOCK
// EPOCH, E1): either off, and the row covers nothing. A row's covered_until of another epoch is replaced (E2).
// $13: the claimant watched that heartbeat stay unchanged for kLease of its own boot clock (the header's L2, for a
// heartbeat that PostgreSQL's clock, stepped back since, dates in its future).
constexpr const char* kRegisterSql = R"sql(
WITH e AS (SELECT scangate_clock_epoch() AS epoch)
INSERT INTO scangate_instances AS i
  (instance_id, partition, state, covered_until, heartbeat_at, started_at, host, pid, uncommitted, incarnation,
   clock_epoch)
SELECT $1::uuid, $2::int, 'running',
       CASE WHEN $11::int8 = e.epoch AND now() >= 'epoch'::timestamptz + $12::int8 * interval '1 microsecond'
            THEN coalesce('epoch'::timestamptz + $3::int8 * interval '1 microsecond', 'epoch'::timestamptz)
            ELSE 'epoch'::timestamptz END,
       now(), now(), $4, $5::int, $6::int8, $7::uuid, e.epoch
  FROM e
ON CONFLICT (instance_id, partition) DO UPDATE
  SET state = 'running',
      covered_until = CASE WHEN i.clock_epoch = excluded.clock_epoch
                           THEN greatest(i.covered_until, excluded.covered_until) ELSE excluded.covered_until END,
      clock_epoch = excluded.clock_epoch, heartbeat_at = now(),
      started_at = now(), host = excluded.host, pid = excluded.pid, uncommitted = excluded.uncommitted,
      retired_at = NULL, incarnation = excluded.incarnation
  WHERE i.state <> 'running' OR i.incarnation = excluded.incarnation
     OR (i.incarnation IS NOT DISTINCT FROM $8::uuid
         AND (extract(epoch FROM i.heartbeat_at) * 1000000)::int8 = $9::int8
         AND (i.heartbeat_at <= now() - $10::int8 * interval '1 microsecond' OR $13::bool))
RETURNING (extract(epoch FROM now()) * 1000000)::int8, (extract(epoch FROM now() - i.covered_until) * 1000000)::int8,
          i.clock_epoch
)sql";
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

// Another process holds this identity (the header's L2, L3): final, never retried.
struct LeaseLost : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The row as kPreviousSql read it.
struct Holder {
  bool present = false;
  std::string state, incarnation, host;
  std::int64_t heartbeat_us = 0, age_us = 0, pid = 0, uncommitted = 0;
};

Holder ReadHolder(PGconn* c, const std::vector<std::optional<std::string>>& key) {
  ResultPtr r = Exec(c, kPreviousSql, key, "watermark registration");
  Holder h;
  if (PQntuples(r.get()) == 0) return h;
  h.present = true;
  h.state = PQgetvalue(r.get(), 0, 0);
  h.incarnation = PQgetvalue(r.get(), 0, 1);
  h.heartbeat_us = std::stoll(PQgetvalue(r.get(), 0, 2));
  h.age_us = std::stoll(PQgetvalue(r.get(), 0, 3));
  h.host = PQgetvalue(r.get(), 0, 4);
  h.pid = std::stoll(PQgetvalue(r.get(), 0, 5));
  h.uncommitted = std::stoll(PQgetvalue(r.get(), 0, 6));
  return h;
}

std::string DescribeHolder(const Holder& h) {
  return "incarnation " + (h.incarnation.empty() ? std::string("(none: an older scangate)") : h.incarnation) +
         " on host " + (h.host.empty() ? std::string("?") : h.host) + " pid " + std::to_string(h.pid) +
         ", heartbeat " + std::to_string(static_cast<double>(h.age_us) * 1e-6) + " s ago";
}

// Floor division (a lower bound must round down, negative differences included).
std::int64_t FloorDiv(std::int64_t a, std::int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return {};
  return buf;
}

}  // namespace

// One connection and its latest clock sample: a statement sent at boot time sent_ns, answered at r_ns, whose now()
// was t_us under clock epoch `epoch`, so PG(x) >= t_us + (x - r_ns) and PG(x) <= t_us + (x - sent_ns) for any boot
// time x while the clock does not step (peer_view.h, the argument, 2.; THE CLOCK EPOCH). Kept across reconnections
// to one server: the first statement of a new connection is checked against it too.
struct WatermarkPublisher::Session {
  ConnPtr conn;
  std::int64_t t_us = 0;
  std::int64_t r_ns = 0;
  std::int64_t sent_ns = 0;  // when the statement of the latest sample was sent (the lease's L3)
  std::int64_t epoch = -1;   // the clock epoch of the sample; -1: none yet
  // PostgreSQL's clock at boot time x, a lower bound (µs since the epoch).
  std::int64_t LowerUs(std::int64_t x_ns) const { return t_us + FloorDiv(x_ns - r_ns, 1000); }
  // E1: the least now() a statement sent at `x_ns` reads while the clock did not step, and the most one answered
  // at `x_ns` does (both widened by kStepTolerance and kRateError on the time since the sample).
  std::int64_t FloorUs(std::int64_t x_ns) const { return LowerUs(x_ns) - Slack(x_ns - r_ns); }
  std::int64_t CeilUs(std::int64_t x_ns) const { return t_us + (x_ns - sent_ns) / 1000 + 1 + Slack(x_ns - sent_ns); }
  static std::int64_t Slack(std::int64_t elapsed_ns) {
    const auto tolerance = std::chrono::duration_cast<std::chrono::microseconds>(kStepTolerance).count();
    return tolerance + static_cast<std::int64_t>(PgClock::kRateError * static_cast<double>(std::abs(elapsed_ns)) / 1000.0);
  }
  std::optional<std::string> Epoch() const { return epoch < 0 ? std::nullopt : std::optional(std::to_string(epoch)); }
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

void WatermarkPublisher::Register(Session& s) {
  const std::vector<std::optional<std::string>> key = {options_.instance_id, std::to_string(options_.partition)};
  const std::int64_t lease_us = std::chrono::duration_cast<std::chrono::microseconds>(kLease).count();
  const std::int64_t began_ns = BootClock::NowNs();
  std::optional<Holder> watched;  // a live-looking holder of another incarnation, read at the start of the wait
  std::int64_t watched_since_ns = 0;  // BootClock, when `watched` was read
  for (;;) {
    const Holder h = ReadHolder(s.conn.get(), key);
    const bool mine = h.present && h.incarnation == options_.incarnation;
    const bool other = h.present && !mine && !(h.state != "running" && !registered_once_.load());
    if (other && registered_once_.load()) {
      // L3: this process held the row, and another incarnation took it since (its heartbeat had lapsed). That
      // process's journal, not this one's, holds what the row covers now: never claimed back.
      throw LeaseLost("instance " + options_.instance_id + " was taken over by another process (" +
                      DescribeHolder(h) + ") while this process could not renew its lease");
    }
    std::optional<std::string> seen_incarnation, seen_heartbeat;
    if (other) {
      if (watched && (watched->incarnation != h.incarnation || watched->heartbeat_us != h.heartbeat_us)) {
        throw LeaseLost("instance " + options_.instance_id + " is held by another live process (" +
                        DescribeHolder(h) + "; its heartbeat moved while this one waited)");
      }
      // L2: wait (bounded by the lease) to see whether its heartbeat moves — by PostgreSQL's clock, or by this
      // host's boot clock since the claimant first read it (a clock stepped back dates the heartbeat in its future).
      const bool watched_lease = watched && BootClock::NowNs() - watched_since_ns >= lease_us * 1000;
      if (h.age_us < lease_us && !watched_lease) {
        if (!watched) {
          watched = h;
          watched_since_ns = BootClock::NowNs();
          lease_state_.store("waiting");
          boost::json::object f{{"state", "waiting"}, {"instance", options_.instance_id},
                                {"holder", DescribeHolder(h)}, {"lease_seconds", lease_us * 1e-6},
                                {"note", "another process held this instance's row moments ago: a restart after a "
                                         "crash waits out its lease; a live holder refuses this start"}};
          if (!options_.label.empty()) f["partition"] = options_.label;
          options_.log->Write(LogSeverity::kInfo, "instance_lease", std::move(f));
        }
        peers_detail::SleepUnlessStopped(
            std::clamp<std::chrono::nanoseconds>(std::chrono::microseconds(lease_us - h.age_us),
                                                 std::chrono::nanoseconds(0), options_.interval),
            stop_);
        if (stop_.load()) throw PeerError("stopping while waiting for the instance's lease");
        continue;
      }
      const auto& ran = options_.journal_incarnations;
      if (ran && !h.incarnation.empty() && std::find(ran->begin(), ran->end(), h.incarnation) == ran->end()) {
        // L4: the row's holder never ran on this folder: this folder is a copy older than that process's start.
        throw LeaseLost("this journal folder is a copy older than the last process of instance " +
                        options_.instance_id + " (" + DescribeHolder(h) +
                        ", which this folder never ran under): it lacks what that process journalled");
      }
      seen_incarnation = h.incarnation.empty() ? std::nullopt : std::optional<std::string>(h.incarnation);
      seen_heartbeat = std::to_string(h.heartbeat_us);
    }
    const Journal::Uncommitted u = options_.uncommitted();
    std::optional<std::string> covered;
    if (u.oldest_ns != Journal::kAgeUnknown) covered = std::to_string(s.LowerUs(u.oldest_ns == 0 ? u.now_ns : u.oldest_ns));
    Exec(s.conn.get(), kSyncSql, {}, "watermark registration");
    const std::string floor_us = std::to_string(s.FloorUs(BootClock::NowNs()));  // E1: before the sending
    const auto lag = Timed(s, kRegisterSql,
                           {options_.instance_id, std::to_string(options_.partition), covered, HostName(),
                            std::to_string(::getpid()), std::to_string(u.count), options_.incarnation,
                            seen_incarnation, seen_heartbeat, std::to_string(lease_us), s.Epoch(), floor_us,
                            std::string(watched && BootClock::NowNs() - watched_since_ns >= lease_us * 1000 ? "true"
                                                                                                             : "false")},
                           "watermark registration");
    Exec(s.conn.get(), kSessionSql, {}, "watermark registration");
    if (!lag) continue;  // the row changed between the read and the claim: read it again
    updates_.fetch_add(1);
    uncommitted_.store(u.count);
    lag_us_.store(*lag);
    last_update_ns_.store(s.r_ns);
    held_until_ns_.store(s.sent_ns + std::chrono::nanoseconds(kSelfFence).count(), std::memory_order_relaxed);
    registered_once_.store(true);
    lease_state_.store("held");
    first_claim_done_.store(true);
    // release: the row is committed (autocommit) before a journal `new` of this partition may be given.
    published_.store(true, std::memory_order_release);
    const std::string previous = !h.present ? "none" : h.state;
    boost::json::object f{{"state", "registered"}, {"instance", options_.instance_id}, {"previous", previous},
                          {"uncommitted", u.count}, {"incarnation", options_.incarnation}};
    if (!options_.label.empty()) f["partition"] = options_.label;
    options_.log->Write(previous == "retired" ? LogSeverity::kWarn : LogSeverity::kInfo, "watermark", std::move(f));
    if (other) {
      boost::json::object t{{"state", "taken_over"}, {"instance", options_.instance_id},
                            {"previous_holder", DescribeHolder(h)}, {"previous_uncommitted", h.uncommitted},
                            {"waited_seconds", static_cast<double>(BootClock::NowNs() - began_ns) * 1e-9},
                            {"note", "the previous process's heartbeat lapsed for the lease: taken over as a restart; "
                                     "if that process is alive (cut off from PostgreSQL), it is fenced when it "
                                     "reconnects"}};
      if (!options_.label.empty()) t["partition"] = options_.label;
      options_.log->Write(h.uncommitted > 0 ? LogSeverity::kWarn : LogSeverity::kInfo, "instance_lease", std::move(t));
    }
    return;
  }
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

void WatermarkPublisher::Lose(Lost how, const std::string& why) {
  published_.store(false);
  held_until_ns_.store(0, std::memory_order_relaxed);
  {
    MutexLock lock(&mu_);
    lost_reason_ = why;
  }
  lease_state_.store(how == Lost::kRefused ? "refused" : "fenced");
  lost_.store(how);
  boost::json::object f{{"instance", options_.instance_id}, {"incarnation", options_.incarnation}, {"error", why}};
  if (how == Lost::kRefused) {
    f["state"] = "refused";
    f["todo"] = "this journal's identity is held by another live scangate process: a copy of its journal folder (a "
                "cloned VM, a restored backup, a second unit). Stop this one. Its records came from the original, "
                "which commits them itself: delete the copy, or, if the copy may hold keys the original lacks, remove "
                "the copy's 'instance' file and start it again: it drains under a new identity";
  } else {
    f["state"] = "fenced";
    f["note"] = "new keys are decided in PostgreSQL from now on (this process answers nothing new from its journal, "
                "and is not ready); its journal still drains. Restart it only once the other process is stopped";
  }
  if (!options_.label.empty()) f["partition"] = options_.label;
  options_.log->Write(LogSeverity::kError, "instance_lease", std::move(f));
}

std::string WatermarkPublisher::lost_reason() const {
  MutexLock lock(&mu_);
  return lost_reason_;
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
