#include "storage/clock/pg_clock.h"

#include <algorithm>
#include <cmath>

#include "storage/partitions/partition_map.h"

namespace scangate::storage {
namespace {

std::int64_t Ns(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// How far the server's clock moves in `d_ns` of this host's monotonic time, rounded towards `up` or down, with
// kRateError either way: d ± e|d| µs.
std::int64_t Drifted(std::int64_t d_ns, bool up) {
  const double d_us = static_cast<double>(d_ns) / 1000.0;
  const double slack = PgClock::kRateError * std::abs(d_us);
  return static_cast<std::int64_t>(up ? std::ceil(d_us + slack) : std::floor(d_us - slack));
}

}  // namespace

std::int64_t PgClock::Lower(const Bounds& b, std::int64_t now_ns) { return b.lo_us + Drifted(now_ns - b.at_ns, false); }
std::int64_t PgClock::Upper(const Bounds& b, std::int64_t now_ns) { return b.hi_us + Drifted(now_ns - b.at_ns, true); }

std::optional<PgClock::Bounds> PgClock::Load() const {
  for (;;) {
    const std::uint64_t s1 = seq_.load(std::memory_order_acquire);  // acquire: the fields written before it
    if ((s1 & 1) != 0) continue;  // a writer is in the middle (a few stores): retry
    // relaxed: bracketed by the two loads of seq_; a value of another write is detected by the second one.
    const bool valid = valid_.load(std::memory_order_relaxed);
    const Bounds b{at_ns_.load(std::memory_order_relaxed), lo_us_.load(std::memory_order_relaxed),
                   hi_us_.load(std::memory_order_relaxed), epoch_.load(std::memory_order_relaxed)};
    std::atomic_thread_fence(std::memory_order_acquire);  // the field loads above happen before the re-check
    if (seq_.load(std::memory_order_relaxed) != s1) continue;
    return valid ? std::optional<Bounds>(b) : std::nullopt;
  }
}

void PgClock::Store(const std::optional<Bounds>& b) {
  const std::uint64_t s = seq_.load(std::memory_order_relaxed);  // relaxed: writers are serialized by write_mu_
  seq_.store(s + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);  // the odd count is visible before any field changes
  // relaxed: published by the release store of seq_ below.
  valid_.store(b.has_value(), std::memory_order_relaxed);
  if (b) {
    at_ns_.store(b->at_ns, std::memory_order_relaxed);
    lo_us_.store(b->lo_us, std::memory_order_relaxed);
    hi_us_.store(b->hi_us, std::memory_order_relaxed);
    epoch_.store(b->epoch, std::memory_order_relaxed);
  }
  seq_.store(s + 2, std::memory_order_release);  // release: the fields before the even count
}

std::optional<PgClockStep> PgClock::Record(const PgClockReading& r) {
  // At `answered` the server's clock read at least server_us (read before it) and at most server_us plus the
  // round trip (read after `sent`).
  Bounds next{Ns(r.answered), r.server_us, r.server_us + Drifted(Ns(r.answered) - Ns(r.sent), true), r.epoch};
  std::optional<PgClockStep> step;
  const MutexLock lock(&write_mu_);
  // Bounds of an earlier epoch are compared (a failover onto a host whose clock is ahead is a step of the clock the
  // rows were stamped by), never intersected; a later one's (the reading was on its way while another came) neither.
  std::optional<Bounds> held = Load();
  if (!held) held = suspended_;  // a step another party saw: measured against the bounds it set aside
  if (held && held->epoch <= r.epoch) {
    const std::int64_t held_lo = Lower(*held, next.at_ns), held_hi = Upper(*held, next.at_ns);
    const std::int64_t lo = std::max(next.lo_us, held_lo);
    const std::int64_t hi = std::min(next.hi_us, held_hi);
    if (lo <= hi && held->epoch == r.epoch) {
      next = Bounds{next.at_ns, lo, hi, r.epoch};  // both true: the intersection
    } else {
      // They disagree (or are of two epochs): the new reading alone; a step when by more than the tolerance.
      const std::int64_t tolerance = std::chrono::duration_cast<std::chrono::microseconds>(kStepTolerance).count();
      if (next.lo_us > held_hi + tolerance || next.hi_us < held_lo - tolerance) {
        const double seconds =
            (static_cast<double>(next.lo_us + next.hi_us) - static_cast<double>(held_lo + held_hi)) * 0.5e-6;
        const std::int64_t before_us =
            seconds > 0 ? held_hi : next.lo_us - Drifted(next.at_ns - held->at_ns, true);  // PgClockStep
        step = PgClockStep{seconds, held->epoch, before_us};
        steps_.fetch_add(1, std::memory_order_relaxed);  // relaxed: a counter
        pending_ = next;  // taken by AcceptStep, once the step is recorded
        return step;
      }
    }
  }  // else: no bounds, or a later epoch's
  pending_.reset();
  suspended_.reset();
  Store(next);
  return step;
}

void PgClock::AcceptStep(std::int64_t epoch) {
  const MutexLock lock(&write_mu_);
  if (!pending_) return;
  pending_->epoch = epoch;
  Store(pending_);
  pending_.reset();
  suspended_.reset();
}

void PgClock::SuspendForStep() {
  const MutexLock lock(&write_mu_);
  if (const std::optional<Bounds> held = Load()) suspended_ = held;
  Store(std::nullopt);
}

std::optional<std::int64_t> PgClock::GuardUs(std::chrono::steady_clock::time_point now) const {
  const auto slack = std::chrono::duration_cast<std::chrono::microseconds>(kGuardSlack).count();
  if (const std::optional<std::int64_t> u = UpperUs(now)) return *u + slack;
  // No bounds: none yet (no guard), or set aside for a step seen elsewhere and not measured yet (the old clock's).
  const MutexLock lock(&write_mu_);
  if (!suspended_) return std::nullopt;
  return Upper(*suspended_, Ns(now)) + slack;
}

std::int64_t PgClock::epoch() const {
  const std::optional<Bounds> b = Load();
  return b ? b->epoch : -1;
}

void PgClock::Forget() {
  const MutexLock lock(&write_mu_);
  pending_.reset();
  suspended_.reset();
  Store(std::nullopt);
}

std::optional<std::int64_t> PgClock::LowerUs(std::chrono::steady_clock::time_point now) const {
  const std::optional<Bounds> b = Load();
  if (!b) return std::nullopt;
  return Lower(*b, Ns(now));
}

std::optional<std::int64_t> PgClock::UpperUs(std::chrono::steady_clock::time_point now) const {
  const std::optional<Bounds> b = Load();
  if (!b) return std::nullopt;
  return Upper(*b, Ns(now));
}

std::optional<std::int64_t> PgClock::ExpiryUpperUs(std::chrono::steady_clock::time_point now) const {
  const std::optional<std::int64_t> u = UpperUs(now);
  return u ? std::optional<std::int64_t>(*u + BehindUs()) : std::nullopt;
}

std::optional<PgClock::Offset> PgClock::OffsetNow() const {
  const auto steady = std::chrono::steady_clock::now();
  using std::chrono::system_clock;
  const auto wall_us =
      std::chrono::duration_cast<std::chrono::microseconds>(system_clock::now().time_since_epoch()).count();
  const std::optional<std::int64_t> lo = LowerUs(steady), hi = UpperUs(steady);
  if (!lo || !hi) return std::nullopt;
  return Offset{(static_cast<double>(*lo + *hi) / 2 - static_cast<double>(wall_us)) * 1e-6,
                static_cast<double>(*hi - *lo) * 1e-6};
}

PgClocks::PgClocks(std::size_t partitions) {
  for (std::size_t p = 0; p < std::max<std::size_t>(partitions, 1); ++p) clocks_.push_back(std::make_unique<PgClock>());
}

const PgClock& PgClocks::Of(const Digest& d) const { return *clocks_[PartitionOf(d, clocks_.size())]; }

}  // namespace scangate::storage
