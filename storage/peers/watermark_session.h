// WatermarkPublisher's internals shared by its two files — watermark_publisher.cc (the thread, the beats, the clock
// epoch) and watermark_lease.cc (the claim of the row: THE LEASE): its connection with its clock sample (Session),
// the session settings and the lease's final error. Not for other units.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>

#include "storage/clock/pg_clock.h"
#include "storage/peers/peer_connection.h"
#include "storage/peers/watermark_publisher.h"

namespace scangate::storage {
namespace watermark_detail {

// The updates' commits need not wait for their WAL flush: a row only ever claims commits that were themselves
// acknowledged (synchronously) before it was written, so an update lost to a crash or a failover leaves an older,
// smaller covered_until — the others wait a little longer, never trust more. Spares every 50 ms update its flush.
// The registration is the exception (kSyncSql around it): lost, the others would not know this instance exists.
inline constexpr const char* kSessionSql = "SET synchronous_commit = off";
inline constexpr const char* kSyncSql = "SET synchronous_commit = on";

// Another process holds this identity (the header's L2, L3): final, never retried.
struct LeaseLost : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Floor division (a lower bound must round down, negative differences included).
inline std::int64_t FloorDiv(std::int64_t a, std::int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

}  // namespace watermark_detail

// One connection and its latest clock sample: a statement sent at boot time sent_ns, answered at r_ns, whose now()
// was t_us under clock epoch `epoch`, so PG(x) >= t_us + (x - r_ns) and PG(x) <= t_us + (x - sent_ns) for any boot
// time x while the clock does not step (peer_view.h, the argument, 2.; THE CLOCK EPOCH). Kept across reconnections
// to one server: the first statement of a new connection is checked against it too.
struct WatermarkPublisher::Session {
  peers_detail::ConnPtr conn;
  std::int64_t t_us = 0;
  std::int64_t r_ns = 0;
  std::int64_t sent_ns = 0;  // when the statement of the latest sample was sent (the lease's L3)
  std::int64_t epoch = -1;   // the clock epoch of the sample; -1: none yet
  // PostgreSQL's clock at boot time x, a lower bound (µs since the epoch).
  std::int64_t LowerUs(std::int64_t x_ns) const { return t_us + watermark_detail::FloorDiv(x_ns - r_ns, 1000); }
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

}  // namespace scangate::storage
