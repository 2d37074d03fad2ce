#include "server/metrics/metrics.h"

#include <algorithm>
#include <charconv>
#include <string_view>

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include "server/metrics/filter_telemetry.h"
#include "server/metrics/prom_writer.h"
#include "server/metrics/access_metrics.h"
#include "server/metrics/follower_metrics.h"
#include "server/metrics/peer_metrics.h"
#include "server/metrics/scheme_metrics.h"
#include "server/metrics/table_metrics.h"

namespace scangate::server {
namespace {

std::size_t StatusSlot(unsigned status) {
  for (std::size_t i = 0; i < kCountedStatuses.size(); ++i) {
    if (kCountedStatuses[i] == status) return i;
  }
  return kCountedStatuses.size();
}

std::string StatusLabel(std::size_t slot) {
  return slot < kCountedStatuses.size() ? std::to_string(kCountedStatuses[slot]) : "other";
}

}  // namespace

void ThreadCounters::CountRequest(Route route, unsigned status, std::chrono::nanoseconds latency_ns) {
  const auto r = static_cast<std::size_t>(route);
  requests[r][StatusSlot(status)].Inc();
  const double seconds = std::chrono::duration<double>(latency_ns).count();
  std::size_t b = 0;
  while (b < kLatencyBuckets.size() && seconds > kLatencyBuckets[b]) ++b;
  latency[r][b].Inc();
  latency_sum_ns[r].Inc(static_cast<std::uint64_t>(latency_ns.count() > 0 ? latency_ns.count() : 0));
}

void ThreadCounters::CountVerdict(bool is_new, bool via_filter) {
  if (!is_new) duplicate_via_exact.Inc();
  else if (via_filter) new_via_filter.Inc();
  else new_via_exact.Inc();
}

Metrics::Metrics(unsigned threads) {
  blocks_.reserve(threads);
  for (unsigned i = 0; i < threads; ++i) blocks_.push_back(std::make_unique<ThreadCounters>());
}

void Metrics::Collect(MetricsSnapshot& out) const {
  for (const auto& b : blocks_) {
    for (std::size_t r = 0; r < kRouteCount; ++r) {
      for (std::size_t s = 0; s < kStatusSlots; ++s) out.requests[r][s] += b->requests[r][s].Get();
      for (std::size_t l = 0; l < kLatencySlots; ++l) out.latency[r][l] += b->latency[r][l].Get();
      out.latency_sum_seconds[r] += static_cast<double>(b->latency_sum_ns[r].Get()) * 1e-9;
    }
    out.new_via_filter += b->new_via_filter.Get();
    out.new_via_exact += b->new_via_exact.Get();
    out.duplicate_via_exact += b->duplicate_via_exact.Get();
    out.false_positives += b->false_positives.Get();
    out.stale += b->stale.Get();
    out.untrusted_negatives += b->untrusted_negatives.Get();
    out.recent_hits += b->recent_hits.Get();
    out.idempotent_replays += b->idempotent_replays.Get();
    out.recent_replays += b->recent_replays.Get();
    out.follower_fallbacks += b->follower_fallbacks.Get();
    out.commit_lag_fallbacks += b->commit_lag_fallbacks.Get();
    out.peer_uncovered += b->peer_uncovered.Get();
    out.peer_read_duplicates += b->peer_read_duplicates.Get();
    out.previous_digest_duplicates += b->previous_digest_duplicates.Get();
    out.peer_waits += b->peer_waits.Get();
    out.peer_wait_timeouts += b->peer_wait_timeouts.Get();
    out.unpublished_fallbacks += b->unpublished_fallbacks.Get();
    out.mismatch_lot += b->mismatch_lot.Get();
    out.mismatch_expiry += b->mismatch_expiry.Get();
    out.queue_waits += b->queue_waits.Get();
    out.queue_wait_timeouts += b->queue_wait_timeouts.Get();
    out.refused_per_address += b->refused_per_address.Get();
    out.refused_full += b->refused_full.Get();
    out.client_certificates_refused += b->client_certificates_refused.Get();
  }
}

double LatencyQuantile(const std::array<std::uint64_t, kLatencySlots>& per_bucket, double q) {
  std::uint64_t total = 0;
  for (const std::uint64_t c : per_bucket) total += c;
  if (total == 0) return 0.0;
  const double rank = std::clamp(q, 0.0, 1.0) * static_cast<double>(total);
  std::uint64_t below = 0;
  for (std::size_t b = 0; b < kLatencyBuckets.size(); ++b) {
    if (per_bucket[b] != 0 && static_cast<double>(below + per_bucket[b]) >= rank) {
      const double lo = b == 0 ? 0.0 : kLatencyBuckets[b - 1];
      const double within = (rank - static_cast<double>(below)) / static_cast<double>(per_bucket[b]);
      return lo + (kLatencyBuckets[b] - lo) * within;
    }
    below += per_bucket[b];
  }
  return kLatencyBuckets.back();  // the rank lies in the +Inf bucket
}

std::string RenderPrometheus(const MetricsSnapshot& s) {
  PromWriter w;
  w.Header("scangate_http_requests_total", "counter", "HTTP requests answered, by route and status code.");
  for (std::size_t r = 0; r < kRouteCount; ++r) {
    for (std::size_t c = 0; c < kStatusSlots; ++c) {
      if (s.requests[r][c] == 0) continue;
      w.Sample("scangate_http_requests_total",
               "route=\"" + std::string(RouteLabel(static_cast<Route>(r))) + "\",code=\"" + StatusLabel(c) + "\"",
               s.requests[r][c]);
    }
  }
  w.Header("scangate_http_request_duration_seconds", "histogram",
           "Time from the first byte of a request to its response written, by route.");
  for (std::size_t r = 0; r < kRouteCount; ++r) {
    std::uint64_t count = 0;
    std::vector<std::pair<double, std::uint64_t>> cumulative;
    for (std::size_t b = 0; b < kLatencyBuckets.size(); ++b) {
      count += s.latency[r][b];
      cumulative.emplace_back(kLatencyBuckets[b], count);
    }
    count += s.latency[r][kLatencyBuckets.size()];
    if (count == 0) continue;
    w.Histogram("scangate_http_request_duration_seconds",
                "route=\"" + std::string(RouteLabel(static_cast<Route>(r))) + "\"", cumulative,
                s.latency_sum_seconds[r], count);
  }
  w.Header("scangate_verdicts_total", "counter", "Verdicts given, by verdict and deciding path.");
  w.Sample("scangate_verdicts_total", "verdict=\"new\",via=\"filter\"", s.new_via_filter);
  w.Sample("scangate_verdicts_total", "verdict=\"new\",via=\"exact\"", s.new_via_exact);
  w.Sample("scangate_verdicts_total", "verdict=\"duplicate\",via=\"exact\"", s.duplicate_via_exact);
  w.Header("scangate_queue_waits_total", "counter",
           "Keys (of /observe and /observe/batch) that found the PostgreSQL write queue full and waited for room (--queue-wait).");
  w.Sample("scangate_queue_waits_total", "", s.queue_waits);
  w.Header("scangate_queue_wait_timeouts_total", "counter",
           "Keys that waited for room in the write queue past --queue-wait and got 503 unavailable.");
  w.Sample("scangate_queue_wait_timeouts_total", "", s.queue_wait_timeouts);
  w.Header("scangate_filter_false_positives_total", "counter",
           "Filter said possibly seen, PostgreSQL inserted the key (after warm start).");
  w.Sample("scangate_filter_false_positives_total", "", s.false_positives);
  w.Header("scangate_filter_stale_total", "counter",
           "Filter said definitely new, PostgreSQL already had the key (ack=commit, after warm start).");
  w.Sample("scangate_filter_stale_total", "", s.stale);
  std::uint64_t capacity_rotations = 0, window_rotations = 0, distrusting = 0;
  for (const ShardStats& st : s.shards) {
    capacity_rotations += st.capacity_rotations;
    window_rotations += st.window_rotations;
    distrusting += st.distrust_until != std::chrono::steady_clock::time_point{};
  }
  w.Header("scangate_filter_rotations_total", "counter",
           "Filter generation rotations, by cause: capacity (the generation filled up before --window: "
           "--capacity is too small) or window (age).");
  w.Sample("scangate_filter_rotations_total", "cause=\"capacity\"", capacity_rotations);
  w.Sample("scangate_filter_rotations_total", "cause=\"window\"", window_rotations);
  w.Header("scangate_filter_untrusted_negatives_total", "counter",
           "Filter said definitely new, but its shard forgot keys within the window (capacity rotation): "
           "the key took the exact path (after warm start).");
  w.Sample("scangate_filter_untrusted_negatives_total", "", s.untrusted_negatives);
  w.Header("scangate_filter_distrusting_shards", "gauge",
           "Shards whose negatives are not trusted now (a capacity rotation forgot keys within the window; "
           "may lag by up to a few negatives, cleared lazily).");
  w.Sample("scangate_filter_distrusting_shards", "", distrusting);
  w.Header("scangate_recent_hits_total", "counter",
           "Possible hits answered duplicate from the recent set (digests this instance knows are recorded), "
           "without a PostgreSQL round trip; also counted in scangate_verdicts_total{verdict=\"duplicate\"}.");
  w.Sample("scangate_recent_hits_total", "", s.recent_hits);
  w.Header("scangate_idempotent_replays_total", "counter",
           "Retries (the same Idempotency-Key, the same terminal, the same key) answered their first request's "
           "new again (Idempotent-Replayed: true); also counted in scangate_verdicts_total{verdict=\"new\"}.");
  w.Sample("scangate_idempotent_replays_total", "", s.idempotent_replays);
  w.Header("scangate_recent_replays_total", "counter",
           "Of those retries, the ones answered from the recent set (it knows the request that recorded the key), "
           "without a PostgreSQL round trip.");
  w.Sample("scangate_recent_replays_total", "", s.recent_replays);
  w.Header("scangate_pack_mismatches_total", "counter",
           "--keys=gs1: duplicates whose lot or expiry differs from the pack's recorded first scan (a suspected "
           "falsification or a mislabelled pack), by field; one duplicate may count for both fields.");
  w.Sample("scangate_pack_mismatches_total", "field=\"lot\"", s.mismatch_lot);
  w.Sample("scangate_pack_mismatches_total", "field=\"expiry\"", s.mismatch_expiry);
  w.Header("scangate_recent_keys", "gauge", "Digests held in the recent set now (at most scangate_recent_capacity).");
  w.Sample("scangate_recent_keys", "", s.recent_keys);
  w.Header("scangate_recent_capacity", "gauge", "Most digests the recent set holds (--recent-keys, rounded down).");
  w.Sample("scangate_recent_capacity", "", s.recent_capacity);
  w.Header("scangate_write_behind_conflicts_total", "counter",
           "Write-behind rows (ack=filter) that PostgreSQL already held.");
  w.Sample("scangate_write_behind_conflicts_total", "", s.store.write_behind_conflicts);
  w.Header("scangate_filter_fill_ratio", "gauge", "Fraction of set bits in the active generation, by shard.");
  for (std::size_t i = 0; i < s.shards.size(); ++i) {
    w.Sample("scangate_filter_fill_ratio", "shard=\"" + std::to_string(i) + "\"", s.shards[i].fill_ratio);
  }
  w.Header("scangate_filter_fp_target", "gauge", "--fp-target: the false-positive rate the filter is sized for.");
  w.Sample("scangate_filter_fp_target", "", s.filter_fp_target);
  w.Header("scangate_filter_estimated_fp", "gauge", "Estimated false-positive rate of a query, by shard.");
  for (std::size_t i = 0; i < s.shards.size(); ++i) {
    w.Sample("scangate_filter_estimated_fp", "shard=\"" + std::to_string(i) + "\"", s.shards[i].estimated_fp);
  }
  w.Header("scangate_filter_keys", "gauge", "Keys inserted into the active generation, by shard.");
  for (std::size_t i = 0; i < s.shards.size(); ++i) {
    w.Sample("scangate_filter_keys", "shard=\"" + std::to_string(i) + "\"", s.shards[i].inserted);
  }
  w.Header("scangate_filter_snapshot_age_seconds", "gauge",
           "Age of the cached filter sample behind the scangate_filter_* gauges (refreshed every second).");
  w.Sample("scangate_filter_snapshot_age_seconds", "", s.filter_snapshot_age_seconds);
  w.Header("scangate_filter_memory_bytes", "gauge", "Memory of the filter bit arrays, all shards and generations.");
  w.Sample("scangate_filter_memory_bytes", "", static_cast<std::uint64_t>(s.filter_memory_bytes));
  w.Header("scangate_filter_warm", "gauge", "1 once the warm start from PostgreSQL has finished.");
  w.Sample("scangate_filter_warm", "", std::uint64_t{s.warm ? 1u : 0u});
  w.Header("scangate_pg_up", "gauge", "1 when every PostgreSQL writer is connected and healthy.");
  w.Sample("scangate_pg_up", "", std::uint64_t{s.store.up ? 1u : 0u});
  w.Header("scangate_pg_queue_depth", "gauge", "Items queued for the PostgreSQL writers.");
  w.Sample("scangate_pg_queue_depth", "", s.store.queue_depth);
  w.Header("scangate_pg_cancelled_total", "counter",
           "Queued items withdrawn unwritten because their request deadline passed (--request-timeout).");
  w.Sample("scangate_pg_cancelled_total", "", s.store.cancelled);
  w.Header("scangate_copy_batches_total", "counter",
           "Write-behind-only batches (Bloom negatives) committed by binary COPY (storage/README.md).");
  w.Sample("scangate_copy_batches_total", "", s.store.copy_batches);
  w.Header("scangate_closed_epoch_lookup_batches_total", "counter",
           "Committed batches that looked digests up in closed epochs of the exact store (a summary said maybe, or "
           "an epoch has none yet).");
  w.Sample("scangate_closed_epoch_lookup_batches_total", "", s.store.closed_lookup_batches);
  w.Header("scangate_copy_fallbacks_total", "counter",
           "Binary COPY batches aborted by a row already present (stale filter, another instance, a journal "
           "replay) and re-run through INSERT ... ON CONFLICT.");
  w.Sample("scangate_copy_fallbacks_total", "", s.store.copy_fallbacks);
  WriteTableMetrics(w, s);
  WritePartitionMetrics(w, s);
  WriteAccessMetrics(w, s);
  WriteFollowerMetrics(w, s);
  WritePeerMetrics(w, s);
  WriteSchemeMetrics(w, s);
  w.Header("scangate_pg_batch_size", "histogram", "Keys per PostgreSQL transaction.");
  w.Histogram("scangate_pg_batch_size", "", s.store.batch_size_buckets, s.store.batch_size_sum,
              s.store.batch_size_count);
  w.Header("scangate_pg_commit_seconds", "histogram", "Duration of a PostgreSQL write transaction.");
  w.Histogram("scangate_pg_commit_seconds", "", s.store.commit_seconds_buckets, s.store.commit_seconds_sum,
              s.store.commit_seconds_count);
  // Lost or uncertain acknowledgements (storage/README.md "Outages", "In-doubt COMMIT", "Dead letter").
  w.Header("scangate_write_behind_lost_total", "counter",
           "Write-behind rows (ack=filter) answered new but given up at shutdown while PostgreSQL was down.");
  w.Sample("scangate_write_behind_lost_total", "", s.store.write_behind_lost);
  w.Header("scangate_write_behind_dead_lettered_total", "counter",
           "Write-behind rows (ack=filter) answered new that PostgreSQL rejected repeatedly; dropped and logged.");
  w.Sample("scangate_write_behind_dead_lettered_total", "", s.store.dead_lettered);
  w.Header("scangate_batch_failures_total", "counter",
           "PostgreSQL batch transactions that failed and took their writer down.");
  w.Sample("scangate_batch_failures_total", "", s.store.batch_failures);
  w.Header("scangate_commit_in_doubt_total", "counter",
           "COMMITs whose answer was lost, by how txid_status() settled them.");
  w.Sample("scangate_commit_in_doubt_total", "resolution=\"committed\"", s.store.in_doubt_committed);
  w.Sample("scangate_commit_in_doubt_total", "resolution=\"aborted\"", s.store.in_doubt_aborted);
  w.Sample("scangate_commit_in_doubt_total", "resolution=\"unknown\"", s.store.in_doubt_unknown);
  if (s.journal) {
    const storage::JournalDrainStats& j = *s.journal;
    w.Header("scangate_journal_group_size", "histogram", "Records per journal group commit (one fdatasync each).");
    w.Histogram("scangate_journal_group_size", "", j.journal.group_size_buckets, j.journal.group_size_sum,
                j.journal.group_size_count);
    w.Header("scangate_journal_fsync_seconds", "histogram", "Duration of a journal group write + fdatasync.");
    w.Histogram("scangate_journal_fsync_seconds", "", j.journal.fsync_seconds_buckets, j.journal.fsync_seconds_sum,
                j.journal.fsync_seconds_count);
    w.Header("scangate_journal_records_total", "counter", "Records made durable in the journal.");
    w.Sample("scangate_journal_records_total", "", j.journal.appended);
    w.Header("scangate_journal_rejected_total", "counter",
             "Records never made durable (journal full past its bounded wait, I/O error): answered 503.");
    w.Sample("scangate_journal_rejected_total", "", j.journal.rejected);
    w.Header("scangate_journal_bytes", "gauge", "Journal bytes past the checkpoint (bounded by --journal-max-bytes).");
    w.Sample("scangate_journal_bytes", "", j.journal.disk_bytes);
    w.Header("scangate_journal_max_bytes", "gauge",
             "--journal-max-bytes: scangate_journal_bytes' bound; past it records wait, then 503.");
    w.Sample("scangate_journal_max_bytes", "", j.journal.max_bytes);
    w.Header("scangate_journal_backlog", "gauge", "Journalled keys not yet committed in PostgreSQL.");
    w.Sample("scangate_journal_backlog", "", j.pending);
    w.Header("scangate_journal_waiting", "gauge", "Records waiting for journal space.");
    w.Sample("scangate_journal_waiting", "", j.journal.parked);
    w.Header("scangate_journal_replay_left", "gauge", "Recovered records not yet committed in PostgreSQL.");
    w.Sample("scangate_journal_replay_left", "", j.replay_left);
    w.Header("scangate_journal_usable", "gauge",
             "1 while the journal takes records; 0 after a fault (I/O error, folder removed) until its probe heals "
             "it: new keys are then decided exactly in PostgreSQL.");
    w.Sample("scangate_journal_usable", "", std::uint64_t{j.journal.usable ? 1u : 0u});
    w.Header("scangate_journal_faults_total", "counter",
             "Times the journal became unusable (write/sync error, folder removed or replaced).");
    w.Sample("scangate_journal_faults_total", "", j.journal.faults);
    w.Header("scangate_journal_heals_total", "counter", "Times a probe made the unusable journal usable again.");
    w.Sample("scangate_journal_heals_total", "", j.journal.heals);
  }
  return w.Take();
}

std::string RenderStatsJson(const MetricsSnapshot& s) {
  namespace json = boost::json;
  json::object o;
  json::object http;
  for (std::size_t r = 0; r < kRouteCount; ++r) {
    json::object codes;
    for (std::size_t c = 0; c < kStatusSlots; ++c) {
      if (s.requests[r][c] != 0) codes[StatusLabel(c)] = s.requests[r][c];
    }
    if (!codes.empty()) http[RouteLabel(static_cast<Route>(r))] = std::move(codes);
  }
  o["http_requests"] = std::move(http);
  // Request latency per route: cumulative bucket counts (aligned with "le", +Inf last) and p50/p99
  // estimates (linear inside a bucket: accurate to one bucket width).
  json::object latency;
  json::array le;
  for (const double b : kLatencyBuckets) le.push_back(b);
  latency["le"] = std::move(le);
  for (std::size_t r = 0; r < kRouteCount; ++r) {
    std::uint64_t count = 0;
    json::array cumulative;
    for (const std::uint64_t c : s.latency[r]) cumulative.push_back(count += c);
    if (count == 0) continue;
    latency[RouteLabel(static_cast<Route>(r))] =
        json::object{{"count", count},
                     {"sum_seconds", s.latency_sum_seconds[r]},
                     {"p50_seconds", LatencyQuantile(s.latency[r], 0.50)},
                     {"p99_seconds", LatencyQuantile(s.latency[r], 0.99)},
                     {"buckets", std::move(cumulative)}};
  }
  o["latency"] = std::move(latency);
  o["uptime_seconds"] = s.uptime_seconds;
  o["verdicts"] = json::object{{"new_via_filter", s.new_via_filter},
                               {"new_via_exact", s.new_via_exact},
                               {"duplicate_via_exact", s.duplicate_via_exact}};
  o["recent"] = json::object{{"hits", s.recent_hits},
                             {"replays", s.recent_replays},
                             {"keys", s.recent_keys},
                             {"capacity", s.recent_capacity}};
  o["idempotent_replays"] = s.idempotent_replays;
  o["pack_mismatches"] = json::object{{"lot", s.mismatch_lot}, {"expiry", s.mismatch_expiry}};
  json::array shards;
  std::uint64_t keys = 0, capacity_rotations = 0, window_rotations = 0;
  for (const ShardStats& st : s.shards) {
    keys += st.inserted;
    capacity_rotations += st.capacity_rotations;
    window_rotations += st.window_rotations;
    shards.push_back(json::object{{"keys", st.inserted},
                                  {"fill_ratio", st.fill_ratio},
                                  {"estimated_fp", st.estimated_fp},
                                  {"age_seconds", st.age_seconds},
                                  {"rotations", st.rotations},
                                  {"capacity_rotations", st.capacity_rotations},
                                  {"window_rotations", st.window_rotations}});
  }
  o["filter"] = json::object{{"warm", s.warm},
                             {"memory_bytes", s.filter_memory_bytes},
                             {"keys", keys},
                             {"false_positives", s.false_positives},
                             {"stale", s.stale},
                             // keys, fill, FP and ages come from a sample refreshed every
                             // snapshot_period_seconds; snapshot_age_seconds says how old it is now.
                             {"snapshot_age_seconds", s.filter_snapshot_age_seconds},
                             {"snapshot_period_seconds", FilterTelemetry::kRefreshPeriod.count()},
                             {"window_seconds", s.filter_window_seconds},
                             {"capacity_per_shard", s.filter_capacity_per_shard},
                             {"fp_target", s.filter_fp_target},
                             {"untrusted_negatives", s.untrusted_negatives},
                             {"rotations", json::object{{"capacity", capacity_rotations}, {"window", window_rotations}}},
                             {"shards", std::move(shards)}};
  const storage::StoreStats& st = s.store;
  o["pg"] = json::object{{"up", st.up},
                         {"queue_depth", st.queue_depth},
                         {"queue_waits", s.queue_waits},
                         {"queue_wait_timeouts", s.queue_wait_timeouts},
                         {"batches", st.batches},
                         {"keys_written", st.keys_written},
                         {"inserted", st.inserted},
                         {"duplicates", st.duplicates},
                         {"unavailable", st.unavailable},
                         {"write_behind_conflicts", st.write_behind_conflicts},
                         {"cancelled", st.cancelled},
                         {"copy_batches", st.copy_batches},
                         {"copy_fallbacks", st.copy_fallbacks},
                         {"closed_lookup_batches", st.closed_lookup_batches},
                         {"batch_size_mean", st.batch_size_count ? st.batch_size_sum / st.batch_size_count : 0.0},
                         {"commit_seconds_mean",
                          st.commit_seconds_count ? st.commit_seconds_sum / st.commit_seconds_count : 0.0},
                         // Lost or uncertain acknowledgements.
                         {"write_behind_lost", st.write_behind_lost},
                         {"write_behind_dead_lettered", st.dead_lettered},
                         {"batch_failures", st.batch_failures},
                         {"commit_in_doubt", json::object{{"committed", st.in_doubt_committed},
                                                          {"aborted", st.in_doubt_aborted},
                                                          {"unknown", st.in_doubt_unknown}}}};
  AddTableStats(o, s);
  AddPartitionStats(o, s);
  AddAccessStats(o, s);
  AddFollowerStats(o, s);
  AddPeerStats(o, s);
  AddSchemeStats(o, s);
  if (s.journal) {
    const storage::JournalDrainStats& j = *s.journal;
    o["journal"] = json::object{
        {"records", j.journal.appended},
        {"groups", j.journal.groups},
        {"group_size_mean", j.journal.group_size_count ? j.journal.group_size_sum / j.journal.group_size_count : 0.0},
        {"fsync_seconds_mean",
         j.journal.fsync_seconds_count ? j.journal.fsync_seconds_sum / j.journal.fsync_seconds_count : 0.0},
        {"bytes", j.journal.disk_bytes},
        {"backlog", j.pending},
        {"waiting", j.journal.parked},
        {"rejected", j.journal.rejected},
        {"recovered", j.recovered},
        {"recovered_expired", j.recovered_expired},  // recovered past the horizon: skipped, not replayed
        {"replay_left", j.replay_left},
        {"usable", j.journal.usable},
        {"cause", j.journal.cause},
        {"faults", j.journal.faults},
        {"heals", j.journal.heals}};
  }
  return json::serialize(o);
}

}  // namespace scangate::server
