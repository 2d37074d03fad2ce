// Sizing of the register-blocked filter: the blocked-model FP and the geometry search (core/filter_geometry.h).
#include "core/filter_geometry.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace scangate {
namespace {

constexpr int kBitsPerWord = 64;

long double Choose(int n, int k) {
  if (k < 0 || k > n) return 0.0L;
  long double r = 1.0L;
  for (int i = 1; i <= k; ++i) r = r * (n - k + i) / i;
  return r;
}

// Best k and its FP for keys_per_word.
std::pair<std::uint32_t, double> BestK(double keys_per_word) {
  std::uint32_t best_k = 1;
  double best = BlockedBloomFp(keys_per_word, 1);
  for (std::uint32_t k = 2; k <= kMaxBitsPerWordK; ++k) {
    const double fp = BlockedBloomFp(keys_per_word, k);
    if (fp < best) {
      best = fp;
      best_k = k;
    }
  }
  return {best_k, best};
}

std::string Str(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace

double BlockedBloomFp(double keys_per_word, std::uint32_t k) {
  if (k == 0 || k > static_cast<std::uint32_t>(kBitsPerWord)) return 1.0;
  if (keys_per_word <= 0) return 0.0;
  const long double total = Choose(kBitsPerWord, static_cast<int>(k));
  long double sum = 0.0L;
  for (int i = 0; i <= static_cast<int>(k); ++i) {
    const long double r = Choose(kBitsPerWord - i, static_cast<int>(k)) / total;  // P(one key avoids i given bits)
    const long double term = Choose(static_cast<int>(k), i) * std::exp(-keys_per_word * (1.0L - r));
    sum += (i % 2 == 0) ? term : -term;
  }
  return static_cast<double>(std::clamp(sum, 0.0L, 1.0L));
}

double StandardBloomFp(double bits_per_key, std::uint32_t k) {
  return std::pow(1.0 - std::exp(-static_cast<double>(k) / bits_per_key), static_cast<double>(k));
}
FilterGeometry FilterGeometry::For(const FilterOptions& o) {
  if (o.capacity < 1) throw std::invalid_argument("filter capacity must be >= 1 key");
  if (!(o.fp_target > 0.0 && o.fp_target < 1.0)) {
    throw std::invalid_argument("filter fp_target must be in (0, 1), got " + Str(o.fp_target));
  }
  if (o.shards < 1 || o.shards > kMaxShards || !std::has_single_bit(o.shards)) {
    throw std::invalid_argument("filter shards must be a power of two in [1, " + std::to_string(kMaxShards) +
                                "], got " + std::to_string(o.shards));
  }
  if (o.window <= std::chrono::nanoseconds::zero()) throw std::invalid_argument("filter window must be > 0");

  // Both live generations may be at design load: each must meet per_gen so that
  // 1 - (1 - per_gen)^2 == fp_target. Computed as -expm1(log1p(-t)/2) to keep precision for tiny targets.
  const double per_gen = -std::expm1(0.5 * std::log1p(-o.fp_target));
  const double floor_fp = BestK(kBitsPerWord / kMaxBitsPerKey).second;
  if (floor_fp > per_gen) {
    const double floor_total = 1.0 - (1.0 - floor_fp) * (1.0 - floor_fp);
    throw std::invalid_argument("filter fp_target " + Str(o.fp_target) +
                                " is unreachable with 64-bit blocks: the lowest is ~" + Str(floor_total) + " at " +
                                Str(kMaxBitsPerKey) + " bits/key (kMaxBitsPerKey)");
  }
  // Smallest bits/key (largest keys per word) whose best k meets per_gen; FP is monotone in load.
  double lo = kMinBitsPerKey, hi = kMaxBitsPerKey;  // invariant: hi feasible
  if (BestK(kBitsPerWord / lo).second <= per_gen) {
    hi = lo;
  } else {
    for (int it = 0; it < 100 && hi - lo > 1e-7 * hi; ++it) {  // ~37 steps
      const double mid = std::sqrt(lo * hi);
      (BestK(kBitsPerWord / mid).second <= per_gen ? hi : lo) = mid;
    }
  }
  const double max_keys_per_word = kBitsPerWord / hi;

  FilterGeometry g{};
  g.shards = o.shards;
  g.capacity_per_shard = (o.capacity + o.shards - 1) / o.shards;
  const long double words = std::ceil(static_cast<long double>(g.capacity_per_shard) / max_keys_per_word);
  const long double bytes = words * 8.0L * 2.0L * o.shards;
  if (bytes > static_cast<long double>(kMaxFilterBytes)) {
    throw std::invalid_argument("filter would need " + Str(static_cast<double>(bytes)) + " bytes (capacity " +
                                std::to_string(o.capacity) + ", fp_target " + Str(o.fp_target) +
                                "), above kMaxFilterBytes " + std::to_string(kMaxFilterBytes));
  }
  g.words_per_generation_per_shard = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(words));
  const double keys_per_word =
      static_cast<double>(g.capacity_per_shard) / static_cast<double>(g.words_per_generation_per_shard);
  const auto [k, fp] = BestK(keys_per_word);
  g.k = k;
  g.generation_fp = fp;
  g.design_fp = 1.0 - (1.0 - fp) * (1.0 - fp);
  g.bits_per_key = kBitsPerWord / keys_per_word;
  g.memory_bytes = static_cast<std::size_t>(g.words_per_generation_per_shard) * 8 * 2 * g.shards;
  return g;
}

double WordFp(std::uint32_t set_bits, std::uint32_t k) {
  return static_cast<double>(Choose(static_cast<int>(set_bits), static_cast<int>(k)) /
                             Choose(kBitsPerWord, static_cast<int>(k)));
}

}  // namespace scangate
