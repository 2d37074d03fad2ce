// Black-box tests of --partitions (issue 23) against the real binary: a PL/Proxy proxy database whose cluster
// maps two logical partitions to two databases (all on the shared throwaway cluster, so the test costs seconds).
// Every key lands in the database its digest's partition names and nowhere else; /metrics and /stats show each
// partition's state; a partition whose database refuses connections gets its keys 503 + Retry-After while the
// other partition's keys are answered and /readyz stays 200, and it heals without a restart; a partition moved
// to another database (the fenced procedure of docs/ha.md) is followed from the map, keeping its records.
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "harness.h"

namespace scangate::it {
namespace {

using namespace std::chrono_literals;

// The fixture's URL with another database name.
std::string UrlOf(const std::string& db) {
  std::string url = Env().pg_url;
  const auto slash = url.find('/', url.find("//") + 2);
  const auto query = url.find('?', slash);
  return url.substr(0, slash + 1) + db + (query == std::string::npos ? "" : url.substr(query));
}

// PL/Proxy's key=value form of a partition database on the fixture cluster.
std::string PartitionConninfo(const std::string& db) {
  return "host=127.0.0.1 port=" + Env().pg_port + " dbname=" + db + " user=postgres";
}

// The partition of a key: SHA-256 bytes 4..7 big-endian, & (count - 1) (sql/007 scangate_partition_hash).
unsigned PartitionOfKey(const std::string& key, unsigned count) {
  const std::string hex = Sha256Hex(key);
  const auto v = static_cast<std::uint32_t>(std::stoul(hex.substr(8, 8), nullptr, 16));
  return v & (count - 1);
}

void Exec(const std::string& db, const std::string& sql) {
  pqxx::connection c(UrlOf(db));
  pqxx::nontransaction tx(c);
  tx.exec(sql);
}

std::int64_t CountIn(const std::string& db, const std::string& hex) {
  pqxx::connection c(UrlOf(db));
  pqxx::nontransaction tx(c);
  return tx.exec_params1("SELECT count(*) FROM scan_keys WHERE digest = scangate_stored_digest(decode($1, 'hex'))", hex)[0].as<std::int64_t>();
}

// Refuses (true) or allows new connections to `db`; refusing also ends the ones it has.
void Fence(const std::string& db, bool fenced) {
  Exec("postgres", "ALTER DATABASE " + db + " ALLOW_CONNECTIONS " + (fenced ? "false" : "true"));
  if (fenced) Exec("postgres", "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '" + db + "'");
}

class PartitionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string tag = "sgpt_" + RandomHex(4);
    proxy_ = tag + "_proxy";
    parts_ = {tag + "_p0", tag + "_p1"};
    for (const auto& db : parts_) Exec("postgres", "CREATE DATABASE " + db);
    Exec("postgres", "CREATE DATABASE " + proxy_);
    Exec(proxy_, "CREATE EXTENSION plproxy");
    Exec(proxy_, "CREATE SERVER scangate FOREIGN DATA WRAPPER plproxy OPTIONS (connection_lifetime '1800', p0 '" +
                     PartitionConninfo(parts_[0]) + "', p1 '" + PartitionConninfo(parts_[1]) + "')");
    Exec(proxy_, "CREATE USER MAPPING FOR PUBLIC SERVER scangate");
  }
  void TearDown() override {
    for (const auto& db : dropped_) Exec("postgres", "DROP DATABASE IF EXISTS " + db + " WITH (FORCE)");
    for (const auto& db : parts_) Exec("postgres", "DROP DATABASE IF EXISTS " + db + " WITH (FORCE)");
    Exec("postgres", "DROP DATABASE IF EXISTS " + proxy_ + " WITH (FORCE)");
  }
  std::vector<std::string> Flags(std::vector<std::string> more = {}) {
    std::vector<std::string> f = {"--partitions=" + UrlOf(proxy_), "--partition-map-poll=200ms"};
    f.insert(f.end(), more.begin(), more.end());
    return f;
  }
  // Fresh keys, `n` of them in partition `p`.
  static std::vector<std::string> KeysOf(unsigned p, int n) {
    std::vector<std::string> keys;
    while (static_cast<int>(keys.size()) < n) {
      std::string k = UniqueKey("part");
      if (PartitionOfKey(k, 2) == p) keys.push_back(std::move(k));
    }
    return keys;
  }

  std::string proxy_;
  std::vector<std::string> parts_;
  std::vector<std::string> dropped_;
};

TEST_F(PartitionsTest, KeysLandInTheirPartition) {
  for (const char* ack : {"commit", "filter"}) {
    SCOPED_TRACE(ack);
    ScangateProcess server(Flags({std::string("--ack=") + ack, "--journal=off"}));
    ASSERT_TRUE(server.Start());
    HttpClient c(server.port());
    for (unsigned p = 0; p < 2; ++p) {
      for (const auto& key : KeysOf(p, 20)) {
        const ObserveAnswer a = ObserveKey(c, key);
        ASSERT_EQ(a.status, 201) << a.text;
        EXPECT_EQ(ObserveKey(c, key).status, 200);
        const std::string hex = Sha256Hex(key);
        // ack=filter writes behind: the row arrives within the flush interval.
        for (int i = 0; i < 100 && CountIn(parts_[p], hex) == 0; ++i) std::this_thread::sleep_for(20ms);
        EXPECT_EQ(CountIn(parts_[p], hex), 1) << "partition " << p;
        EXPECT_EQ(CountIn(parts_[1 - p], hex), 0) << "partition " << 1 - p;
      }
    }
    EXPECT_EQ(ScrapeMetric(c, "scangate_partitions"), 2);
    EXPECT_EQ(ScrapeMetric(c, "scangate_partition_up{partition=\"p0\"}"), 1);
    EXPECT_EQ(ScrapeMetric(c, "scangate_partition_up{partition=\"p1\"}"), 1);
    const auto stats = c.Get("/stats").json();
    ASSERT_TRUE(stats.contains("partitions")) << stats;
    EXPECT_EQ(stats.at("partitions").as_array().size(), 2u);
    EXPECT_EQ(server.Stop(), 0);
  }
}

// Partition 1's database refuses connections (ack=commit: every `new` waits for its partition's commit): its keys
// get 503 + Retry-After and nothing is recorded, partition 0's keys are answered, the instance stays ready; then
// it heals by itself, and the refused keys are `new` then (nothing of them was recorded).
TEST_F(PartitionsTest, ADownPartitionLeavesTheOtherServedAndHeals) {
  ScangateProcess server(Flags({"--request-timeout=2s"}));
  ASSERT_TRUE(server.Start());
  HttpClient c(server.port());
  ASSERT_EQ(ObserveKey(c, KeysOf(1, 1).front()).status, 201);
  Fence(parts_[1], true);
  bool p1_down = false;
  for (int i = 0; i < 100 && !p1_down; ++i) {
    p1_down = ObserveKey(c, KeysOf(1, 1).front()).status == 503;
    if (!p1_down) std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(p1_down) << "partition 1's keys never got 503 while its database refused connections";
  std::vector<std::string> refused;
  for (int i = 0; i < 5; ++i) {
    const auto k1 = KeysOf(1, 1).front();
    const auto r = c.Post("/observe", ObserveBody(k1));
    EXPECT_TRUE(IsProblem(r, 503, "unavailable")) << r;
    EXPECT_TRUE(r.has_header("retry-after")) << r;
    refused.push_back(k1);
    EXPECT_EQ(ObserveKey(c, KeysOf(0, 1).front()).status, 201);
  }
  EXPECT_EQ(c.Get("/readyz").status, 200);
  EXPECT_EQ(ScrapeMetric(c, "scangate_partition_up{partition=\"p1\"}"), 0);
  EXPECT_EQ(ScrapeMetric(c, "scangate_partition_up{partition=\"p0\"}"), 1);
  EXPECT_FALSE(server.LogEvents("pg_state").empty());

  Fence(parts_[1], false);
  bool healed = false;
  for (int i = 0; i < 200 && !healed; ++i) {
    healed = ObserveKey(c, refused.front()).status == 201;
    if (!healed) std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(healed) << "partition 1 did not heal";
  for (std::size_t i = 1; i < refused.size(); ++i) EXPECT_EQ(ObserveKey(c, refused[i]).status, 201);
  EXPECT_EQ(server.Stop(), 0);
}

// Moving partition 1 (docs/ha.md): fence its database, copy it, point the map at the copy. The instance
// follows the map without a restart; the partition's records moved with it (a repeat is still `duplicate`).
TEST_F(PartitionsTest, AMovedPartitionIsFollowedFromTheMap) {
  ScangateProcess server(Flags({"--request-timeout=2s"}));
  ASSERT_TRUE(server.Start());
  HttpClient c(server.port());
  const auto before = KeysOf(1, 10);
  for (const auto& k : before) ASSERT_EQ(ObserveKey(c, k).status, 201);
  const std::string moved = parts_[1] + "_moved";
  dropped_.push_back(moved);
  Fence(parts_[1], true);
  Exec("postgres", "CREATE DATABASE " + moved + " TEMPLATE " + parts_[1]);
  Exec(proxy_, "ALTER SERVER scangate OPTIONS (SET p1 '" + PartitionConninfo(moved) + "')");
  // Within a few polls the writers reconnect to the copy.
  bool followed = false;
  std::string fresh;
  for (int i = 0; i < 200 && !followed; ++i) {
    fresh = KeysOf(1, 1).front();
    followed = ObserveKey(c, fresh).status == 201;
    if (!followed) std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(followed) << server.LogTail();
  EXPECT_EQ(CountIn(moved, Sha256Hex(fresh)), 1);
  for (const auto& k : before) EXPECT_EQ(ObserveKey(c, k).status, 200);
  EXPECT_FALSE(server.LogEvents("partition_map_changed").empty());
  // POST /lookup follows the move too.
  const auto r = c.Post("/lookup", ObserveBody(fresh));
  EXPECT_EQ(r.status, 200) << r;
  EXPECT_EQ(server.Stop(), 0);
}

// Idempotency-Key (issue 34) with --partitions: the record lives in the key's row on the key's partition; a retry
// (after a restart, in both ack modes) is replayed, a second scan is a duplicate.
TEST_F(PartitionsTest, ARetryIsReplayedFromTheKeysPartition) {
  for (const char* ack : {"commit", "filter"}) {
    SCOPED_TRACE(ack);
    std::vector<std::string> keys = KeysOf(0, 3), more = KeysOf(1, 3);
    keys.insert(keys.end(), more.begin(), more.end());
    std::vector<std::string> ids;
    const auto observe = [](HttpClient& c, const std::string& key, const std::string& id) {
      return c.Request("POST", "/observe", "{\"key\":" + JsonString(key) + ",\"source\":\"till-4\"}",
                       "application/json", {{"Idempotency-Key", id}});
    };
    {
      ScangateProcess server(Flags({std::string("--ack=") + ack, "--journal=off"}));
      ASSERT_TRUE(server.Start());
      HttpClient c(server.port());
      for (const auto& key : keys) {
        ids.push_back(RandomHex(8));
        EXPECT_EQ(observe(c, key, ids.back()).status, 201);
      }
      EXPECT_EQ(server.Stop(), 0);
    }
    ScangateProcess server(Flags({std::string("--ack=") + ack, "--journal=off"}));
    ASSERT_TRUE(server.Start());
    HttpClient c(server.port());
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const unsigned p = PartitionOfKey(keys[i], 2);
      const HttpResponse retry = observe(c, keys[i], ids[i]);
      EXPECT_EQ(retry.status, 201) << retry;
      EXPECT_EQ(retry.header("idempotent-replayed"), "true") << retry;
      EXPECT_EQ(observe(c, keys[i], RandomHex(8)).status, 200) << "a second scan";
      EXPECT_EQ(CountIn(parts_[p], Sha256Hex(keys[i])), 1) << "partition " << p;
      EXPECT_EQ(CountIn(parts_[1 - p], Sha256Hex(keys[i])), 0) << "partition " << 1 - p;
    }
    EXPECT_EQ(server.Stop(), 0);
  }
}

// Issue 44 with --partitions, both ack modes: an instance's repeats with an Idempotency-Key are answered from its
// recent set — the recording request's retry replayed, a second scan a duplicate — whichever partition holds the
// key; no partition is asked.
TEST_F(PartitionsTest, RepeatsWithTheHeaderAreAnsweredFromMemory) {
  for (const char* ack : {"commit", "filter"}) {
    SCOPED_TRACE(ack);
    ScangateProcess server(Flags({std::string("--ack=") + ack, "--journal=off"}));
    ASSERT_TRUE(server.Start());
    HttpClient c(server.port());
    std::vector<std::string> keys = KeysOf(0, 2), more = KeysOf(1, 2), ids;
    keys.insert(keys.end(), more.begin(), more.end());
    const auto observe = [&c](const std::string& key, const std::string& id) {
      return c.Request("POST", "/observe", "{\"key\":" + JsonString(key) + ",\"source\":\"till-5\"}",
                       "application/json", {{"Idempotency-Key", id}});
    };
    for (const auto& key : keys) {
      ids.push_back(RandomHex(8));
      ASSERT_EQ(observe(key, ids.back()).status, 201);
    }
    const DecidedWhere before = ReadDecidedWhere(c);
    for (std::size_t i = 0; i < keys.size(); ++i) {
      EXPECT_EQ(observe(keys[i], ids[i]).header("idempotent-replayed"), "true") << keys[i];
      EXPECT_EQ(observe(keys[i], RandomHex(8)).status, 200) << "a second scan";
    }
    const DecidedWhere after = ReadDecidedWhere(c);
    EXPECT_EQ(after.pg_duplicates, before.pg_duplicates) << "a repeat asked its partition";
    EXPECT_EQ(after.recent_replays - before.recent_replays, keys.size());
    EXPECT_EQ(server.Stop(), 0);
  }
}

}  // namespace
}  // namespace scangate::it
