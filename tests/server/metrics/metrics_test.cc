// Tests server/metrics/metrics.h: per-thread counters aggregate on collect, and the Prometheus text 0.0.4 and
// /stats JSON renderings carry the contract's metric names, labels and cumulative histograms.
#include "server/metrics/metrics.h"

#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include <boost/json/parse.hpp>

namespace scangate::server {
namespace {
using namespace std::chrono_literals;

// Sample lines of a Prometheus text exposition: "name{labels}" -> value text.
std::map<std::string, std::string> Samples(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto sp = line.rfind(' ');
    out[line.substr(0, sp)] = line.substr(sp + 1);
  }
  return out;
}

MetricsSnapshot SampleSnapshot() {
  Metrics m(2);
  m.ForThread(0).CountRequest(Route::kObserve, 201, 30us);
  m.ForThread(0).untrusted_negatives.Inc();
  m.ForThread(1).untrusted_negatives.Inc(3);
  m.ForThread(1).CountRequest(Route::kObserve, 201, 2ms);
  m.ForThread(1).CountRequest(Route::kObserve, 200, 10s);  // beyond the last bucket: +Inf only
  m.ForThread(0).CountRequest(Route::kNotFound, 404, 1us);
  m.ForThread(0).CountRequest(Route::kHealthz, 418, 1us);  // uncounted code -> "other"
  m.ForThread(0).CountVerdict(true, true);
  m.ForThread(1).CountVerdict(true, false);
  m.ForThread(1).CountVerdict(false, false);
  m.ForThread(1).false_positives.Inc();
  m.ForThread(0).stale.Inc(2);
  m.ForThread(0).recent_hits.Inc(2);
  m.ForThread(1).recent_hits.Inc(3);
  m.ForThread(1).recent_replays.Inc(7);
  MetricsSnapshot s;
  m.Collect(s);
  s.recent_keys = 13;
  s.recent_capacity = 1000;
  // Shard 1: 5 rotations (3 for capacity, 1 by age, 1 forced), distrusting its negatives.
  s.shards = {ShardStats{10, 0.25, 1.0, 0.001, 0, 0, 0, {}},
              ShardStats{20, 0.5, 2.0, 0.002, 5, 3, 1, std::chrono::steady_clock::time_point(1h)}};
  s.filter_memory_bytes = 4096;
  s.warm = true;
  s.store.up = true;
  s.store.queue_depth = 3;
  s.store.write_behind_conflicts = 4;
  s.store.cancelled = 2;
  s.store.batch_size_buckets = {{1, 2}, {2, 5}, {std::numeric_limits<double>::infinity(), 6}};
  s.store.batch_size_sum = 9;
  s.store.batch_size_count = 6;
  s.store.commit_seconds_buckets = {{0.0005, 1}, {1, 6}};  // no +Inf bucket given: the renderer adds it
  s.store.commit_seconds_sum = 0.5;
  s.store.commit_seconds_count = 6;
  s.store.write_behind_lost = 7;
  s.store.dead_lettered = 8;
  s.store.batch_failures = 9;
  s.store.in_doubt_committed = 10;
  s.store.in_doubt_aborted = 11;
  s.store.in_doubt_unknown = 12;
  s.store.copy_batches = 13;
  s.store.copy_fallbacks = 14;
  s.brin = storage::BrinSummarizerStats{.passes = 15, .ranges = 16, .failures = 17, .stopped = true};
  return s;
}

// Counters from several threads add up; the request counter is labelled by route and code.
TEST(Metrics, CollectSumsThreads) {
  const MetricsSnapshot s = SampleSnapshot();
  const auto observe = static_cast<std::size_t>(Route::kObserve);
  EXPECT_EQ(s.requests[observe][1], 2u);  // 201 is slot 1 of kCountedStatuses
  EXPECT_EQ(s.requests[observe][0], 1u);  // 200
  EXPECT_EQ(s.new_via_filter, 1u);
  EXPECT_EQ(s.new_via_exact, 1u);
  EXPECT_EQ(s.duplicate_via_exact, 1u);
  EXPECT_EQ(s.false_positives, 1u);
  EXPECT_EQ(s.stale, 2u);
  EXPECT_NEAR(s.latency_sum_seconds[observe], 10.00203, 1e-9);
}

// Each counter block is written by one thread while another thread collects: no increment is lost.
TEST(Metrics, SingleWriterCountersUnderConcurrentScrape) {
  Metrics m(2);
  constexpr int kIncrements = 200'000;
  std::thread writer0([&] {
    for (int i = 0; i < kIncrements; ++i) m.ForThread(0).CountVerdict(true, true);
  });
  std::thread writer1([&] {
    for (int i = 0; i < kIncrements; ++i) m.ForThread(1).CountVerdict(true, true);
  });
  std::uint64_t last = 0;
  for (int i = 0; i < 100; ++i) {
    MetricsSnapshot s;
    m.Collect(s);
    EXPECT_GE(s.new_via_filter, last);  // monotonic as seen by a scraper
    last = s.new_via_filter;
  }
  writer0.join();
  writer1.join();
  MetricsSnapshot s;
  m.Collect(s);
  EXPECT_EQ(s.new_via_filter, 2u * kIncrements);
  EXPECT_EQ(alignof(ThreadCounters), 64u);
}

// The text exposition has HELP/TYPE for every family and the contract's series with exact values.
TEST(Metrics, PrometheusText) {
  const std::string text = RenderPrometheus(SampleSnapshot());
  for (const char* family :
       {"scangate_http_requests_total counter", "scangate_http_request_duration_seconds histogram",
        "scangate_verdicts_total counter", "scangate_filter_false_positives_total counter",
        "scangate_filter_stale_total counter", "scangate_write_behind_conflicts_total counter",
        "scangate_filter_rotations_total counter", "scangate_filter_untrusted_negatives_total counter",
        "scangate_filter_distrusting_shards gauge",
        "scangate_filter_fill_ratio gauge", "scangate_filter_estimated_fp gauge", "scangate_filter_keys gauge",
        "scangate_filter_memory_bytes gauge", "scangate_pg_up gauge", "scangate_pg_queue_depth gauge",
        "scangate_pg_cancelled_total counter", "scangate_copy_batches_total counter",
        "scangate_copy_fallbacks_total counter", "scangate_pg_batch_size histogram",
        "scangate_pg_commit_seconds histogram", "scangate_write_behind_lost_total counter",
        "scangate_write_behind_dead_lettered_total counter", "scangate_batch_failures_total counter",
        "scangate_commit_in_doubt_total counter", "scangate_recent_hits_total counter",
        "scangate_recent_replays_total counter", "scangate_recent_keys gauge", "scangate_recent_capacity gauge",
        "scangate_brin_summarized_ranges_total counter", "scangate_brin_summarize_failures_total counter",
        "scangate_brin_summarize_stopped gauge"}) {
    EXPECT_NE(text.find(std::string("# TYPE ") + family + "\n"), std::string::npos) << family;
  }
  const auto s = Samples(text);
  auto at = [&](const std::string& k) {
    auto it = s.find(k);
    EXPECT_NE(it, s.end()) << "missing " << k;
    return it == s.end() ? std::string("<missing>") : it->second;
  };
  EXPECT_EQ(at(R"(scangate_http_requests_total{route="/observe",code="201"})"), "2");
  EXPECT_EQ(at(R"(scangate_http_requests_total{route="/observe",code="200"})"), "1");
  EXPECT_EQ(at(R"(scangate_http_requests_total{route="other",code="404"})"), "1");
  EXPECT_EQ(at(R"(scangate_http_requests_total{route="/healthz",code="other"})"), "1");
  // Cumulative buckets: 30 us <= 5e-05; 2 ms <= 0.0025; 10 s only in +Inf.
  EXPECT_EQ(at(R"(scangate_http_request_duration_seconds_bucket{route="/observe",le="5e-05"})"), "1");
  EXPECT_EQ(at(R"(scangate_http_request_duration_seconds_bucket{route="/observe",le="0.001"})"), "1");
  EXPECT_EQ(at(R"(scangate_http_request_duration_seconds_bucket{route="/observe",le="0.0025"})"), "2");
  EXPECT_EQ(at(R"(scangate_http_request_duration_seconds_bucket{route="/observe",le="2.5"})"), "2");
  EXPECT_EQ(at(R"(scangate_http_request_duration_seconds_bucket{route="/observe",le="+Inf"})"), "3");
  EXPECT_EQ(at(R"(scangate_http_request_duration_seconds_count{route="/observe"})"), "3");
  EXPECT_EQ(at(R"(scangate_verdicts_total{verdict="new",via="filter"})"), "1");
  EXPECT_EQ(at(R"(scangate_verdicts_total{verdict="new",via="exact"})"), "1");
  EXPECT_EQ(at(R"(scangate_verdicts_total{verdict="duplicate",via="exact"})"), "1");
  EXPECT_EQ(at("scangate_filter_false_positives_total"), "1");
  EXPECT_EQ(at("scangate_filter_stale_total"), "2");
  EXPECT_EQ(at("scangate_write_behind_conflicts_total"), "4");
  EXPECT_EQ(at(R"(scangate_filter_rotations_total{cause="capacity"})"), "3");
  EXPECT_EQ(at(R"(scangate_filter_rotations_total{cause="window"})"), "1");
  EXPECT_EQ(at("scangate_filter_untrusted_negatives_total"), "4");
  EXPECT_EQ(at("scangate_filter_distrusting_shards"), "1");
  EXPECT_EQ(at("scangate_recent_hits_total"), "5");
  EXPECT_EQ(at("scangate_recent_replays_total"), "7");
  EXPECT_EQ(at("scangate_recent_keys"), "13");
  EXPECT_EQ(at("scangate_recent_capacity"), "1000");
  EXPECT_EQ(at(R"(scangate_filter_fill_ratio{shard="1"})"), "0.5");
  EXPECT_EQ(at(R"(scangate_filter_estimated_fp{shard="0"})"), "0.001");
  EXPECT_EQ(at(R"(scangate_filter_keys{shard="1"})"), "20");
  EXPECT_EQ(at("scangate_filter_memory_bytes"), "4096");
  EXPECT_EQ(at("scangate_pg_up"), "1");
  EXPECT_EQ(at("scangate_pg_queue_depth"), "3");
  EXPECT_EQ(at("scangate_pg_cancelled_total"), "2");
  EXPECT_EQ(at(R"(scangate_pg_batch_size_bucket{le="2"})"), "5");
  EXPECT_EQ(at(R"(scangate_pg_batch_size_bucket{le="+Inf"})"), "6");
  EXPECT_EQ(at("scangate_pg_batch_size_sum"), "9");
  EXPECT_EQ(at(R"(scangate_pg_commit_seconds_bucket{le="+Inf"})"), "6");
  EXPECT_EQ(at("scangate_pg_commit_seconds_count"), "6");
  EXPECT_EQ(at("scangate_write_behind_lost_total"), "7");
  EXPECT_EQ(at("scangate_write_behind_dead_lettered_total"), "8");
  EXPECT_EQ(at("scangate_batch_failures_total"), "9");
  EXPECT_EQ(at("scangate_copy_batches_total"), "13");
  EXPECT_EQ(at("scangate_copy_fallbacks_total"), "14");
  EXPECT_EQ(at("scangate_brin_summarized_ranges_total"), "16");
  EXPECT_EQ(at("scangate_brin_summarize_failures_total"), "17");
  EXPECT_EQ(at("scangate_brin_summarize_stopped"), "1");
  EXPECT_EQ(at(R"(scangate_commit_in_doubt_total{resolution="committed"})"), "10");
  EXPECT_EQ(at(R"(scangate_commit_in_doubt_total{resolution="aborted"})"), "11");
  EXPECT_EQ(at(R"(scangate_commit_in_doubt_total{resolution="unknown"})"), "12");
  // Every sample line is "name[{labels}] value" with a parseable value; the text ends with a newline.
  EXPECT_EQ(text.back(), '\n');
  for (const auto& [series, value] : s) {
    EXPECT_NE(value, "") << series;
    EXPECT_EQ(series.find(' '), std::string::npos) << series;
  }
}

// /stats JSON carries the same numbers.
TEST(Metrics, StatsJson) {
  const boost::json::value v = boost::json::parse(RenderStatsJson(SampleSnapshot()));
  EXPECT_EQ(v.at("http_requests").at("/observe").at("201").to_number<std::uint64_t>(), 2u);
  EXPECT_EQ(v.at("verdicts").at("new_via_filter").to_number<std::uint64_t>(), 1u);
  EXPECT_EQ(v.at("filter").at("keys").to_number<std::uint64_t>(), 30u);
  EXPECT_EQ(v.at("filter").at("shards").as_array().size(), 2u);
  EXPECT_EQ(v.at("filter").at("false_positives").to_number<std::uint64_t>(), 1u);
  EXPECT_EQ(v.at("filter").at("untrusted_negatives").to_number<std::uint64_t>(), 4u);
  EXPECT_EQ(v.at("recent").at("hits").to_number<std::uint64_t>(), 5u);
  EXPECT_EQ(v.at("recent").at("replays").to_number<std::uint64_t>(), 7u);
  EXPECT_EQ(v.at("recent").at("keys").to_number<std::uint64_t>(), 13u);
  EXPECT_EQ(v.at("recent").at("capacity").to_number<std::uint64_t>(), 1000u);
  EXPECT_EQ(v.at("filter").at("rotations").at("capacity").to_number<std::uint64_t>(), 3u);
  EXPECT_EQ(v.at("filter").at("rotations").at("window").to_number<std::uint64_t>(), 1u);
  EXPECT_EQ(v.at("filter").at("shards").at(1).at("capacity_rotations").to_number<std::uint64_t>(), 3u);
  EXPECT_TRUE(v.at("filter").at("warm").as_bool());
  EXPECT_TRUE(v.at("pg").at("up").as_bool());
  EXPECT_EQ(v.at("pg").at("write_behind_conflicts").to_number<std::uint64_t>(), 4u);
  EXPECT_DOUBLE_EQ(v.at("pg").at("batch_size_mean").as_double(), 1.5);
  EXPECT_EQ(v.at("pg").at("write_behind_lost").to_number<std::uint64_t>(), 7u);
  EXPECT_EQ(v.at("pg").at("write_behind_dead_lettered").to_number<std::uint64_t>(), 8u);
  EXPECT_EQ(v.at("pg").at("batch_failures").to_number<std::uint64_t>(), 9u);
  EXPECT_EQ(v.at("pg").at("copy_batches").to_number<std::uint64_t>(), 13u);
  EXPECT_EQ(v.at("pg").at("copy_fallbacks").to_number<std::uint64_t>(), 14u);
  EXPECT_EQ(v.at("brin").at("passes").to_number<std::uint64_t>(), 15u);
  EXPECT_EQ(v.at("brin").at("ranges").to_number<std::uint64_t>(), 16u);
  EXPECT_EQ(v.at("brin").at("failures").to_number<std::uint64_t>(), 17u);
  EXPECT_TRUE(v.at("brin").at("stopped").as_bool());
  EXPECT_EQ(v.at("pg").at("commit_in_doubt").at("committed").to_number<std::uint64_t>(), 10u);
  EXPECT_EQ(v.at("pg").at("commit_in_doubt").at("aborted").to_number<std::uint64_t>(), 11u);
  EXPECT_EQ(v.at("pg").at("commit_in_doubt").at("unknown").to_number<std::uint64_t>(), 12u);
}

// p50/p99 estimates interpolate inside the bucket holding the rank; /stats carries them with the buckets,
// and the filter sample's age and context.
TEST(Metrics, LatencyQuantilesInStats) {
  std::array<std::uint64_t, kLatencySlots> h{};
  EXPECT_EQ(LatencyQuantile(h, 0.5), 0.0);  // empty
  h[4] = 100;                                // 100 requests in (0.0005, 0.001]
  EXPECT_NEAR(LatencyQuantile(h, 0.5), 0.00075, 1e-12);
  EXPECT_NEAR(LatencyQuantile(h, 0.99), 0.000995, 1e-12);
  h[kLatencySlots - 1] = 100;  // as many beyond the last bucket: p99 reports the last finite bound
  EXPECT_EQ(LatencyQuantile(h, 0.99), kLatencyBuckets.back());
  EXPECT_NEAR(LatencyQuantile(h, 0.25), 0.00075, 1e-12);

  MetricsSnapshot s = SampleSnapshot();
  s.filter_snapshot_age_seconds = 0.25;
  s.filter_window_seconds = 86400;
  s.filter_capacity_per_shard = 1000;
  s.filter_fp_target = 0.01;
  const boost::json::value v = boost::json::parse(RenderStatsJson(s));
  const auto& observe = v.at("latency").at("/observe");
  EXPECT_EQ(observe.at("count").to_number<std::uint64_t>(), 3u);
  // 30 us, 2 ms, 10 s: the median is in (0.001, 0.0025], p99 in +Inf.
  EXPECT_GT(observe.at("p50_seconds").to_number<double>(), 0.001);
  EXPECT_LE(observe.at("p50_seconds").to_number<double>(), 0.0025);
  EXPECT_EQ(observe.at("p99_seconds").to_number<double>(), kLatencyBuckets.back());
  EXPECT_EQ(observe.at("buckets").as_array().size(), kLatencySlots);
  EXPECT_EQ(observe.at("buckets").as_array().back().to_number<std::uint64_t>(), 3u);  // cumulative
  EXPECT_EQ(v.at("latency").at("le").as_array().size(), kLatencyBuckets.size());
  EXPECT_EQ(v.at("filter").at("snapshot_age_seconds").to_number<double>(), 0.25);
  EXPECT_EQ(v.at("filter").at("snapshot_period_seconds").to_number<double>(), 1.0);
  EXPECT_EQ(v.at("filter").at("capacity_per_shard").to_number<std::uint64_t>(), 1000u);
  EXPECT_EQ(v.at("filter").at("fp_target").to_number<double>(), 0.01);
  const std::string text = RenderPrometheus(s);
  EXPECT_NE(text.find("\nscangate_filter_snapshot_age_seconds 0.25\n"), std::string::npos);
}

// The previous digest secret can go once PostgreSQL's clock (the least it reads) is at its needed-until, as the
// start check judges it: not before, not while that clock is unknown (whatever this host's wall clock says), never
// with --retention=off; always without a rotation.
TEST(Metrics, DigestPreviousCanGoByPostgresClock) {
  constexpr std::int64_t kUntil = 1'700'000'000'000'000;  // µs (November 2023), a time of PostgreSQL's clock
  const auto can_go = [](std::optional<std::int64_t> pg_now_us, std::int64_t until, bool rotation = true) {
    MetricsSnapshot s = SampleSnapshot();
    MetricsSnapshot::DigestSchemeSample d;
    d.rotation = rotation;
    d.rotation_started_us = rotation ? until - 3'600'000'000 : 0;
    d.previous_needed_until_us = rotation ? until : 0;
    d.pg_now_us = pg_now_us;
    s.digest_schemes.push_back(d);
    const boost::json::value v = boost::json::parse(RenderStatsJson(s));
    const bool in_stats = v.at("digest_scheme").at("databases").at(0).at("previous_can_go").as_bool();
    const std::string gauge = Samples(RenderPrometheus(s)).at("scangate_digest_previous_can_go{partition=\"db\"}");
    EXPECT_EQ(gauge, in_stats ? "1" : "0");
    return in_stats;
  };
  EXPECT_FALSE(can_go(std::nullopt, kUntil));  // this host's wall clock is long past kUntil: not used
  EXPECT_FALSE(can_go(kUntil - 1, kUntil));
  EXPECT_TRUE(can_go(kUntil, kUntil));
  EXPECT_FALSE(can_go(kUntil, std::numeric_limits<std::int64_t>::max()));
  EXPECT_TRUE(can_go(std::nullopt, 0, /*rotation=*/false));
}

}  // namespace
}  // namespace scangate::server
