// Service metrics: per-I/O-thread counter blocks (no shared cache line is written on the request path),
// aggregated into a MetricsSnapshot on scrape, rendered as Prometheus text 0.0.4 (/metrics) or JSON (/stats).
// Invariant: label values are fixed sets (routes, status classes, verdicts, shard numbers) — never a key.
// Counting: ThreadCounters methods only from the block's owning io_context thread; Snapshot from any thread.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/filter.h"
#include "server/http/rate_limit.h"
#include "server/http/request.h"
#include "server/metrics/partition_metrics.h"
#include "storage/horizon/brin_summarizer.h"
#include "storage/epochs/switcher.h"
#include "storage/horizon/expiry.h"
#include "storage/follow/follower_stats.h"
#include "storage/peers/peer_view.h"
#include "storage/peers/watermark_publisher.h"
#include "storage/journal/journal_drain.h"
#include "storage/store.h"

namespace scangate::server {

// Status codes with their own label value; anything else is counted under "other".
inline constexpr std::array<unsigned, 15> kCountedStatuses = {200, 201, 400, 404, 405, 413, 415, 431, 500, 503, 401,
                                                          403, 204, 429, 421};  // 403 origin/source/route not
                                                                                // allowed, 204 CORS preflight,
                                                                                // 429 rate-limited, 421 host not
                                                                                // allowed (--allowed-hosts)
inline constexpr std::size_t kStatusSlots = kCountedStatuses.size() + 1;  // + other
// Request latency buckets (seconds, upper bounds; +Inf implied). Spans 50 us (in-memory filter answer)
// to 2.5 s (PostgreSQL stall), roughly x2-x2.5 per step.
inline constexpr std::array<double, 14> kLatencyBuckets = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                                           0.01,    0.025,  0.05,    0.1,    0.25,   0.5,   2.5};
inline constexpr std::size_t kLatencySlots = kLatencyBuckets.size() + 1;  // + Inf

// A counter with exactly one writer thread. Inc is a relaxed load + relaxed store (no locked RMW): the
// owning thread is the only writer, so no increment is lost; relaxed is enough because readers (scrapes)
// only need an eventually-current value and nothing else is published through it.
class SingleWriterCounter {
 public:
  void Inc(std::uint64_t n = 1) { v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
  std::uint64_t Get() const { return v_.load(std::memory_order_relaxed); }  // relaxed: a scrape, see above

 private:
  std::atomic<std::uint64_t> v_{0};
};

// One I/O thread's counters, on their own cache lines (alignas(64)) so that threads never share a written line.
struct alignas(64) ThreadCounters {
  void CountRequest(Route route, unsigned status, std::chrono::nanoseconds latency);
  void CountVerdict(bool is_new, bool via_filter);

  std::array<std::array<SingleWriterCounter, kStatusSlots>, kRouteCount> requests;
  std::array<std::array<SingleWriterCounter, kLatencySlots>, kRouteCount> latency;  // per bucket, not cumulative
  std::array<SingleWriterCounter, kRouteCount> latency_sum_ns;
  SingleWriterCounter new_via_filter, new_via_exact, duplicate_via_exact;
  SingleWriterCounter false_positives;  // filter said "possibly seen", PostgreSQL inserted
  SingleWriterCounter stale;            // filter said "definitely new", PostgreSQL had it (ack=commit)
  SingleWriterCounter untrusted_negatives;  // filter said "definitely new" but its shard forgot within the window
  SingleWriterCounter recent_hits;          // answered "duplicate" from the recent set (no PostgreSQL round trip)
  SingleWriterCounter recent_replays;       // Idempotency-Key: a retry's replayed "new" from the recent set
  SingleWriterCounter idempotent_replays;   // Idempotency-Key: a retry answered its first request's "new" again
  SingleWriterCounter follower_fallbacks;   // --follow: a "definitely new" decided in PostgreSQL, the follower stale
  SingleWriterCounter commit_lag_fallbacks;  // --max-commit-lag: a "definitely new" decided in PostgreSQL, the
                                             // journal's oldest uncommitted record too old
  // Issue 42 (the peers' watermark): keys that could not be decided new because a peer did not cover their request;
  // of those, answered duplicate by a read, parked to wait for coverage, answered 503 when the wait ended; and
  // definitely-new keys decided in PostgreSQL because this instance's own watermark row was not registered yet.
  SingleWriterCounter peer_uncovered, peer_read_duplicates, peer_waits, peer_wait_timeouts, unpublished_fallbacks;
  // Issue 55: keys answered duplicate because PostgreSQL holds them under the previous digest secret (a rotation).
  SingleWriterCounter previous_digest_duplicates;
  SingleWriterCounter mismatch_lot, mismatch_expiry;  // --keys=gs1: duplicates whose lot / expiry contradict the record
  SingleWriterCounter queue_waits;          // keys that found the write queue full and waited for room
  SingleWriterCounter queue_wait_timeouts;  // of those, answered 503 because --queue-wait passed
  // Connections closed unanswered: at accept, past --max-connections-per-address (the admin listener's:
  // --admin-max-connections-per-address), or past the listener's cap
  // (kMaxConnections, kMaxAdminConnections); after the TLS handshake failed for the client certificate (mTLS).
  SingleWriterCounter refused_per_address, refused_full, client_certificates_refused;
};

// Aggregated values of one scrape.
struct MetricsSnapshot {
  std::array<std::array<std::uint64_t, kStatusSlots>, kRouteCount> requests{};
  std::array<std::array<std::uint64_t, kLatencySlots>, kRouteCount> latency{};  // per bucket, not cumulative
  std::array<double, kRouteCount> latency_sum_seconds{};
  std::uint64_t new_via_filter = 0, new_via_exact = 0, duplicate_via_exact = 0;
  std::uint64_t false_positives = 0, stale = 0, untrusted_negatives = 0;
  // The recent set (core/recent_set.h): hits (also counted in duplicate_via_exact), entries held now, bound.
  std::uint64_t recent_hits = 0, recent_keys = 0, recent_capacity = 0;
  std::uint64_t idempotent_replays = 0;  // also counted in new_via_exact
  std::uint64_t recent_replays = 0;      // of those, answered from the recent set (no PostgreSQL round trip)
  // --follow (issue 32): one sample per followed database ("" for one database, "p<i>" per partition), and the
  // definitely-new keys decided in PostgreSQL because their database's follower was stale.
  std::vector<std::pair<std::string, storage::FollowerStats>> followers;
  std::uint64_t follower_fallbacks = 0;
  std::uint64_t commit_lag_fallbacks = 0;  // --max-commit-lag (issue 32)
  // Issue 42: the peers' watermark — ThreadCounters' figures, the view of each database's (partition's) peers and,
  // for a journal owner, its own publisher per database ("" for one database, "p<i>" per partition).
  std::uint64_t peer_uncovered = 0, peer_read_duplicates = 0, peer_waits = 0, peer_wait_timeouts = 0;
  std::uint64_t unpublished_fallbacks = 0;
  std::vector<std::pair<std::string, storage::PeerViewStats>> peer_views;
  std::vector<std::pair<std::string, storage::WatermarkPublisherStats>> publishers;
  double peer_window_seconds = 0;
  // Issue 55: per database (partition: "" or "p<i>"), the steps of PostgreSQL's clock its clock reader saw
  // (storage/clock/pg_clock.h PgClock::steps()), on every instance.
  std::vector<std::pair<std::string, std::uint64_t>> pg_clock_steps;
  // ... and the forward steps and the steps back of that clock recorded in the database (sql/017), seconds (both
  // >= 0), as its reader last read them.
  std::vector<std::pair<std::string, double>> pg_clock_ahead_seconds, pg_clock_behind_seconds;
  std::uint64_t mismatch_lot = 0, mismatch_expiry = 0;
  // Issue 55 (server/metrics/scheme_metrics.h): this instance's digest scheme and each database's record of it.
  struct DigestSchemeSample {
    std::string partition;                      // "" for one database, "p<i>" per partition
    bool rotation = false;                      // the database records a previous secret
    std::int64_t rotation_started_us = 0;
    std::int64_t previous_needed_until_us = 0;  // PostgreSQL's clock; INT64_MAX: never (--retention=off)
    std::optional<std::int64_t> pg_now_us;      // the least PostgreSQL's clock reads at the scrape (none: unknown)
    bool watched = false;                       // --ack=filter: a SchemeWatch holds a lease on it
    bool confirmed = false;                     // the lease holds now
    bool fenced = false;                        // the database records another scheme now
  };
  std::vector<DigestSchemeSample> digest_schemes;
  std::string digest_fingerprint;  // first 12 hex digits of this instance's current fingerprint
  bool digest_previous_set = false;  // --digest-secret-previous-file
  std::uint64_t previous_digest_duplicates = 0;
  std::uint64_t queue_waits = 0, queue_wait_timeouts = 0;
  std::vector<ShardStats> shards;
  std::size_t filter_memory_bytes = 0;
  bool warm = false;
  storage::StoreStats store{};
  // Filter context for /stats and the dashboard. `shards` is a cached sample (server/metrics/filter_telemetry.h),
  // filter_snapshot_age_seconds old (<= its 1 s refresh period while the maintenance timer runs).
  double filter_snapshot_age_seconds = 0;
  double filter_window_seconds = 0;
  std::uint64_t filter_capacity_per_shard = 0;
  double filter_fp_target = 0;
  double uptime_seconds = 0;  // since the service started (a monotonic clock for rates)
  std::optional<storage::JournalDrainStats> journal;  // ack=filter with the journal on
  std::optional<storage::BrinSummarizerStats> brin;   // the first_seen BRIN summarizer, when one runs
  std::optional<storage::ExpiryStats> expiry;         // the horizon's expiry and the table's vital signs
  // The exact store's epoch switcher (--epoch-keys, --epoch-max-age), when one runs; with --partitions, counts summed
  // and the largest open epoch and closed-epoch count of any partition.
  std::optional<storage::EpochSwitcherStats> epochs;
  // --partitions: one sample per logical partition (server/metrics/partition_metrics.h); store, brin and expiry
  // above are then sums over the partitions (expiry: sums of counts and bytes, the worst lag and age).
  std::vector<PartitionSample> partitions;
  std::int64_t retention_seconds = 0;                 // the horizon (--retention); 0 = off
  // The rate limiter (--rate-limit > 0; server/http/rate_limit.h): 429s per terminal, buckets. Filled by the
  // Router, which owns the limiter (server/metrics/access_metrics.h renders it).
  std::optional<RateLimitStats> rate_limit;
  std::uint64_t rate_limit_per_second = 0, rate_limit_burst = 0;
  // Request bodies in flight (--max-body-bytes-in-flight; server/http/body_budget.h), filled by the Router:
  // bytes held now, the limit (0 = none) and bodies refused 503 for want of room.
  std::uint64_t body_bytes_in_flight = 0, body_bytes_limit = 0, body_budget_refused = 0;
  // Connections refused (ThreadCounters) and requests refused 429 after too many failed authentications from
  // their address (the Router's).
  std::uint64_t refused_per_address = 0, refused_full = 0, client_certificates_refused = 0;
  std::uint64_t auth_failures_limited = 0;
};

// Quantile q (0..1) of a latency histogram (per-bucket counts over kLatencyBuckets, + Inf last), by linear
// interpolation inside the bucket that holds it, as Prometheus' histogram_quantile does: accurate to one
// bucket width (x2-x2.5); the +Inf bucket reports the last finite bound. 0 when the histogram is empty.
double LatencyQuantile(const std::array<std::uint64_t, kLatencySlots>& per_bucket, double q);

// Owns one ThreadCounters per I/O thread.
class Metrics {
 public:
  explicit Metrics(unsigned threads);
  ThreadCounters& ForThread(unsigned index) { return *blocks_[index]; }
  // Sums the HTTP/verdict counters of every thread into `out` (filter/store fields are left alone).
  void Collect(MetricsSnapshot& out) const;

 private:
  std::vector<std::unique_ptr<ThreadCounters>> blocks_;
};

std::string RenderPrometheus(const MetricsSnapshot& s);
std::string RenderStatsJson(const MetricsSnapshot& s);

}  // namespace scangate::server
