// Filter geometry: the options of a ShardedFilter (capacity, FP target, window, shards) and the shape derived
// from them (words per generation per shard, bits set per key k) under the register-blocked Bloom model.
// Invariant: a geometry returned by FilterGeometry::For meets the FP target with both live generations at
// design load, with the fewest words for which some k does; invalid options throw instead.
// Use it to size a filter before building one (core/filter.h builds its own from the options); pure functions,
// no state. Tested in tests/core/filter_geometry_test.cc.
//
// Sizing (the blocked model, FilterGeometry::For). Keys per word ~ Poisson(lambda). For a query with k
// distinct bits against a word holding j other keys of k distinct bits each, inclusion-exclusion gives
//   P(all k set | j) = sum_{i=0..k} (-1)^i C(k,i) (C(64-i,k)/C(64,k))^j
// and FP(lambda,k) = sum_j Pois(j;lambda) P(.|j) = sum_i (-1)^i C(k,i) exp(-lambda (1 - C(64-i,k)/C(64,k)))
// (the Poisson sum taken in closed form; tests check it against the explicit sum). Two generations are
// live and each may be at design load, so each must meet per_gen = 1 - sqrt(1 - fp_target). We pick the
// largest lambda (fewest words) for which some k meets per_gen, then the best k at the rounded geometry.
// Reference: 8 bits/key k=4 3.21 %, 12 k=5 0.959 %, 16 k=6 0.367 %, 20 k=6 0.169 % (per generation).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>

namespace scangate {

// Limits of the geometry, with units.
inline constexpr std::uint32_t kMaxShards = 4096;          // shards; invalid_argument above
inline constexpr std::uint32_t kMaxBitsPerWordK = 16;      // k (bits set per key); the sizing search range
inline constexpr double kMaxBitsPerKey = 256.0;            // bits per key per generation; targets needing more
                                                           // are rejected (64-bit blocks floor out: ~1.6e-7 per
                                                           // generation at 256 bits/key, i.e. ~3.2e-7 overall)
inline constexpr double kMinBitsPerKey = 1.0 / 64.0;       // bits per key (64 keys per word): sizing search bound
inline constexpr std::size_t kMaxFilterBytes = std::size_t{64} << 30;  // 64 GiB; invalid_argument above

struct FilterOptions {
  std::uint64_t capacity = 10'000'000;        // expected distinct keys per window (whole filter, all shards)
  double fp_target = 0.01;                    // FP target of a query against the whole filter (all live generations)
  std::chrono::nanoseconds window = std::chrono::hours(24);  // a generation retires after this long (or at capacity)
  std::uint32_t shards = 64;                  // power of two
  // The filter's clock (rotation times, distrust, ages); empty = std::chrono::steady_clock::now. Tests inject a
  // fake one. Called by rotations, by observations of a distrusting shard and by Stats(), from any thread: it
  // must be thread-safe and monotone.
  std::function<std::chrono::steady_clock::time_point()> clock;
};

struct FilterGeometry {                       // derived by FilterGeometry::For(options); throws std::invalid_argument
  std::uint32_t shards;
  std::uint64_t words_per_generation_per_shard;
  std::uint32_t k;
  std::uint64_t capacity_per_shard;           // keys per generation per shard before capacity rotation
  double bits_per_key;                        // per generation
  double design_fp;                           // modelled FP of a whole-filter query at design load (all live gens)
  std::size_t memory_bytes;                   // all shards, all generations
  // Modelled FP of one generation at design load (design_fp = 1 - (1 - generation_fp)^2).
  double generation_fp;
  // Throws std::invalid_argument naming the offending option. Threading: pure function.
  static FilterGeometry For(const FilterOptions&);
};

// Blocked-model FP of one query against one generation with `keys_per_word` (Poisson mean) keys per
// 64-bit word, each key setting k distinct bits. Exact for the model (closed-form Poisson sum).
// Threading: pure function.
double BlockedBloomFp(double keys_per_word, std::uint32_t k);
// Standard (unblocked) Bloom approximation (1 - e^{-k/b})^k at b bits per key. Threading: pure function.
double StandardBloomFp(double bits_per_key, std::uint32_t k);
// FP of a query with k distinct bits against one 64-bit word that has `set_bits` bits set (uniformly placed):
// C(set_bits, k) / C(64, k), 0 when set_bits < k. ShardStats::estimated_fp averages it over sampled words.
// Threading: pure function.
double WordFp(std::uint32_t set_bits, std::uint32_t k);

}  // namespace scangate
