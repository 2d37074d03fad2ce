// Black-box concurrency tests of scangate: exactly one "new" among concurrent observers of a key
// (both ack modes), ack=commit never answers "new" before the row is committed, and a Bloom
// false positive never drops an event (a forced-tiny filter still answers fresh keys 201 via exact).
#include <atomic>
#include <barrier>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "harness.h"

namespace scangate::it {
namespace {

namespace json = boost::json;

constexpr int kConcurrentClients = 64;
constexpr int kSameKeyRounds = 5;

// 64 connections, started together by a barrier, observe the same key: exactly one 201, 63 x 200,
// one row in PostgreSQL, one first_seen shared by every duplicate answer.
void SameKeyFromManyConnections(const std::string& ack) {
  ScangateProcess server({"--ack=" + ack, "--capacity=1000000"});
  ASSERT_TRUE(server.Start());
  Pg pg;
  std::vector<std::string> round_keys;
  for (int round = 0; round < kSameKeyRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const std::string key = UniqueKey("same-" + ack);
    round_keys.push_back(key);
    const std::string body = ObserveBody(key);
    std::vector<std::unique_ptr<HttpClient>> clients;
    for (int i = 0; i < kConcurrentClients; ++i) clients.push_back(std::make_unique<HttpClient>(server.port()));
    std::barrier start(kConcurrentClients);
    std::vector<HttpResponse> responses(kConcurrentClients);
    std::vector<std::string> errors(kConcurrentClients);
    std::vector<std::thread> threads;
    for (int i = 0; i < kConcurrentClients; ++i) {
      threads.emplace_back([&, i] {
        start.arrive_and_wait();
        try {
          responses[i] = clients[i]->Post("/observe", body);
        } catch (const std::exception& e) {
          errors[i] = e.what();
        }
      });
    }
    for (auto& t : threads) t.join();

    int created = 0, duplicates = 0;
    std::set<std::string> first_seen;
    for (int i = 0; i < kConcurrentClients; ++i) {
      ASSERT_TRUE(errors[i].empty()) << "client " << i << ": " << errors[i];
      const HttpResponse& r = responses[i];
      if (r.status == 201) {
        ++created;
        EXPECT_EQ(r.json().at("verdict"), "new") << r;
      } else if (r.status == 200) {
        ++duplicates;
        json::object o = r.json();
        EXPECT_EQ(o.at("verdict"), "duplicate") << r;
        EXPECT_EQ(o.at("via"), "exact") << r;
        if (o.contains("first_seen")) first_seen.insert(json::serialize(o.at("first_seen")));
      } else {
        ADD_FAILURE() << "unexpected response: " << r;
      }
      if (r.status == 200 || r.status == 201) {
        EXPECT_EQ(r.json().at("digest"), Sha256Hex(key).c_str()) << r;
      }
    }
    EXPECT_EQ(created, 1);
    EXPECT_EQ(duplicates, kConcurrentClients - 1);
    EXPECT_EQ(first_seen.size(), 1u);
    if (ack == "commit") {
      EXPECT_EQ(pg.CountDigest(Sha256Hex(key)), 1);
    }
  }
  ASSERT_EQ(server.Stop(), 0);
  // Both modes: after shutdown (which flushes ack=filter's write-behind) every key has its one row.
  for (const auto& key : round_keys) EXPECT_EQ(pg.CountDigest(Sha256Hex(key)), 1);
}

TEST(ServiceConcurrency, SameKeyExactlyOneNewAckCommit) { SameKeyFromManyConnections("commit"); }

TEST(ServiceConcurrency, SameKeyExactlyOneNewAckFilter) { SameKeyFromManyConnections("filter"); }

// ack=commit: 2000 unique keys from 8 connections; at the moment each 201 arrives, its row is
// already visible to a separate PostgreSQL connection.
TEST(ServiceConcurrency, AckCommitNewIsCommittedBeforeResponse) {
  constexpr int kClients = 8;
  constexpr int kKeys = 2000;
  ScangateProcess server({"--ack=commit", "--capacity=1000000"});
  ASSERT_TRUE(server.Start());
  std::vector<std::thread> threads;
  std::mutex mu;
  std::vector<std::string> failures;
  std::atomic<int> created{0};
  for (int t = 0; t < kClients; ++t) {
    threads.emplace_back([&] {
      try {
        HttpClient c(server.port());
        Pg pg;
        for (int i = 0; i < kKeys / kClients; ++i) {
          const std::string key = UniqueKey("commit");
          HttpResponse r = c.Post("/observe", ObserveBody(key));
          if (r.status != 201) {
            std::lock_guard lock(mu);
            failures.push_back("fresh key not answered 201: " + std::to_string(r.status) + " " + r.body);
            continue;
          }
          ++created;
          if (pg.CountDigest(Sha256Hex(key)) != 1) {
            std::lock_guard lock(mu);
            failures.push_back("201 before commit: digest " + Sha256Hex(key) + " not in PostgreSQL, via " + r.body);
          }
        }
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        failures.push_back(std::string("client error: ") + e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(created.load(), kKeys);
  EXPECT_TRUE(failures.empty()) << failures.size() << " failures, first: " << failures.front();
  EXPECT_EQ(server.Stop(), 0);
}

// A filter far too small for the data answers "possibly seen" for many fresh keys; those must still
// be 201 via "exact" (only PostgreSQL may say duplicate), and each one counts in
// scangate_filter_false_positives_total. Sizing: --capacity=1 cannot force false positives with this
// filter (a generation retires at capacity, so it never holds more than one key per 64-bit word);
// --capacity=64 --shards=1 --fp-target=0.4 gives one shard of 4 words with k = 1 rotating every 64
// keys, i.e. a modelled FP of ~0.2-0.4 per fresh key: P(no FP in 3000 keys) is below 1e-100.
TEST(ServiceConcurrency, ForcedFilterFalsePositiveStillNew) {
  constexpr int kMaxKeys = 3000;
  constexpr int kWantExact = 20;
  ScangateProcess server({"--capacity=64", "--shards=1", "--fp-target=0.4", "--ack=commit"});
  ASSERT_TRUE(server.Start());
  HttpClient c(server.port());
  Pg pg;
  const auto before = MetricValue(c.Get("/metrics").body, "scangate_filter_false_positives_total");
  ASSERT_TRUE(before.has_value()) << "scangate_filter_false_positives_total missing";
  int exact = 0, via_filter = 0;
  std::vector<std::string> hexes;
  for (int i = 0; i < kMaxKeys && exact < kWantExact; ++i) {
    const std::string key = UniqueKey("fp");
    HttpResponse r = c.Post("/observe", ObserveBody(key));
    ASSERT_EQ(r.status, 201) << "a fresh key was not answered new (a Bloom positive must never drop an event): "
                             << r;
    json::object o = r.json();
    ASSERT_EQ(o.at("verdict"), "new") << r;
    if (o.at("via") == "exact") {
      ++exact;
    } else {
      ++via_filter;
    }
    hexes.push_back(Sha256Hex(key));
  }
  EXPECT_GE(exact, 1) << "no false positive forced in " << hexes.size() << " keys (via filter: " << via_filter
                      << "); the filter is not as tiny as --capacity=1 --shards=1 asks";
  const auto after = MetricValue(c.Get("/metrics").body, "scangate_filter_false_positives_total");
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(*after - *before, static_cast<double>(exact))
      << "scangate_filter_false_positives_total must count each 201 via exact";
  EXPECT_EQ(pg.CountDigests(hexes), static_cast<std::int64_t>(hexes.size()));
  EXPECT_EQ(server.Stop(), 0);
}

}  // namespace
}  // namespace scangate::it
