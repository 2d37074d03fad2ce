// Invariant 2 past the filter's capacity (issue 9), black-box over HTTP against the real scangate binary:
// with --ack=filter and a filter far too small for the traffic, capacity rotations make the filter forget
// keys observed within the window. A forgotten key's "definitely new" must not be trusted: it goes down the
// exact path and is answered duplicate. The rotation and untrusted-negative metrics and the filter_rotation
// log line report it.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <chrono>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"

namespace scangate::it {
namespace {
namespace json = boost::json;

// Value of the sample `series` (name with its exact label set, e.g. a{b="c"}) in a /metrics text.
std::optional<double> Sample(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return std::nullopt;
}

// A database of its own on the fixture's cluster: the warm start must not load other tests' keys into a
// 1000-key filter (they would rotate it for capacity before the first request). Dropped at the end.
class OwnDatabase {
 public:
  OwnDatabase() : name_("scangate_overload_" + RandomHex(6)) {
    Pg pg;
    pqxx::nontransaction tx(pg.conn());
    tx.exec0("CREATE DATABASE " + name_);
  }
  ~OwnDatabase() {
    try {
      Pg pg;
      pqxx::nontransaction tx(pg.conn());
      tx.exec0("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
    } catch (const std::exception& e) {
      ADD_FAILURE() << "dropping " << name_ << ": " << e.what();
    }
  }
  std::string url() const { return "postgresql://postgres@127.0.0.1:" + Env().pg_port + "/" + name_ + "?connect_timeout=3"; }

 private:
  std::string name_;
};

// The reproduction of issue 9: early-key new; 3000 other keys (three capacity's worth, so the shard forgets
// early-key long before the 24 h window ends); early-key again must be duplicate (via exact), not new.
TEST(ServiceOverload, AckFilterPastCapacityForgottenKeyIsDuplicate) {
  const OwnDatabase db;
  ScangateProcess server({"--ack=filter", "--capacity=1000", "--shards=1", "--database-url=" + db.url()});
  ASSERT_TRUE(server.Start());
  HttpClient c(server.port());
  const std::string early = UniqueKey("early-key");
  const HttpResponse first = c.Post("/observe", ObserveBody(early));
  ASSERT_EQ(first.status, 201) << first;
  EXPECT_EQ(first.json().at("via"), "filter") << first;

  constexpr int kOthers = 3000, kPerBatch = 500;
  std::vector<std::string> others;
  int others_new = 0;
  for (int b = 0; b < kOthers / kPerBatch; ++b) {
    std::vector<std::string> keys;
    for (int i = 0; i < kPerBatch; ++i) keys.push_back(UniqueKey("other"));
    const HttpResponse r = c.Post("/observe/batch", BatchBody(keys));
    ASSERT_EQ(r.status, 200) << r;
    const json::object body = r.json();
    for (const auto& v : body.at("results").as_array()) others_new += v.at("verdict") == "new";
    others.insert(others.end(), keys.begin(), keys.end());
  }
  EXPECT_EQ(others_new, kOthers) << "every fresh key is new, through either path";

  const HttpResponse again = c.Post("/observe", ObserveBody(early));
  EXPECT_EQ(again.status, 200) << "early-key answered new twice within the window: " << again;
  if (again.status == 200) {
    EXPECT_EQ(again.json().at("verdict"), "duplicate") << again;
    EXPECT_EQ(again.json().at("via"), "exact") << again;
  }
  // Fresh keys are still answered new while the shard distrusts its negatives (via the exact path).
  const std::string fresh = UniqueKey("fresh");
  const HttpResponse fresh_r = c.Post("/observe", ObserveBody(fresh));
  EXPECT_EQ(fresh_r.status, 201) << fresh_r;
  EXPECT_EQ(fresh_r.json().at("via"), "exact") << fresh_r;
  // Repeats of the early batches (forgotten too) are duplicates.
  for (int i = 0; i < 50; ++i) {
    const HttpResponse r = c.Post("/observe", ObserveBody(others[i]));
    EXPECT_EQ(r.status, 200) << "key " << i << ": " << r;
  }

  // Filter figures in /metrics come from the telemetry sample the 1 s maintenance timer refreshes: poll
  // until a sample taken after the rotations above is served.
  std::string m;
  const auto sample_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  do {
    m = c.Get("/metrics").body;
    const auto rot = Sample(m, R"(scangate_filter_rotations_total{cause="capacity"})");
    if (rot.has_value() && *rot >= 2.0 && Sample(m, "scangate_filter_distrusting_shards") == 1.0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  } while (std::chrono::steady_clock::now() < sample_deadline);
  const auto capacity_rotations = Sample(m, R"(scangate_filter_rotations_total{cause="capacity"})");
  ASSERT_TRUE(capacity_rotations.has_value()) << m;
  EXPECT_GE(*capacity_rotations, 2.0) << "3000 keys through a 1000-key filter rotate it at least twice";
  EXPECT_EQ(Sample(m, R"(scangate_filter_rotations_total{cause="window"})"), std::optional<double>(0.0));
  const auto untrusted = Sample(m, "scangate_filter_untrusted_negatives_total");
  ASSERT_TRUE(untrusted.has_value()) << m;
  EXPECT_GE(*untrusted, 2.0);  // early-key and the fresh key at least
  EXPECT_EQ(Sample(m, "scangate_filter_distrusting_shards"), std::optional<double>(1.0));
  const json::value stats = json::parse(c.Get("/stats").body);
  EXPECT_EQ(stats.at("filter").at("rotations").at("capacity").to_number<double>(), *capacity_rotations);

  // The maintenance timer (1 s) logs the capacity rotations, with the distrust deadline.
  std::vector<json::object> lines;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((lines = server.LogEvents("filter_rotation")).empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(lines.empty()) << server.LogTail();
  bool has_deadline = false;
  for (const auto& l : lines) {
    EXPECT_EQ(l.at("cause"), "capacity");
    EXPECT_EQ(l.at("shard").to_number<int>(), 0);
    has_deadline = has_deadline || l.at("distrust_until").is_string();
  }
  EXPECT_TRUE(has_deadline) << server.LogTail();
  // Nothing was written behind twice: the forgotten keys took the exact path. Once the write queue has
  // drained, no write-behind row found its key already present.
  std::string drained;
  const auto queue_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (Sample(drained = c.Get("/metrics").body, "scangate_pg_queue_depth") != std::optional<double>(0.0) &&
         std::chrono::steady_clock::now() < queue_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(Sample(drained, "scangate_write_behind_conflicts_total"), std::optional<double>(0.0)) << drained;
  EXPECT_EQ(server.Stop(), 0);
  pqxx::connection conn(db.url());
  pqxx::nontransaction tx(conn);
  EXPECT_EQ(tx.exec_params1("SELECT count(*) FROM scan_keys WHERE digest = scangate_stored_digest(decode($1, 'hex'))", Sha256Hex(early))[0]
                .as<int>(),
            1);
}

}  // namespace
}  // namespace scangate::it
