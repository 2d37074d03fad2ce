// WatermarkPublisher (issue 42, design A): a journal owner's commit watermark in one database (one logical partition
// with --partitions), published on a connection of its own every `interval` — its row of scangate_instances
// (sql/011): covered_until, a lower bound of PostgreSQL's clock before which every key this instance answered `new`
// from its journal is committed, with a heartbeat and what operators need (host, pid, keys uncommitted). The
// argument that makes that bound safe, and what readers do with it, is storage/peers/peer_view.h's.
// Invariants: covered_until only ever grows (GREATEST in the statements); the row is registered (committed) before
// published() turns true, and the server answers nothing `new` from its journal for this partition before that;
// Stop(clean) marks the row stopped only when the journal holds nothing uncommitted for the partition (else it stays
// running: the other instances wait for this instance's restart, which replays its journal, or its retirement).
//
// THE LEASE (issue 55, sql/015) — an identity is a file that can be copied (a cloned VM, a backup restored beside
// the live host, two units on one journal on two hosts), so the row is held by one PROCESS at a time: its
// `incarnation`, a random UUID drawn at each start (App). Why it holds:
//  L1. Every statement of the holder requires the row's incarnation to be its own (kBeatSql, kStopSql): once the
//      row names another process, the holder can neither advance covered_until nor mark the row stopped.
//  L2. A claimant writes its incarnation only when the row is absent, not running, already its own, or running
//      under another incarnation whose heartbeat is at least kLease old — by PostgreSQL's clock (now() -
//      heartbeat_at, one clock), or unchanged for kLease of the claimant's boot clock since it first read it (a
//      clock stepped back dates a dead holder's heartbeat in its future: THE CLOCK EPOCH) — AND unchanged since the
//      claimant read it (one conditional statement: the holder's beat and the claim serialise on the row; exactly
//      one wins). The boot-clock form is as safe: the holder's last statement was sent before the claimant's first
//      read, so by L3 it stopped kLease - kSelfFence before the claim. A heartbeat that moves while the claimant watches is a live
//      holder: the claimant is refused (at start: exit 2 and an `instance_lease` event saying what to do). A
//      legitimate restart after kill -9 finds its predecessor's heartbeat at most kLease old and so waits at most
//      kLease (logged, `instance_lease` state "waiting" then "taken_over" with the seconds waited).
//  L3. The holder fences itself: published() (which every journal `new` asks) is true only until kSelfFence after
//      the SENDING of its last successful statement, whose now() became heartbeat_at — so PG(send) <= heartbeat_at
//      and its last journal `new` came before PG's heartbeat_at + kSelfFence < heartbeat_at + kLease <= the claim.
//      After a claim, the old holder's next statement finds the row gone (L1): it is fenced for the rest of its run
//      (published() stays false, so its new keys are decided in PostgreSQL; its PeerView counts the row, now
//      another incarnation's, as a peer: peer_view.h) and logs `instance_lease` state "fenced". It never claims
//      the row back, even once the new holder's heartbeat lapses: the new holder's journal, not its own, holds
//      what that row covers.
//  So two processes on one identity never both answer `new` from their journals after the claim, and a clone of a
//  LIVE, connected instance never serves (the case: 0 of 20). What is not proven: a copy claimed while its
//  original was cut off from PostgreSQL for more than kLease (or dead) takes the row over as a restart would; keys
//  the original answered `new` and had not committed when it was cut off (at most the row's `uncommitted`, logged
//  in the "taken_over" event) are in the original's journal only — when the original reconnects it is fenced and
//  its drain commits them, but until then another instance may answer them `new` again: the loss window of
//  scangate --retire-instance, and a clone of a dead host's journal is the same as restoring that host.
//  L4. A copy taken before its original's latest start (a restored backup, an older clone) is refused even once that
//      original is dead: every process appends its incarnation to the folder's `incarnations` file (fsynced) before
//      it claims, and a claimant takes a running row over only when its folder ran under the row's holder. (A
//      copy taken after that start cannot be told from the folder itself: the case above.)
//  Two processes on one journal folder on one host never get this far: the journal's flock refuses the second.
//
// THE CLOCK EPOCH (issue 55, sql/016) — covered_until is a time of PostgreSQL's clock, judged by the readers against
// their own statement's now() (peer_view.h, 6.): both must come from one continuous clock. A step back of s seconds
// (a restart or failover onto a host whose clock is behind, an NTP step) would otherwise keep a covered_until that
// is s seconds in the new clock's future — GREATEST keeps it — and every reader would trust a minute of keys
// nobody committed. So:
//  E1. Every covered_until is computed from this connection's last clock sample (a statement's now(), answered at
//      boot time r) and written with the epoch that sample was taken under. The writing statement itself checks
//      the sample still holds: its epoch is the database's current one (scangate_clock_epoch(), which opens a new
//      epoch first when the server restarted) and its now() is not below what the sample allows at the sending
//      (t + (sent - r) - kStepTolerance - kRateError·(sent - r)). Otherwise it writes covered_until = 'epoch' (covers
//      nothing) — never the value computed from the stale sample.
//  E2. A row's value of an older epoch is replaced, not kept by GREATEST; within one epoch it only grows.
//  E3. A step seen by a statement (now() below that bound, or above the sample's upper bound by more than
//      kStepTolerance) opens the next epoch (scangate_clock_step) before anything else is published, so every other
//      row — a peer cut off while the clock stepped, whose stale value looks recent in the new clock — stops
//      covering until its publisher writes under the new epoch. The sample taken by the detecting statement is of
//      the new regime: it is kept, under the epoch the step opened. Logged (`pg_clock` state "stepped") and counted.
//  What it cannot see: a step while no instance has a statement in flight across it AND the server keeps running
//  — the first statement after it (any instance's beat, every 50 ms, or clock reading) is the detector, and a row
//  read before that detection is judged by the reader's own check (peer_sql.h: covered_until past its now()).
// Use: one per partition; Start() after the journal was opened; Stop(true) after the store was shut down.
// Files: the thread, the beats and the clock epoch in watermark_publisher.cc; the claim of the row (THE LEASE) in
// watermark_lease.cc; the connection with its clock sample they share in watermark_session.h.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <optional>
#include <thread>
#include <vector>

#include <absl/base/thread_annotations.h>

#include "core/boot_clock.h"
#include "core/mutex.h"
#include "storage/journal/journal.h"
#include "storage/log_sink.h"

namespace scangate::storage {

// The lease (the header's L2, L3). kLease: 40 beats of 50 ms — a restart after kill -9 waits at most this long;
// a holder whose statements all stall this long (PostgreSQL unreachable) may be taken over. kSelfFence: half of
// it, leaving kLease - kSelfFence = 1 s for the clocks' rates and the claim's own statement.
inline constexpr std::chrono::milliseconds kLease{2000};
inline constexpr std::chrono::milliseconds kSelfFence{1000};
static_assert(kSelfFence < kLease, "the holder must stop before a claimant may take the row");
// THE CLOCK EPOCH (E1, E3): how far PostgreSQL's now() may fall outside what the boot clock allows since the last
// sample before it counts as a step. now() is read inside the round trip, so the bounds are exact but for the
// clocks' rates (kRateError on the elapsed time, added separately); 5 ms leaves room for a virtualised host's
// clock-source jitter and is far below any step that matters (a step shorter than the window W shortens nothing a
// reader waits for by more than itself).
inline constexpr std::chrono::milliseconds kStepTolerance{5};

struct WatermarkPublisherOptions {
  std::string conninfo;     // the database's (partition's) connection string, with the caller's timeouts
  std::string instance_id;  // Journal::instance_id()
  std::string incarnation;  // this process's (a random UUID per start, the same for every partition)
  // The incarnations this journal folder ran under before this process (its `incarnations` file, L4); unknown
  // (an older folder, or one rebuilt after a fault): no such check.
  std::optional<std::vector<std::string>> journal_incarnations;
  unsigned partition = 0;   // the logical partition (0 with one database)
  std::string label;        // "p0", or "" for one database: in log lines and metrics
  // One UPDATE per interval (a HOT update of one row; ~0.1 ms of PostgreSQL each). The readers' view of this
  // instance is up to interval + their own poll interval old: 50 ms keeps that a small part of the 2 s window.
  std::chrono::milliseconds interval{50};
  std::chrono::milliseconds reconnect_delay{500};
  // The journal's figures for this partition (JournalDrain::UncommittedOf); called on the publisher's thread.
  std::function<Journal::Uncommitted()> uncommitted;
  // A step of this database's clock seen by the publisher (THE CLOCK EPOCH, E3), on its thread: the caller drops its
  // bounds of that clock (PgClock::SuspendForStep) so that no first_seen or horizon is judged by the old clock until
  // its clock reader's next reading (within a second) — the publisher sees a step within a beat. May be empty.
  std::function<void()> on_clock_step;
  std::shared_ptr<LogSink> log;  // empty: StderrLogSink()
};

struct WatermarkPublisherStats {
  bool published = false;      // the row is registered: journal `new`s of this partition may be given
  bool connected = false;
  double age_seconds = -1;     // since the last successful update (boot clock); -1 = never
  double lag_seconds = -1;     // now() - covered_until at the last update (PostgreSQL's clock): how far behind
  std::uint64_t updates = 0;   // successful statements (registrations included)
  std::uint64_t failures = 0;  // connections or statements that failed
  std::uint64_t uncommitted = 0;  // the last figure published
  std::string error;           // the last failure ("" while updating)
  std::string lease = "claiming";  // claiming | waiting | held | refused | fenced (the header's L2, L3)
  std::int64_t clock_epoch = -1;   // the database's clock epoch of the last sample (THE CLOCK EPOCH); -1 = none yet
  std::uint64_t clock_steps = 0;   // steps of PostgreSQL's clock this publisher saw (E3)
};

class WatermarkPublisher {
 public:
  explicit WatermarkPublisher(WatermarkPublisherOptions options);
  ~WatermarkPublisher();  // Stop(false)
  WatermarkPublisher(const WatermarkPublisher&) = delete;
  WatermarkPublisher& operator=(const WatermarkPublisher&) = delete;

  void Start();  // starts the thread (connects, registers, then updates every interval). Call once.
  // Ends the thread; with `clean`, one last update marks the row stopped when nothing of the partition is
  // uncommitted (else it is left running). Idempotent; any thread but the publisher's.
  void Stop(bool clean);
  // The database moved (--partitions' map): reconnect there and register. Any thread.
  void Retarget(std::string conninfo);

  // The row is registered and held (the header's L3: its last statement was sent less than kSelfFence ago, and it
  // was not fenced). acquire: pairs with the thread's release after the registration's commit. Lock-free; any thread
  // (the I/O threads ask it per journal `new`).
  bool published() const {
    return published_.load(std::memory_order_acquire) &&
           BootClock::NowNs() < held_until_ns_.load(std::memory_order_relaxed);  // relaxed: a deadline, no data
  }
  // Another live process holds this identity: refused at the first registration (the caller exits), or fenced
  // after it (the row was claimed while this process's heartbeat had lapsed). Either is final. Any thread.
  bool refused() const { return lost_.load() == Lost::kRefused; }
  bool fenced() const { return lost_.load() == Lost::kFenced; }
  // The first claim ended: held, refused, or failed to reach PostgreSQL (then it claims in the background, and a
  // live holder found then fences it instead of refusing it). The server starts serving only after this. Any thread.
  bool first_claim_done() const { return first_claim_done_.load(); }
  // What refused or fenced it, for the caller's log line ("" otherwise). Any thread.
  std::string lost_reason() const;
  WatermarkPublisherStats Stats() const;
  const std::string& label() const { return options_.label; }

 private:
  struct Session;  // one connection and its clock sample (watermark_publisher.cc)
  void Run();
  void Serve(Session& s);
  // Claims and registers the row (running) under this incarnation (the header's L2) and logs how it was found
  // (none, running = a restart after a crash, stopped, retired). Throws PeerError; LeaseLost when another live
  // process holds it (or, after the first registration, when any other incarnation took it: L3).
  void Register(Session& s);
  // One update; false when the row is no longer running under this incarnation (retired by an operator, or removed):
  // the caller registers again. Throws LeaseLost when another incarnation holds it (L3).
  bool Beat(Session& s);
  enum class Lost { kNo, kRefused, kFenced };
  void Lose(Lost how, const std::string& why);
  void Final(Session& s);  // Stop(clean)'s last update
  // Runs `sql` (its answer: now() in µs, a figure, the clock epoch) and takes its now() as the session's clock sample
  // after CheckStep; the figure (0 when NULL), or nullopt when it returned no row (the sample unchanged).
  std::optional<std::int64_t> Timed(Session& s, const char* sql, const std::vector<std::optional<std::string>>& params,
                                    const char* what);
  // E3: `now_us` (a statement's now(), sent at `sent_ns`, answered at `answered_ns`) against the sample held before
  // it; on a step, opens the next epoch, logs and counts it, and returns true. The session's sample is then the
  // statement's, under the new epoch.
  bool CheckStep(Session& s, std::int64_t now_us, std::int64_t sent_ns, std::int64_t answered_ns,
                 std::int64_t epoch);
  void Fail(const std::string& what);

  WatermarkPublisherOptions options_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> clean_{false};
  std::atomic<bool> retarget_{false};
  std::atomic<bool> published_{false};
  std::atomic<bool> registered_once_{false};  // a registration committed: a later claim by another process fences
  std::atomic<std::int64_t> held_until_ns_{0};  // BootClock ns: send time of the last good statement + kSelfFence
  std::atomic<Lost> lost_{Lost::kNo};
  std::atomic<bool> first_claim_done_{false};
  std::atomic<const char*> lease_state_{"claiming"};
  std::atomic<bool> connected_{false};
  std::atomic<std::int64_t> last_update_ns_{0};  // BootClock ns of the last successful update; 0 = never
  std::atomic<std::int64_t> lag_us_{-1};
  std::atomic<std::uint64_t> updates_{0}, failures_{0}, uncommitted_{0};
  std::atomic<std::int64_t> clock_epoch_{-1};
  std::atomic<std::uint64_t> clock_steps_{0};
  mutable Mutex mu_;
  std::string conninfo_ ABSL_GUARDED_BY(mu_);
  std::string error_ ABSL_GUARDED_BY(mu_);
  std::string lost_reason_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace scangate::storage
