// Two scangate instances on one PostgreSQL (--ack=commit), 8 client threads spraying the same keys at both:
// each thread sends every key, alternating instances, and the threads meet at a barrier every 20 keys so
// that the observations of one key really race. Promise: exactly one 201 per key across both instances,
// every other observation 200, one row per key.
#include <gtest/gtest.h>

#include <array>
#include <barrier>
#include <thread>

#include "util.h"

namespace scangate::hardening {
namespace {

constexpr int kThreads = 8;
constexpr int kKeys = 800;
constexpr int kRound = 20;  // keys between barriers: small, so threads stay on the same keys

TEST(HardeningTwoInstances, SameKeysAtBothInstancesGetExactlyOneNew) {
  it::ScangateProcess a({"--ack=commit"});
  it::ScangateProcess b({"--ack=commit"});
  ASSERT_TRUE(a.Start());
  ASSERT_TRUE(b.Start());
  const std::array<std::uint16_t, 2> ports{a.port(), b.port()};

  std::vector<std::string> keys;
  for (int i = 0; i < kKeys; ++i) keys.push_back(it::UniqueKey("two"));

  Ledger ledger;
  std::barrier sync(kThreads);
  std::atomic<std::uint64_t> per_instance[2][2] = {{0, 0}, {0, 0}};  // [instance][0=201, 1=200]
  std::atomic<std::uint64_t> reconnects{0};
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::array<std::unique_ptr<it::HttpClient>, 2> clients;
      for (int i = 0; i < kKeys; ++i) {
        if (i % kRound == 0) sync.arrive_and_wait();
        const int inst = (i + t) % 2;
        const std::string& key = keys[static_cast<std::size_t>(i)];
        const auto s = Clock::now();
        try {
          if (!clients[inst]) {
            clients[inst] = std::make_unique<it::HttpClient>(ports[inst]);
            ++reconnects;
          }
          const auto r = clients[inst]->Post("/observe", it::ObserveBody(key));
          ledger.Record(key, &r, s, Clock::now(), inst);
          if (r.status == 201) ++per_instance[inst][0];
          if (r.status == 200) ++per_instance[inst][1];
          if (!r.keep_alive) clients[inst].reset();
        } catch (const std::exception& e) {
          ledger.Record(key, nullptr, s, Clock::now(), inst, e.what());
          clients[inst].reset();
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();

  it::Pg pg;
  const LedgerCheck check = ledger.Check(pg);
  std::vector<std::string> hexes;
  for (const auto& k : keys) hexes.push_back(it::Sha256Hex(k));
  const auto rows = pg.CountDigests(hexes);
  Report("two-instances: ports " + std::to_string(ports[0]) + "+" + std::to_string(ports[1]) + ", " +
         std::to_string(kThreads) + " threads x " + std::to_string(kKeys) + " keys in " + std::to_string(ms) +
         " ms; instance A 201/200 = " + std::to_string(per_instance[0][0]) + "/" + std::to_string(per_instance[0][1]) +
         ", instance B 201/200 = " + std::to_string(per_instance[1][0]) + "/" + std::to_string(per_instance[1][1]) +
         "; rows in PostgreSQL for these keys " + std::to_string(rows) + "; connections opened " +
         std::to_string(reconnects.load()));
  Report("two-instances: " + check.Summary());
  for (const auto& e : check.examples) Report("two-instances: violation example: " + e);

  EXPECT_TRUE(check.ok()) << check.Summary();
  EXPECT_EQ(check.connection_errors, 0u);
  EXPECT_EQ(check.unavailable, 0u) << "503 with PostgreSQL up";
  // No ambiguity in this run, so "exactly one 201 per key" is: 201 count == keys and nobody got two.
  EXPECT_EQ(check.answered_new, static_cast<std::uint64_t>(kKeys));
  EXPECT_EQ(check.keys_new_twice, 0u);
  EXPECT_EQ(check.answered_duplicate, static_cast<std::uint64_t>(kKeys) * (kThreads - 1));
  EXPECT_EQ(rows, kKeys) << "expected one row per key";
  // Both instances must have told someone "new": otherwise the race was not across instances.
  EXPECT_GT(per_instance[0][0].load(), 0u);
  EXPECT_GT(per_instance[1][0].load(), 0u);
}

}  // namespace
}  // namespace scangate::hardening
