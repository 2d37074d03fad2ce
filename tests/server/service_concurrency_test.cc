// Black-box concurrency tests of scangate: exactly one "new" among concurrent observers of a key
// (both ack modes), ack=commit never answers "new" before the row is committed, and a Bloom
// false positive never drops an event (a forced-tiny filter still answers fresh keys 201 via exact).
#include <algorithm>
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

// Two instances share one PostgreSQL (ack=commit). A key first observed on A is a duplicate on B
// although B's filter has never seen it (a stale "definitely new": only PostgreSQL decides, and the
// stale answer is counted); and 64 connections split over both instances get exactly one 201.
TEST(ServiceConcurrency, TwoInstancesOneAuthority) {
  constexpr int kKeys = 20;
  ScangateProcess a({"--ack=commit", "--capacity=1000000"});
  ScangateProcess b({"--ack=commit", "--capacity=1000000"});
  ASSERT_TRUE(a.Start());
  ASSERT_TRUE(b.Start());
  HttpClient ca(a.port()), cb(b.port());
  const auto stale_before = MetricValue(cb.Get("/metrics").body, "scangate_filter_stale_total");
  ASSERT_TRUE(stale_before.has_value()) << "scangate_filter_stale_total missing";
  for (int i = 0; i < kKeys; ++i) {
    const std::string key = UniqueKey("two-instances");
    HttpResponse first = ca.Post("/observe", ObserveBody(key));
    ASSERT_EQ(first.status, 201) << first;
    HttpResponse second = cb.Post("/observe", ObserveBody(key));
    ASSERT_EQ(second.status, 200) << "instance B answered a key committed by A as new: " << second;
    EXPECT_EQ(second.json().at("verdict"), "duplicate");
  }
  const auto stale_after = MetricValue(cb.Get("/metrics").body, "scangate_filter_stale_total");
  ASSERT_TRUE(stale_after.has_value());
  // B's filter said "definitely new" for (almost) all of them: at design load FP is 1 %, here ~0.
  EXPECT_GE(*stale_after - *stale_before, kKeys - 2) << "stale filter answers are not counted";

  Pg pg;
  for (int round = 0; round < 3; ++round) {
    const std::string key = UniqueKey("two-instances-race");
    std::vector<std::unique_ptr<HttpClient>> clients;
    for (int i = 0; i < kConcurrentClients; ++i) {
      clients.push_back(std::make_unique<HttpClient>(i % 2 == 0 ? a.port() : b.port()));
    }
    std::barrier start(kConcurrentClients);
    std::vector<int> statuses(kConcurrentClients, 0);
    std::vector<std::thread> threads;
    for (int i = 0; i < kConcurrentClients; ++i) {
      threads.emplace_back([&, i] {
        start.arrive_and_wait();
        try {
          statuses[i] = clients[i]->Post("/observe", ObserveBody(key)).status;
        } catch (const std::exception&) {
          statuses[i] = -1;
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(std::count(statuses.begin(), statuses.end(), 201), 1) << "round " << round;
    EXPECT_EQ(std::count(statuses.begin(), statuses.end(), 200), kConcurrentClients - 1) << "round " << round;
    EXPECT_EQ(pg.CountDigest(Sha256Hex(key)), 1);
  }
  EXPECT_EQ(a.Stop(), 0);
  EXPECT_EQ(b.Stop(), 0);
}

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
  constexpr int kWantExact = 40;  // exact answers are FPs or untrusted negatives: 40 make "no FP" ~1e-6 unlikely
  ScangateProcess server({"--capacity=64", "--shards=1", "--fp-target=0.4", "--ack=commit"});
  ASSERT_TRUE(server.Start());
  HttpClient c(server.port());
  Pg pg;
  // A 201 via exact is a false positive, or (this filter is far past its capacity) a negative the filter
  // did not trust because its shard forgot keys within the window (core/filter.h).
  const std::string m0 = c.Get("/metrics").body;
  const auto before = MetricValue(m0, "scangate_filter_false_positives_total");
  const auto untrusted_before = MetricValue(m0, "scangate_filter_untrusted_negatives_total");
  ASSERT_TRUE(before.has_value()) << "scangate_filter_false_positives_total missing";
  ASSERT_TRUE(untrusted_before.has_value()) << "scangate_filter_untrusted_negatives_total missing";
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
  const std::string m1 = c.Get("/metrics").body;
  const auto after = MetricValue(m1, "scangate_filter_false_positives_total");
  const auto untrusted_after = MetricValue(m1, "scangate_filter_untrusted_negatives_total");
  ASSERT_TRUE(after.has_value());
  ASSERT_TRUE(untrusted_after.has_value());
  EXPECT_GE(*after - *before, 1.0) << "no 201 via exact was a false positive";
  EXPECT_EQ(*after - *before + *untrusted_after - *untrusted_before, static_cast<double>(exact))
      << "each 201 via exact must be counted as a false positive or an untrusted negative";
  EXPECT_EQ(pg.CountDigests(hexes), static_cast<std::int64_t>(hexes.size()));
  EXPECT_EQ(server.Stop(), 0);
}

}  // namespace
}  // namespace scangate::it
