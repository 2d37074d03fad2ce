// core/closed_epochs.h: a digest held by a closed epoch is always planned for a probe there (and only there when the
// others' summaries say absent); an epoch without a summary is probed for everything; a batch no summary may hold
// plans nothing; the probes per digest across 16 epochs stay at 16 x the summaries' rate (binomial tolerance);
// a snapshot outlives the Publish that replaces it; Get and Publish from several threads.
#include "core/closed_epochs.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

#include "tests/core/counter_digest.h"

namespace scangate {
namespace {

using test_support::CounterDigest;

// Epoch e holds the digests (i, salt 100 + e) for i < n.
std::vector<ClosedEpoch> Epochs(int count, std::uint64_t n) {
  std::vector<ClosedEpoch> out;
  for (int e = 0; e < count; ++e) {
    auto s = std::make_shared<EpochSummary>(EpochSummary::ForKeys(n));
    for (std::uint64_t i = 0; i < n; ++i) s->Add(CounterDigest(i, 100 + e));
    out.push_back({1000 + e, std::move(s)});
  }
  return out;
}

bool Planned(const std::vector<EpochProbe>& plan, std::int64_t epoch, std::uint32_t item) {
  for (const EpochProbe& p : plan) {
    if (p.epoch != epoch) continue;
    for (const std::uint32_t i : p.items) {
      if (i == item) return true;
    }
  }
  return false;
}

TEST(ClosedEpochs, APresentKeyIsAlwaysProbedInItsEpoch) {
  const auto epochs = Epochs(4, 5'000);
  std::uint64_t missed = 0;
  for (int e = 0; e < 4; ++e) {
    std::vector<Digest> batch;
    for (std::uint64_t i = 0; i < 5'000; ++i) batch.push_back(CounterDigest(i, 100 + e));
    const auto plan = ClosedEpochs::PlanProbes(epochs, batch);
    for (std::uint32_t i = 0; i < batch.size(); ++i) missed += !Planned(plan, 1000 + e, i);
  }
  EXPECT_EQ(missed, 0u) << "a key in a closed epoch left unchecked there would be new a second time";
}

TEST(ClosedEpochs, AnEpochWithoutASummaryIsProbedForEverything) {
  auto epochs = Epochs(2, 1'000);
  epochs.push_back({7, nullptr});  // being closed: its summary has not committed
  std::vector<Digest> batch;
  for (std::uint64_t i = 0; i < 64; ++i) batch.push_back(CounterDigest(i, 999));
  const auto plan = ClosedEpochs::PlanProbes(epochs, batch);
  ASSERT_FALSE(plan.empty());
  const EpochProbe& last = plan.back();
  EXPECT_EQ(last.epoch, 7);
  ASSERT_EQ(last.items.size(), batch.size());
  for (std::uint32_t i = 0; i < batch.size(); ++i) EXPECT_EQ(last.items[i], i);
}

TEST(ClosedEpochs, NothingToProbeWithoutEpochsOrForAnEmptyBatch) {
  std::vector<Digest> batch{CounterDigest(1), CounterDigest(2)};
  EXPECT_TRUE(ClosedEpochs::PlanProbes({}, batch).empty());
  EXPECT_TRUE(ClosedEpochs::PlanProbes(Epochs(3, 100), {}).empty());
}

// Absent digests against 16 closed epochs: the probes per digest are 16 x the summaries' rate (each summary at
// design load, ~0.085 %), so ~1.4 % of digests cost a probe and a 64-digest batch mostly none. 3 binomial sigmas.
TEST(ClosedEpochs, ProbesForAbsentKeysFollowTheSummariesRate) {
  const auto epochs = Epochs(16, 20'000);
  double expected_per_digest = 0;
  for (const ClosedEpoch& e : epochs) expected_per_digest += e.summary->EstimatedFpRate();
  constexpr std::uint64_t kDigests = 200'000;
  std::vector<Digest> batch;
  std::uint64_t probes = 0;
  for (std::uint64_t i = 0; i < kDigests; ++i) {
    batch.push_back(CounterDigest(i, 5));
    if (batch.size() == 64 || i + 1 == kDigests) {
      for (const EpochProbe& p : ClosedEpochs::PlanProbes(epochs, batch)) probes += p.items.size();
      batch.clear();
    }
  }
  const double per_digest = static_cast<double>(probes) / kDigests;
  const double sigma = std::sqrt(expected_per_digest / kDigests);  // a sum of rare events: ~Poisson
  EXPECT_NEAR(per_digest, expected_per_digest, 3 * sigma + 0.03 * expected_per_digest);
  EXPECT_LE(per_digest, 16 * 0.001) << "16 epochs at the 0.1 % target";
}

TEST(ClosedEpochs, ASnapshotOutlivesThePublishThatReplacesIt) {
  ClosedEpochs set;
  EXPECT_TRUE(set.Get()->empty());
  set.Publish(Epochs(2, 100));
  const ClosedEpochs::Snapshot before = set.Get();
  set.Publish(Epochs(1, 100));
  ASSERT_EQ(before->size(), 2u);
  EXPECT_TRUE(before->at(1).summary->MayContain(CounterDigest(5, 101)));
  EXPECT_EQ(set.Get()->size(), 1u);
}

// Readers take snapshots while a publisher replaces the set: each snapshot is one published set, whole.
TEST(ClosedEpochs, GetAndPublishFromSeveralThreads) {
  ClosedEpochs set;
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> torn{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r) {
    readers.emplace_back([&] {
      while (!stop.load()) {
        const auto s = set.Get();
        for (const ClosedEpoch& e : *s) torn += e.id != static_cast<std::int64_t>(s->size());
      }
    });
  }
  for (int round = 1; round <= 200; ++round) {
    std::vector<ClosedEpoch> epochs(static_cast<std::size_t>(round % 5 + 1));
    for (ClosedEpoch& e : epochs) e.id = static_cast<std::int64_t>(epochs.size());
    set.Publish(std::move(epochs));
  }
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(torn.load(), 0u);
}

}  // namespace
}  // namespace scangate
