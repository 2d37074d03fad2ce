// Tests server/metrics/table_metrics.h through /metrics and /stats (RenderPrometheus, RenderStatsJson): the
// horizon's families (rows expired, the oldest row's age, the expiry lag and behind episodes, table and index
// bytes, dead tuples, the horizon itself) carry the snapshot's expiry figures, and none of the expiry's are
// written while no expiry runs (the snapshot's `expiry` empty).
#include "server/metrics/table_metrics.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <boost/json/parse.hpp>

#include "server/metrics/metrics.h"

namespace scangate::server {
namespace {

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

// "# TYPE name type" lines: name -> type. Every family once (a second TYPE line is a broken exposition).
std::map<std::string, std::string> Types(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# TYPE ", 0) != 0) continue;
    const auto sp = line.rfind(' ');
    const std::string name = line.substr(7, sp - 7);
    EXPECT_TRUE(out.emplace(name, line.substr(sp + 1)).second) << "two TYPE lines for " << name;
  }
  return out;
}

// Every figure distinct, so a figure written under another family's name is caught.
storage::ExpiryStats SampleExpiry() {
  storage::ExpiryStats e;
  e.passes = 31;
  e.failures = 32;
  e.rows_expired = 33;
  e.behind_events = 34;
  e.behind = true;
  e.oldest_age_seconds = 135.5;
  e.table_bytes = 36'864;
  e.index_bytes = 37'888;
  e.dead_tuples = 38;
  e.live_tuples = 39;
  e.lag_seconds = 40.25;
  e.rows_expired_keep_until = 41;
  e.earliest_keep_until_in_seconds = -42.5;
  return e;
}

const std::set<std::string> kExpiryFamilies = {
    "scangate_expiry_rows_total",      "scangate_expiry_passes_total",
    "scangate_expiry_failures_total",  "scangate_expiry_behind_total",
    "scangate_expiry_behind",          "scangate_expiry_lag_seconds",
    "scangate_scan_keys_oldest_row_age_seconds", "scangate_scan_keys_table_bytes",
    "scangate_scan_keys_index_bytes",  "scangate_scan_keys_dead_tuples",
    "scangate_scan_keys_live_tuples",  "scangate_expiry_pack_rows_total",
    "scangate_scan_keys_earliest_pack_horizon_seconds"};

TEST(TableMetrics, PrometheusWritesTheExpiryFamilies) {
  MetricsSnapshot s;
  s.retention_seconds = 7200;
  s.expiry = SampleExpiry();
  const std::string text = RenderPrometheus(s);
  const auto types = Types(text);
  for (const auto& family : kExpiryFamilies) {
    const auto it = types.find(family);
    ASSERT_NE(it, types.end()) << family << " missing:\n" << text;
    const bool counter = family.size() > 6 && family.compare(family.size() - 6, 6, "_total") == 0;
    EXPECT_EQ(it->second, counter ? "counter" : "gauge") << family;
    EXPECT_NE(text.find("# HELP " + family + " "), std::string::npos) << family;
  }
  EXPECT_EQ(types.at("scangate_retention_seconds"), "gauge");
  const auto v = Samples(text);
  auto at = [&](const std::string& k) {
    const auto it = v.find(k);
    EXPECT_NE(it, v.end()) << "missing " << k;
    return it == v.end() ? std::string("<missing>") : it->second;
  };
  EXPECT_EQ(at("scangate_retention_seconds"), "7200");
  EXPECT_EQ(at("scangate_expiry_rows_total"), "33");
  EXPECT_EQ(at("scangate_expiry_passes_total"), "31");
  EXPECT_EQ(at("scangate_expiry_failures_total"), "32");
  EXPECT_EQ(at("scangate_expiry_behind_total"), "34");
  EXPECT_EQ(at("scangate_expiry_behind"), "1");
  EXPECT_EQ(at("scangate_expiry_lag_seconds"), "40.25");
  EXPECT_EQ(at("scangate_scan_keys_oldest_row_age_seconds"), "135.5");
  EXPECT_EQ(at("scangate_scan_keys_table_bytes"), "36864");
  EXPECT_EQ(at("scangate_scan_keys_index_bytes"), "37888");
  EXPECT_EQ(at("scangate_scan_keys_dead_tuples"), "38");
  EXPECT_EQ(at("scangate_scan_keys_live_tuples"), "39");
  EXPECT_EQ(at("scangate_expiry_pack_rows_total"), "41");
  EXPECT_EQ(at("scangate_scan_keys_earliest_pack_horizon_seconds"), "-42.5");
  // Each family's samples follow its own TYPE line (the exposition groups a family's lines).
  for (const auto& family : kExpiryFamilies) {
    const auto type_at = text.find("# TYPE " + family + " ");
    const auto sample_at = text.find("\n" + family + " ");
    EXPECT_LT(type_at, sample_at) << family;
  }
}

// An empty table (no oldest row): no age sample (rather than a made-up 0), the rest written; not behind.
TEST(TableMetrics, PrometheusEmptyTableHasNoOldestRowAge) {
  MetricsSnapshot s;
  s.retention_seconds = 60;
  storage::ExpiryStats e = SampleExpiry();
  e.oldest_age_seconds.reset();
  e.behind = false;
  e.lag_seconds = 0;
  s.expiry = e;
  const std::string text = RenderPrometheus(s);
  EXPECT_EQ(text.find("scangate_scan_keys_oldest_row_age_seconds"), std::string::npos) << text;
  const auto v = Samples(text);
  EXPECT_EQ(v.at("scangate_expiry_behind"), "0");
  EXPECT_EQ(v.at("scangate_expiry_lag_seconds"), "0");
  EXPECT_EQ(v.at("scangate_scan_keys_table_bytes"), "36864");
  // Before the first successful pass (no vital signs yet: -1) the size families are left out.
  e.table_bytes = e.index_bytes = e.dead_tuples = e.live_tuples = -1;
  s.expiry = e;
  const std::string before_first_pass = RenderPrometheus(s);
  for (const char* family : {"scangate_scan_keys_table_bytes", "scangate_scan_keys_index_bytes",
                             "scangate_scan_keys_dead_tuples", "scangate_scan_keys_live_tuples"}) {
    EXPECT_EQ(before_first_pass.find(family), std::string::npos) << family;
  }
  EXPECT_EQ(Samples(before_first_pass).at("scangate_expiry_passes_total"), "31");
}

// No expiry (snapshot without one): none of its families; the horizon is still reported (0 = off).
TEST(TableMetrics, PrometheusWithoutExpiryWritesNoneOfItsFamilies) {
  for (const std::int64_t retention : {std::int64_t{0}, std::int64_t{86400}}) {
    MetricsSnapshot s;
    s.retention_seconds = retention;
    const std::string text = RenderPrometheus(s);
    for (const auto& family : kExpiryFamilies) EXPECT_EQ(text.find(family), std::string::npos) << family;
    EXPECT_EQ(Samples(text).at("scangate_retention_seconds"), std::to_string(retention));
  }
}

TEST(TableMetrics, StatsJsonCarriesTheExpiry) {
  MetricsSnapshot s;
  s.retention_seconds = 7200;
  s.expiry = SampleExpiry();
  boost::json::value v = boost::json::parse(RenderStatsJson(s));
  EXPECT_EQ(v.at("retention_seconds").to_number<std::int64_t>(), 7200);
  const auto& x = v.at("expiry");
  EXPECT_EQ(x.at("rows_expired").to_number<std::uint64_t>(), 33u);
  EXPECT_EQ(x.at("passes").to_number<std::uint64_t>(), 31u);
  EXPECT_EQ(x.at("failures").to_number<std::uint64_t>(), 32u);
  EXPECT_TRUE(x.at("behind").as_bool());
  EXPECT_EQ(x.at("behind_events").to_number<std::uint64_t>(), 34u);
  EXPECT_DOUBLE_EQ(x.at("lag_seconds").to_number<double>(), 40.25);
  EXPECT_DOUBLE_EQ(x.at("oldest_row_age_seconds").to_number<double>(), 135.5);
  EXPECT_EQ(x.at("table_bytes").to_number<std::int64_t>(), 36'864);
  EXPECT_EQ(x.at("index_bytes").to_number<std::int64_t>(), 37'888);
  EXPECT_EQ(x.at("dead_tuples").to_number<std::int64_t>(), 38);
  EXPECT_EQ(x.at("live_tuples").to_number<std::int64_t>(), 39);
  EXPECT_EQ(x.at("rows_expired_pack_horizon").to_number<std::uint64_t>(), 41u);
  EXPECT_DOUBLE_EQ(x.at("earliest_pack_horizon_in_seconds").to_number<double>(), -42.5);

  // An empty table: the age is null (present, so a consumer tells "empty" from "not reported").
  storage::ExpiryStats e = SampleExpiry();
  e.oldest_age_seconds.reset();
  s.expiry = e;
  v = boost::json::parse(RenderStatsJson(s));
  ASSERT_TRUE(v.at("expiry").as_object().contains("oldest_row_age_seconds"));
  EXPECT_TRUE(v.at("expiry").at("oldest_row_age_seconds").is_null());

  // No expiry: no "expiry" object; the horizon still there.
  s.expiry.reset();
  s.retention_seconds = 0;
  v = boost::json::parse(RenderStatsJson(s));
  EXPECT_FALSE(v.as_object().contains("expiry"));
  EXPECT_EQ(v.at("retention_seconds").to_number<std::int64_t>(), 0);
}

}  // namespace
}  // namespace scangate::server
