// App's maintenance tick (server/app.h), once a second on the main thread: filter rotation, the filter telemetry
// sample, pg_state transitions, a host suspension noticed (issue 42), readiness reported to systemd. Apart from
// app.cc, which owns start-up order and shutdown.
#include <chrono>

#include "server/app.h"
#include "server/log.h"
#include "server/metrics/filter_rotation_log.h"
#include "server/metrics/filter_telemetry.h"
#include "server/verdict/service.h"

namespace scangate::server {
namespace {
constexpr auto kMaintenancePeriod = std::chrono::seconds(1);  // filter rotation, pg_state check, telemetry
static_assert(kMaintenancePeriod == FilterTelemetry::kRefreshPeriod, "/stats promises this staleness bound");
// A suspension of the host shorter than this is not logged (CLOCK_BOOTTIME - CLOCK_MONOTONIC jitters by µs).
constexpr auto kSuspensionNoticed = std::chrono::milliseconds(500);
}  // namespace

// Maintenance, once a second on the main thread: filter rotation, the filter telemetry sample, pg_state
// transitions.
void App::ScheduleMaintenance() {
  if (!rotation_log_) rotation_log_ = std::make_unique<FilterRotationLog>(*filter_);
  tick_.expires_after(kMaintenancePeriod);
  tick_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    NoteSuspension();
    filter_->RotateExpired(std::chrono::steady_clock::now());
    service_->RefreshTelemetry();  // after rotating: the sample shows the new generations
    rotation_log_->Poll();         // one filter_rotation line per shard that rotated for capacity
    const bool up = store_->up();
    if (up != pg_up_) {
      pg_up_ = up;
      Log(up ? LogLevel::kInfo : LogLevel::kWarn, "pg_state", {{"state", up ? "up" : "down"}});
    }
    ReportReadiness();
    ScheduleMaintenance();
  });
}

void App::NoteSuspension() {
  // Issue 42, item 3: the bounds that age (freshness, --max-commit-lag, the peers' coverage) run on the boot clock,
  // which counts a suspension, so a resumed host finds its followers stale instead of "fresh" for up to
  // --follow-max-lag; this makes the resumption visible.
  const auto suspended = BootClock::Suspended();
  if (suspended - suspended_ > kSuspensionNoticed) {
    Log(LogLevel::kWarn, "host_resumed",
        {{"suspended_seconds", std::chrono::duration<double>(suspended - suspended_).count()},
         {"note", "the host was suspended: followers and the peers' view are stale until their next poll (new keys "
                  "are decided in PostgreSQL or wait meanwhile)"}});
  }
  suspended_ = suspended;
}

}  // namespace scangate::server
