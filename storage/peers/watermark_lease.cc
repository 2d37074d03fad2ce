// WatermarkPublisher's claim of its row (storage/peers/watermark_publisher.h, THE LEASE: L2, L4) and what happens
// when another process holds or takes it (L3). The thread, the beats and the clock epoch are watermark_publisher.cc's.
#include "storage/peers/watermark_publisher.h"

#include <unistd.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "core/boot_clock.h"
#include "storage/peers/peer_connection.h"
#include "storage/peers/watermark_session.h"

namespace scangate::storage {
namespace {

using peers_detail::Exec;
using peers_detail::PeerError;
using peers_detail::ResultPtr;
using watermark_detail::kSessionSql;
using watermark_detail::kSyncSql;
using watermark_detail::LeaseLost;

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

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return {};
  return buf;
}

}  // namespace

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

}  // namespace scangate::storage
