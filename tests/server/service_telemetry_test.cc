// Black-box test of the filter telemetry behind /stats and /metrics: a handful of new observations (far
// below the per-thread insert-count batch) show up in the key counts within the 1 s refresh period,
// and /stats says how old the filter sample is.
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "harness.h"

namespace scangate::it {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kSettleTimeout = std::chrono::seconds(10);  // several refresh periods: failure detection only
constexpr auto kPoll = std::chrono::milliseconds(50);

std::uint64_t StatsKeys(HttpClient& c) {
  const HttpResponse r = c.Get("/stats");
  EXPECT_EQ(r.status, 200) << r;
  return r.json().at("filter").at("keys").to_number<std::uint64_t>();
}

// Sum of scangate_filter_keys{shard="..."} over all shards of a /metrics text.
std::uint64_t MetricsKeys(HttpClient& c) {
  const HttpResponse r = c.Get("/metrics");
  EXPECT_EQ(r.status, 200) << r;
  std::istringstream in(r.body);
  std::string line;
  std::uint64_t sum = 0;
  while (std::getline(in, line)) {
    if (line.rfind("scangate_filter_keys{", 0) == 0) sum += std::stoull(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

// Filter keys from a sample taken after this call (the cached sample may predate the warm start's end):
// polls /stats until the sample time (uptime - snapshot age) passes the uptime of the first answer.
std::uint64_t FreshStatsKeys(HttpClient& c) {
  const double asked = c.Get("/stats").json().at("uptime_seconds").to_number<double>();
  for (const auto deadline = Clock::now() + kSettleTimeout; Clock::now() < deadline;) {
    const auto s = c.Get("/stats").json();
    const auto& f = s.at("filter").as_object();
    if (s.at("uptime_seconds").to_number<double>() - f.at("snapshot_age_seconds").to_number<double>() > asked) {
      return f.at("keys").to_number<std::uint64_t>();
    }
    std::this_thread::sleep_for(kPoll);
  }
  ADD_FAILURE() << "the filter sample was not refreshed within " << kSettleTimeout.count() << " s";
  return 0;
}

// Polls until both /stats and /metrics report `want` keys, or the timeout passes.
::testing::AssertionResult KeysReach(HttpClient& c, std::uint64_t want) {
  std::uint64_t stats = 0, metrics = 0;
  for (const auto deadline = Clock::now() + kSettleTimeout; Clock::now() < deadline;) {
    stats = StatsKeys(c);
    metrics = MetricsKeys(c);
    if (stats == want && metrics == want) return ::testing::AssertionSuccess();
    std::this_thread::sleep_for(kPoll);
  }
  return ::testing::AssertionFailure() << "want " << want << " keys; /stats says " << stats << ", /metrics says "
                                       << metrics;
}

TEST(ServiceTelemetry, ThreeObservationsReadAsThree) {
  ScangateProcess server({"--threads=2"});
  ASSERT_TRUE(server.Start());
  HttpClient c(server.port());
  // The warm start may have loaded keys of earlier tests from the shared database: count from here.
  const std::uint64_t before = FreshStatsKeys(c);
  ASSERT_TRUE(KeysReach(c, before));
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(c.Post("/observe", ObserveBody(UniqueKey("telemetry"))).status, 201);
  }
  EXPECT_TRUE(KeysReach(c, before + 3));
  const HttpResponse r = c.Get("/stats");
  const auto filter = r.json().at("filter").as_object();
  EXPECT_EQ(filter.at("snapshot_period_seconds").to_number<double>(), 1.0);
  EXPECT_GE(filter.at("snapshot_age_seconds").to_number<double>(), 0.0);
  EXPECT_LT(filter.at("snapshot_age_seconds").to_number<double>(), 5.0);  // the timer is running
}

}  // namespace
}  // namespace scangate::it
