// BootClock: a std::chrono clock on CLOCK_BOOTTIME — monotonic like steady_clock (never steps with the wall clock),
// and, unlike steady_clock (CLOCK_MONOTONIC), it also counts the time the host was suspended. Every bound that
// compares "how long ago" across threads and against PostgreSQL's clock uses it (issue 42): a follower's freshness,
// the journal's oldest uncommitted record (--max-commit-lag), the peers' watermark. With steady_clock a host resumed
// from a suspension would find a stamp taken before it "young" — a follower stale by the whole suspension would
// look fresh — and with the wall clock a backward step of Δ switches a bound off for Δ.
// Threading: now() is safe from any thread (one vDSO call, ~30 ns here, the same as steady_clock).
#pragma once

#include <time.h>

#include <chrono>
#include <cstdint>

namespace scangate {

struct BootClock {
  using duration = std::chrono::nanoseconds;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::time_point<BootClock>;
  static constexpr bool is_steady = true;

  static time_point now() noexcept {
    timespec ts{};
    ::clock_gettime(CLOCK_BOOTTIME, &ts);
    return time_point(duration(static_cast<rep>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec));
  }
  // Nanoseconds since boot, for lock-free atomics (0 never occurs after boot: callers use it as "none").
  static std::int64_t NowNs() noexcept { return now().time_since_epoch().count(); }
  // How long the host has been suspended since boot: CLOCK_BOOTTIME - CLOCK_MONOTONIC (grows only across a
  // suspension; jitter of a few µs between the two reads).
  static std::chrono::nanoseconds Suspended() noexcept {
    timespec b{}, m{};
    ::clock_gettime(CLOCK_BOOTTIME, &b);
    ::clock_gettime(CLOCK_MONOTONIC, &m);
    return std::chrono::seconds(b.tv_sec - m.tv_sec) + std::chrono::nanoseconds(b.tv_nsec - m.tv_nsec);
  }
};

}  // namespace scangate
