// ShardedFilter::Shard: one shard's epoch, its two generations, its trust deadline and its counters. Internal
// to the filter: included only by core/filter*.cc (the probe path, rotation, telemetry), so that the three
// share one definition. Invariant: the epoch is 2 x rotations completed (+1 mid-rotation) and generation
// ((epoch >> 1) & 1) is the active one; only the holder of `rotating` writes epoch, birth, distrust raises and
// the per-cause counts (protocol and memory orders: core/filter.h). Tested through ShardedFilter
// (tests/core/filter_test.cc, filter_concurrency_test.cc).
#pragma once

#include <atomic>
#include <cstdint>

#include "core/filter.h"

namespace scangate::filter_detail {

inline constexpr int kBitsPerWord = 64;  // one register-blocked word per key per generation

}  // namespace scangate::filter_detail

namespace scangate {

// One shard. The first cache line is read by every operation and written only by rotations; the second
// holds the counters that inserts write, so inserts do not invalidate the line every reader needs.
struct alignas(64) ShardedFilter::Shard {
  std::atomic<std::uint64_t> epoch{0};          // 2 x rotations, +1 mid-rotation; gen ((epoch>>1)&1) active
  std::atomic<std::uint64_t>* gen[2] = {};      // immutable after construction
  // Filter-clock ns until which "new" verdicts are kDefinitelyNewUntrusted; 0 = trusted. Raised by rotations
  // (under the try-lock), reset to 0 lazily by observers (CAS). Read only by observations about to say "new".
  std::atomic<std::int64_t> distrust_until_ns{0};
  alignas(64) std::atomic<std::uint64_t> inserted{0};  // keys that set a bit in the active generation
  std::atomic<std::int64_t> birth_ns{0};        // steady_clock ns of the active generation's birth
  std::atomic<bool> rotating{false};            // try-lock serialising rotations of this shard
  std::atomic<std::uint64_t> rotations_by_cause[3] = {};  // indexed by RotationCause; written under the try-lock
};

}  // namespace scangate
