// Black-box lifecycle tests of scangate: SIGTERM exits 0 and a restarted service still knows every
// key (warm start from PostgreSQL), and a graceful shutdown flushes ack=filter's write-behind so
// every key ever answered "new" is in PostgreSQL.
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "harness.h"

namespace scangate::it {
namespace {

namespace json = boost::json;

// Keys observed before a restart are duplicates after it; the second process logs warm_start.
TEST(ServiceRestart, KeysSurviveRestart) {
  constexpr int kKeys = 50;
  std::vector<std::string> keys;
  for (int i = 0; i < kKeys; ++i) keys.push_back(UniqueKey("restart"));
  std::vector<std::string> first_seen(kKeys);
  {
    ScangateProcess first({"--capacity=1000000"});
    ASSERT_TRUE(first.Start());
    HttpClient c(first.port());
    for (int i = 0; i < kKeys; ++i) {
      HttpResponse r = c.Post("/observe", ObserveBody(keys[i]));
      ASSERT_EQ(r.status, 201) << r;
      HttpResponse d = c.Post("/observe", ObserveBody(keys[i]));
      ASSERT_EQ(d.status, 200) << d;
      first_seen[i] = json::serialize(d.json().at("first_seen"));
    }
    ASSERT_EQ(first.Stop(), 0) << "SIGTERM must end scangate with exit 0";
    EXPECT_FALSE(first.LogEvents("shutdown").empty()) << "no shutdown log event";
  }
  ScangateProcess second({"--capacity=1000000"});
  ASSERT_TRUE(second.Start());
  const auto warm = second.LogEvents("warm_start");
  ASSERT_FALSE(warm.empty()) << "no warm_start log event";
  const auto* loaded = warm.back().if_contains("keys");
  ASSERT_TRUE(loaded != nullptr && loaded->is_number()) << json::serialize(warm.back());
  EXPECT_GE(loaded->to_number<double>(), kKeys) << "warm start loaded fewer keys than this test wrote";
  HttpClient c(second.port());
  for (int i = 0; i < kKeys; ++i) {
    HttpResponse r = c.Post("/observe", ObserveBody(keys[i]));
    ASSERT_EQ(r.status, 200) << "key observed before the restart is not a duplicate: " << r;
    json::object o = r.json();
    EXPECT_EQ(o.at("verdict"), "duplicate");
    EXPECT_EQ(o.at("digest"), Sha256Hex(keys[i]).c_str());
    EXPECT_EQ(json::serialize(o.at("first_seen")), first_seen[i]) << "first_seen changed across a restart";
  }
  const std::string fresh = UniqueKey("restart-fresh");
  EXPECT_EQ(c.Post("/observe", ObserveBody(fresh)).status, 201);
  EXPECT_EQ(second.Stop(), 0);
}

// ack=filter with a slow write-behind (200 ms): 5000 keys sent fast from 8 pipelining connections,
// then SIGTERM at once. Exit 0, and every key answered 201 is in PostgreSQL afterwards.
TEST(ServiceRestart, GracefulShutdownFlushesWriteBehind) {
  constexpr int kClients = 8;
  constexpr int kKeys = 5000;
  constexpr int kPipelineDepth = 50;
  ScangateProcess server({"--ack=filter", "--flush-interval=200ms", "--capacity=1000000"});
  ASSERT_TRUE(server.Start());
  std::mutex mu;
  std::vector<std::string> created_hexes;
  std::vector<std::string> failures;
  int via_filter = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < kClients; ++t) {
    threads.emplace_back([&] {
      try {
        HttpClient c(server.port());
        constexpr int kPerClient = kKeys / kClients;
        static_assert(kPerClient * kClients == kKeys);
        for (int sent = 0; sent < kPerClient; sent += kPipelineDepth) {
          std::vector<std::string> keys;
          std::string bytes;
          for (int i = 0; i < kPipelineDepth && sent + i < kPerClient; ++i) {
            keys.push_back(UniqueKey("flush"));
            const std::string body = ObserveBody(keys.back());
            bytes += "POST /observe HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                     std::to_string(body.size()) + "\r\n\r\n" + body;
          }
          c.SendRaw(bytes);
          for (const auto& key : keys) {
            HttpResponse r = c.ReadResponse();
            std::lock_guard lock(mu);
            if (r.status != 201) {
              failures.push_back("fresh key not 201: " + std::to_string(r.status) + " " + r.body);
              continue;
            }
            created_hexes.push_back(Sha256Hex(key));
            if (r.body.find("\"filter\"") != std::string::npos) ++via_filter;
          }
        }
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        failures.push_back(std::string("client error: ") + e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  const int status = server.Stop();  // immediately: part of the write-behind is still queued
  EXPECT_EQ(status, 0) << "SIGTERM must flush and exit 0";
  EXPECT_TRUE(failures.empty()) << failures.size() << " failures, first: " << failures.front();
  EXPECT_EQ(created_hexes.size(), static_cast<std::size_t>(kKeys));
  EXPECT_GT(via_filter, 0) << "no key took the write-behind path; the test proves nothing";
  Pg pg;
  EXPECT_EQ(pg.CountDigests(created_hexes), static_cast<std::int64_t>(created_hexes.size()))
      << "keys answered 201 were lost at shutdown (write-behind not flushed)";
}

}  // namespace
}  // namespace scangate::it
