// Tests core/filter_geometry.h: the blocked sizing model against its explicit sum and the reference numbers,
// the per-word FP used by the telemetry, geometry edge cases and argument checks (also through the
// ShardedFilter constructor).
#include "core/filter_geometry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <utility>
#include <vector>

#include "core/filter.h"

namespace scangate {
namespace {

using std::chrono::hours;

double Choose(int n, int k) {
  if (k < 0 || k > n) return 0;
  double r = 1;
  for (int i = 1; i <= k; ++i) r = r * (n - k + i) / i;
  return r;
}

// The model as the issue states it: explicit Poisson sum of the inclusion-exclusion probability.
double ExplicitBlockedFp(double lambda, int k) {
  double sum = 0, pois = std::exp(-lambda);
  for (int j = 0; j < 2000; ++j) {
    if (j > 0) pois *= lambda / j;
    double p = 0;
    for (int i = 0; i <= k; ++i) {
      p += (i % 2 ? -1 : 1) * Choose(k, i) * std::pow(Choose(64 - i, k) / Choose(64, k), j);
    }
    sum += pois * p;
    if (j > lambda && pois < 1e-18) break;
  }
  return sum;
}

std::pair<std::uint32_t, double> BestK(double lambda) {
  std::pair<std::uint32_t, double> best{0, 2.0};
  for (std::uint32_t k = 1; k <= kMaxBitsPerWordK; ++k) {
    const double fp = BlockedBloomFp(lambda, k);
    if (fp < best.second) best = {k, fp};
  }
  return best;
}

// Closed form used by the sizing equals the explicit Poisson sum of the inclusion-exclusion term.
TEST(FilterModel, ClosedFormMatchesExplicitSum) {
  for (double lambda : {0.25, 1.0, 3.2, 4.0, 5.33, 8.0, 20.0}) {
    for (int k : {1, 2, 4, 6, 9, 12, 16}) {
      const double want = ExplicitBlockedFp(lambda, k);
      EXPECT_NEAR(BlockedBloomFp(lambda, static_cast<std::uint32_t>(k)), want, 1e-9 + 1e-6 * want)
          << "lambda " << lambda << " k " << k;
    }
  }
}

// The reference numbers from the issue: best k and per-generation FP at 8/12/16/20 bits per key.
TEST(FilterModel, ReferenceNumbers) {
  struct Row {
    double bits;
    std::uint32_t k;
    double fp;
  };
  for (const Row& r : {Row{8, 4, 0.0321}, Row{12, 5, 0.00959}, Row{16, 6, 0.00367}, Row{20, 6, 0.00169}}) {
    const auto [k, fp] = BestK(64.0 / r.bits);
    EXPECT_EQ(k, r.k) << r.bits << " bits/key";
    EXPECT_NEAR(fp, r.fp, 0.005 * r.fp) << r.bits << " bits/key";
    // Blocking costs FP against the standard formula at its optimal k.
    const auto k_std = static_cast<std::uint32_t>(std::lround(r.bits * std::log(2.0)));
    EXPECT_GT(fp, StandardBloomFp(r.bits, k_std)) << r.bits << " bits/key";
  }
}


// The per-word FP is C(popcount, k) / C(64, k): 0 below k set bits, 1 for a full word.
TEST(FilterModel, WordFpIsChooseRatio) {
  for (std::uint32_t k : {1u, 4u, 6u, 16u}) {
    for (std::uint32_t p = 0; p <= 64; ++p) {
      const double want = Choose(static_cast<int>(p), static_cast<int>(k)) / Choose(64, static_cast<int>(k));
      EXPECT_NEAR(WordFp(p, k), want, 1e-12 * (1 + want)) << "popcount " << p << " k " << k;
    }
    EXPECT_EQ(WordFp(k - 1, k), 0.0) << k;
    EXPECT_EQ(WordFp(64, k), 1.0) << k;
  }
}

// Sizing picks the fewest words meeting the per-generation target 1 - sqrt(1 - target).
TEST(FilterGeometry, SizingMeetsTargetWithFewestWords) {
  for (double target : {0.1, 0.05, 0.01, 0.001, 1e-4, 1e-5}) {
    FilterOptions o;
    o.capacity = 1'000'000;
    o.fp_target = target;
    const FilterGeometry g = FilterGeometry::For(o);
    const double per_gen = 1 - std::sqrt(1 - target);
    EXPECT_LE(g.generation_fp, per_gen * (1 + 1e-9)) << target;
    EXPECT_LE(g.design_fp, target * (1 + 1e-9)) << target;
    EXPECT_NEAR(g.design_fp, 1 - (1 - g.generation_fp) * (1 - g.generation_fp), 1e-15);
    const double lambda = double(g.capacity_per_shard) / double(g.words_per_generation_per_shard);
    EXPECT_EQ(g.k, BestK(lambda).first) << target;
    // One word fewer per shard would miss the target with every k.
    const double lambda_fewer = double(g.capacity_per_shard) / double(g.words_per_generation_per_shard - 1);
    EXPECT_GT(BestK(lambda_fewer).second, per_gen) << target;
    EXPECT_NEAR(g.bits_per_key, 64.0 / lambda, 1e-9);
    EXPECT_EQ(g.memory_bytes, g.words_per_generation_per_shard * 8 * 2 * g.shards);
  }
}

// A target whose per-generation share is exactly the 16 bits/key reference lands on 16 bits/key, k = 6.
TEST(FilterGeometry, ReferenceTargetGives16BitsPerKey) {
  const double per_gen = BlockedBloomFp(4.0, 6);
  FilterOptions o;
  o.capacity = 64 * 100'000;
  o.fp_target = 1 - (1 - per_gen) * (1 - per_gen);
  const FilterGeometry g = FilterGeometry::For(o);
  EXPECT_EQ(g.k, 6u);
  EXPECT_NEAR(g.bits_per_key, 16.0, 0.01);
}

TEST(FilterGeometry, EdgeCases) {
  FilterOptions o;
  o.capacity = 1;  // capacity 1: at least one word per shard
  o.shards = 64;
  FilterGeometry g = FilterGeometry::For(o);
  EXPECT_EQ(g.capacity_per_shard, 1u);
  EXPECT_EQ(g.words_per_generation_per_shard, 1u);
  EXPECT_GE(g.k, 1u);
  o.shards = 1;
  g = FilterGeometry::For(o);
  EXPECT_EQ(g.shards, 1u);
  EXPECT_EQ(g.words_per_generation_per_shard, 1u);

  o = FilterOptions{};
  o.fp_target = 0.999;  // huge target: tiny filter, still valid
  g = FilterGeometry::For(o);
  EXPECT_LE(g.design_fp, 0.999);
  EXPECT_LT(g.bits_per_key, 1.0);
  o.fp_target = 1e-6;  // tiny but reachable target
  g = FilterGeometry::For(o);
  EXPECT_LE(g.design_fp, 1e-6);
  EXPECT_GT(g.bits_per_key, 100);
  EXPECT_LE(g.bits_per_key, kMaxBitsPerKey);
  o.shards = kMaxShards;
  EXPECT_EQ(FilterGeometry::For(o).shards, kMaxShards);
}

TEST(FilterGeometry, InvalidArgumentsThrow) {
  auto bad = [](auto mutate) {
    FilterOptions o;
    mutate(o);
    return o;
  };
  const std::vector<FilterOptions> cases = {
      bad([](FilterOptions& o) { o.capacity = 0; }),
      bad([](FilterOptions& o) { o.fp_target = 0; }),
      bad([](FilterOptions& o) { o.fp_target = 1; }),
      bad([](FilterOptions& o) { o.fp_target = -0.5; }),
      bad([](FilterOptions& o) { o.fp_target = std::numeric_limits<double>::quiet_NaN(); }),
      bad([](FilterOptions& o) { o.fp_target = 1e-9; }),  // below the 64-bit-block floor
      bad([](FilterOptions& o) { o.shards = 0; }),
      bad([](FilterOptions& o) { o.shards = 3; }),
      bad([](FilterOptions& o) { o.shards = 2 * kMaxShards; }),
      bad([](FilterOptions& o) { o.window = std::chrono::nanoseconds(0); }),
      bad([](FilterOptions& o) { o.window = -hours(1); }),
      bad([](FilterOptions& o) { o.capacity = std::uint64_t{1} << 50; }),  // above kMaxFilterBytes
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    EXPECT_THROW(FilterGeometry::For(cases[i]), std::invalid_argument) << "case " << i;
    EXPECT_THROW(ShardedFilter{cases[i]}, std::invalid_argument) << "case " << i;
  }
  // The message names the cause; fails (does not pass silently) when nothing is thrown.
  FilterOptions unreachable;
  unreachable.fp_target = 1e-9;
  EXPECT_THAT([&] { FilterGeometry::For(unreachable); },
              ::testing::ThrowsMessage<std::invalid_argument>(::testing::HasSubstr("unreachable")));
}


}  // namespace
}  // namespace scangate
