// PgClock: what one PostgreSQL server's clock reads now — the clock its now() judges every row's first_seen by
// (the expiry's deletes, the take-over of an expired row, the warm start's window, /lookup) — as bounds measured
// by round trips against this host's monotonic clock, never read from this host's wall clock, whatever its offset.
// The design (issue 42, item 4): a key this instance answers `new` gets first_seen = LowerUs() at the answer, which
// is at or before PostgreSQL's clock then, so PostgreSQL treats its row as expired no later than --retention after
// the answer, while every filter holds the key at least --window >= --retention from the answer on (this instance's
// from the answer, the followers' from the commit, a warm start's from the load): no filter forgets a key whose row
// PostgreSQL still holds inside the horizon. A record this instance remembers (the recent set, the journal) is
// judged past the horizon with UpperUs(), at or after PostgreSQL's clock: never called a duplicate after
// PostgreSQL would have taken its row over. Exact while the two clocks' rates differ by at most kRateError between
// readings and PostgreSQL's clock does not step backwards (which breaks PostgreSQL's own horizon as much).
// A step (issue 55) — a reading outside the bounds held by more than kStepTolerance — is reported by Record(): the
// bounds are then the new reading's alone, and the caller opens a new clock epoch in the database (sql/016), which
// makes every instance's watermark of the old clock cover nothing (storage/peers/watermark_publisher.h, THE CLOCK
// EPOCH). Bounds carry the epoch they were established under; a reading of another epoch (the server restarted or
// failed over, or another instance saw a step) replaces them: readings of two epochs are never intersected, but they
// are compared, so a failover onto a host whose clock is ahead is a step too (reported with the epoch it came from).
// The caller records each step in the database (sql/017): PostgreSQL judges a row's age less the forward steps since
// it was written, and this clock carries their total (AheadUs) for the judgements this instance makes itself.
// Use: one per database (partition), fed by a PgClockReader (pg_clock_reader.h); PgClocks picks a digest's.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <absl/base/thread_annotations.h>

#include "core/digest.h"
#include "core/mutex.h"

namespace scangate::storage {

// One round trip: the server's clock_timestamp() in µs since the epoch, read between `sent` and `answered`, under
// the database's clock epoch `epoch` (sql/016; 0 = unknown: only ever compared with other readings' epochs).
struct PgClockReading {
  std::int64_t server_us = 0;
  std::chrono::steady_clock::time_point sent, answered;
  std::int64_t epoch = 0;
};

// A step Record() saw: the new clock minus the old one at the reading, in seconds (negative: back), and the epoch of
// the bounds it was measured against (the reading's own: a step within one epoch, which the caller opens the next
// epoch for; an earlier one: the reading is of an epoch someone else opened, or of a server that (re)started).
// `before_us` (µs since the epoch) divides the rows by first_seen for sql/017: every row stamped before the step is
// earlier, and (a step back) no row stamped by the new clock is. Forward: the old clock's most at the reading
// (a row the new clock stamped between the step and the reading — under a second of them — counts as before it:
// kept a little longer). Back: the new clock's least when the bounds held were read, the last moment the old
// clock was seen (the old clock's rows since, and those up to the step's size before, are kept longer).
struct PgClockStep {
  double seconds = 0;
  std::int64_t from_epoch = 0;
  std::int64_t before_us = 0;
};

class PgClock {
 public:
  // How much the server's clock and this host's monotonic clock may drift apart per unit of time: 500 ppm, the
  // most NTP (and the kernel's frequency adjustment) slews a disciplined clock; free-running quartz is ~50 ppm.
  // At one reading a second it widens the bounds by 1 ms a second past the last reading (an outage's age).
  static constexpr double kRateError = 500e-6;
  // How far a reading may fall outside the bounds held before it counts as a step: the bounds are exact but for
  // the rates (kRateError, already in them), so this is only room for a virtualised host's clock-source jitter;
  // 5 ms is far below any step that matters to a watermark window of seconds.
  static constexpr std::chrono::milliseconds kStepTolerance{5};

  // Takes a reading: kept intersected with the bounds held (the tighter of both), or alone when the two disagree
  // or the reading is of another epoch. Returns the step (the reading's middle minus the held bounds' there) when
  // it disagrees with the bounds held, of its epoch or an earlier one, by more than kStepTolerance; counted in
  // steps(). A step's reading is NOT taken yet: the bounds stay the old clock's until AcceptStep(), so that until
  // the caller has recorded the step (sql/017) no statement guarded by GuardUs() judges a row by the new clock
  // unrecorded. Any thread.
  std::optional<PgClockStep> Record(const PgClockReading& r) ABSL_LOCKS_EXCLUDED(write_mu_);
  // Takes the reading of the step the last Record() reported, under epoch `epoch` (the one the step opened, or the
  // reading's own). No-op without one pending. Any thread.
  void AcceptStep(std::int64_t epoch) ABSL_LOCKS_EXCLUDED(write_mu_);
  // Another server from now on (a moved partition): no bounds until its first reading. Any thread.
  void Forget() ABSL_LOCKS_EXCLUDED(write_mu_);
  // Another party saw this clock step (the watermark connection, within a beat): no bounds until the next reading
  // (no first_seen or horizon judged by the old clock meanwhile), but the old ones are kept for that reading to
  // measure the step against (Record) and for GuardUs. Any thread.
  void SuspendForStep() ABSL_LOCKS_EXCLUDED(write_mu_);

  // The server's clock at `now` (this host's monotonic clock) is at least LowerUs and at most UpperUs, in µs since
  // the epoch; nullopt before the first reading (and after Forget). Lock-free (a sequence lock); any thread.
  using Steady = std::chrono::steady_clock;
  std::optional<std::int64_t> LowerUs(Steady::time_point now = Steady::now()) const;
  std::optional<std::int64_t> UpperUs(Steady::time_point now = Steady::now()) const;
  // UpperUs plus every step back recorded (BehindUs): the clock by which a record this instance answers from is
  // judged past the horizon, so it stops being an answer no later than PostgreSQL, which may count the record's row
  // that much older than its clock says (sql/017), takes the row over. Lock-free; any thread.
  std::optional<std::int64_t> ExpiryUpperUs(Steady::time_point now = Steady::now()) const;
  // The server's clock minus this host's wall clock (the bounds' middle) and the bounds' width, in seconds, for
  // the log and /stats; nullopt without bounds. Any thread.
  struct Offset {
    double seconds, uncertainty;
  };
  std::optional<Offset> OffsetNow() const;
  // The most the server's now() may read in a statement sent now: UpperUs plus kGuardSlack (the statement's way to
  // the server, and a step smaller than it). A statement that judges rows by now() carries it and refuses to
  // when now() is past it: PostgreSQL's clock stepped forward and no instance has recorded it yet (sql/017). nullopt
  // without bounds (no guard). Any thread.
  static constexpr std::chrono::milliseconds kGuardSlack{1000};
  std::optional<std::int64_t> GuardUs(Steady::time_point now = Steady::now()) const ABSL_LOCKS_EXCLUDED(write_mu_);
  // The epoch of the bounds held (-1 without bounds), and the steps Record() reported so far. Any thread.
  std::int64_t epoch() const;
  std::uint64_t steps() const { return steps_.load(std::memory_order_relaxed); }  // relaxed: a counter
  // Every forward step of the clock the database has recorded (sql/017 scangate_clock_ahead_total), in µs, as last
  // read (0 before): a record this instance judges past the horizon by its own reading of the clock (a journal's
  // recovery) is judged so only this much later. BehindUs: every step back (scangate_clock_behind(NULL)), µs >= 0:
  // PostgreSQL may count a row up to this much older than its clock says, so a record this instance answers from
  // stops being an answer this much earlier. Any thread.
  std::int64_t AheadUs() const { return ahead_us_.load(std::memory_order_relaxed); }  // relaxed: one value alone
  std::int64_t BehindUs() const { return behind_us_.load(std::memory_order_relaxed); }  // relaxed: as AheadUs
  void SetSteps(std::int64_t ahead_us, std::int64_t behind_us) {
    ahead_us_.store(ahead_us, std::memory_order_relaxed);  // relaxed: each read alone, never as a pair
    behind_us_.store(behind_us, std::memory_order_relaxed);
  }

 private:
  // The bounds held: at steady time `at_ns_`, the server's clock read within [lo_us_, hi_us_], under `epoch`.
  struct Bounds {
    std::int64_t at_ns, lo_us, hi_us, epoch;
  };
  std::optional<Bounds> Load() const;
  void Store(const std::optional<Bounds>& b) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  static std::int64_t Lower(const Bounds& b, std::int64_t now_ns);
  static std::int64_t Upper(const Bounds& b, std::int64_t now_ns);

  mutable Mutex write_mu_;  // writers (the reader thread, a retarget) one at a time; readers take no lock but
                            // GuardUs of a suspended clock
  std::optional<Bounds> pending_ ABSL_GUARDED_BY(write_mu_);  // a step's reading, until AcceptStep
  std::optional<Bounds> suspended_ ABSL_GUARDED_BY(write_mu_);  // the bounds SuspendForStep set aside
  // The sequence lock: odd while a writer changes the fields. The fields are atomics read relaxed between two
  // loads of seq_ (acquire), so a torn read is retried, never used.
  std::atomic<std::uint64_t> seq_{0};
  std::atomic<bool> valid_{false};
  std::atomic<std::int64_t> at_ns_{0}, lo_us_{0}, hi_us_{0}, epoch_{0};
  std::atomic<std::uint64_t> steps_{0};
  std::atomic<std::int64_t> ahead_us_{0}, behind_us_{0};
};

// One PgClock per partition; Of(d) is the one whose server holds d's row (storage/partitions/partition_map.h).
class PgClocks {
 public:
  explicit PgClocks(std::size_t partitions);
  std::size_t size() const { return clocks_.size(); }
  PgClock& at(std::size_t p) { return *clocks_.at(p); }
  const PgClock& at(std::size_t p) const { return *clocks_.at(p); }
  const PgClock& Of(const Digest& d) const;

 private:
  std::vector<std::unique_ptr<PgClock>> clocks_;
};

}  // namespace scangate::storage
