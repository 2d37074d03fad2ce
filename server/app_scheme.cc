// App's digest-scheme step (issue 55; the decision table and the concurrency argument: storage/scheme/scheme_record.h):
// every partition's database records the scheme and refuses another one before this instance writes anything.
#include <limits>

#include <pqxx/pqxx>

#include "server/app.h"
#include "server/log.h"
#include "server/metrics/metrics.h"
#include "server/storage_readers.h"
#include "server/verdict/service.h"
#include "core/time_format.h"
#include "storage/clock/pg_clock.h"
#include "storage/partitions/partition_map.h"
#include "storage/pg/conninfo.h"
#include "storage/start/startup.h"

namespace scangate::server {
namespace {
constexpr auto kSchemeRetryPause = std::chrono::seconds(1);  // a connection lost during the check

std::string_view ActionName(storage::SchemeAction a) {
  switch (a) {
    case storage::SchemeAction::kRecord: return "recorded";
    case storage::SchemeAction::kMatch: return "matches";
    case storage::SchemeAction::kStartRotation: return "rotation_started";
    case storage::SchemeAction::kEndRotation: return "rotation_ended";
    case storage::SchemeAction::kRefuse: return "refused";
  }
  return "unknown";
}
}  // namespace

std::optional<int> App::CheckDigestScheme() {
  storage::LocalScheme local;
  local.current = *scheme_;
  local.previous = previous_scheme_;
  bool rotated = false;
  schemes_.assign(store_->partitions(), storage::RecordedScheme{});
  storage::ConnectionDefaults defaults;
  defaults.statement_timeout = store_options_.warm_statement_timeout;  // a rotation waits for in-flight writers
  defaults.tcp_user_timeout = store_options_.tcp_user_timeout;
  defaults.application_name = "scangate-scheme";
  for (unsigned p = 0; p < store_->partitions(); ++p) {
    std::optional<storage::SchemeCheck> check;
    const bool done = storage::RetryWithBackoff(
        storage::RetryPolicy{kSchemeRetryPause, kSchemeRetryPause, std::nullopt},
        [&](int, std::chrono::milliseconds) {
          try {
            pqxx::connection conn(storage::WithConnectionDefaults(store_->conninfo(p), defaults));
            check = storage::CheckDigestScheme(conn, local, config_.retention);
            return true;
          } catch (const pqxx::broken_connection& e) {
            Log(LogLevel::kWarn, "pg_state", {{"state", "down"}, {"error", e.what()}, {"partition", p}});
            return false;
          }
        },
        [this](std::chrono::milliseconds pause) { return PauseUnlessStopped(pause); });
    if (!done) return 0;  // stopped by a signal
    const storage::SchemeDecision& d = check->decision;
    if (d.action == storage::SchemeAction::kRefuse) {
      Log(LogLevel::kError, "digest_scheme_mismatch",
          {{"component", d.component}, {"partition", p}, {"detail", d.detail}, {"exit_code", kExitConfig}});
      store_->Shutdown();
      return kExitConfig;
    }
    rotated = rotated || d.action == storage::SchemeAction::kStartRotation;
    boost::json::object fields{{"action", ActionName(d.action)},
                               {"partition", p},
                               {"fingerprint", ToHex(local.current.fingerprint).substr(0, 12)},
                               {"keys", local.current.keys},
                               {"stored", local.current.stored}};
    if (check->recorded) {
      schemes_[p] = *check->recorded;
      if (check->recorded->previous) {
        fields["previous_fingerprint"] = ToHex(check->recorded->previous->fingerprint).substr(0, 12);
        fields["rotation_started_at"] = Rfc3339Micros(check->recorded->rotation_started_us);
        fields["previous_needed_until"] =
            check->recorded->previous_needed_until_us == std::numeric_limits<std::int64_t>::max()
                ? std::string("infinity")
                : Rfc3339Micros(check->recorded->previous_needed_until_us);
      }
    }
    if (d.previous_unneeded) {
      fields["note"] = "--digest-secret-previous-file is no longer needed by this database: remove it";
    }
    Log(LogLevel::kInfo, "digest_scheme", std::move(fields));
  }
  if (rotated) {
    // Instances still on the previous secret alone answer from their filter only within storage::kSchemeLease of
    // a read that found their scheme current (storage/scheme/scheme_watch.h): outwait every such lease.
    notify_.Status("starting: digest secret rotation, waiting for the old scheme's leases");
    if (!PauseUnlessStopped(storage::kRotationSettle)) return 0;
  }
  return std::nullopt;
}

}  // namespace scangate::server

namespace scangate::server {

void App::AttachDigestScheme() {
  if (previous_digester_) service_->AttachPrevious(*previous_digester_, config_, readers_->lookups());
  if (config_.ack != AckMode::kFilter) return;  // every `new` of --ack=commit is an insert: fenced in PostgreSQL
  std::vector<std::string> conninfos;
  storage::ConnectionDefaults d;
  d.statement_timeout = store_options_.statement_timeout;
  d.tcp_user_timeout = store_options_.tcp_user_timeout;
  d.application_name = "scangate-scheme-watch";
  for (unsigned p = 0; p < store_->partitions(); ++p) {
    conninfos.push_back(storage::WithConnectionDefaults(store_->conninfo(p), d));
  }
  scheme_watch_ = std::make_unique<storage::SchemeWatch>(std::move(conninfos), *scheme_, store_options_.log);
  scheme_watch_->Start();
  service_->AttachSchemeWatch([w = scheme_watch_.get()](const Digest& dg) { return w->Current(dg); });
}

void App::FillSchemeStats(MetricsSnapshot& s) const {
  s.digest_fingerprint = ToHex(scheme_->fingerprint).substr(0, 12);
  s.digest_previous_set = previous_digester_.has_value();
  for (unsigned p = 0; p < schemes_.size(); ++p) {
    MetricsSnapshot::DigestSchemeSample d;
    d.partition = schemes_.size() > 1 ? storage::PartitionLabel(p) : std::string();
    std::optional<storage::RecordedScheme> r = schemes_[p];
    if (scheme_watch_ && p < scheme_watch_->partitions()) {
      const storage::SchemeWatchSample w = scheme_watch_->Sample(p);
      d.watched = true;
      d.confirmed = w.confirmed;
      d.fenced = w.fenced;
      if (w.recorded) r = w.recorded;  // the row as last read: another instance may have rotated or ended one
    }
    const storage::PgClock* clock = clocks_ != nullptr && p < clocks_->size() ? &clocks_->at(p) : nullptr;
    if (r && r->previous) {
      d.rotation = true;
      d.rotation_started_us = r->rotation_started_us;
      d.previous_needed_until_us = r->previous_needed_until_us;
      // The row may be this instance's start's reading (--ack=commit: no SchemeWatch): a forward step of
      // PostgreSQL's clock recorded since keeps the previous secret's keys that much longer (sql/017). Every
      // forward step recorded since the read counts, a step back does not: never earlier than the start check.
      const std::int64_t since = clock != nullptr ? clock->AheadUs() - r->clock_ahead_total_us : 0;
      if (d.previous_needed_until_us != std::numeric_limits<std::int64_t>::max() && since > 0) {
        d.previous_needed_until_us += since;
      }
    }
    if (clock != nullptr) d.pg_now_us = clock->LowerUs();
    s.digest_schemes.push_back(std::move(d));
  }
}

}  // namespace scangate::server
