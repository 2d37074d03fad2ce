// ShardedFilter's rotation (core/filter.h, "Aging" and "Trust after a shortened window"): the per-shard
// try-lock, clearing the retiring generation, the epoch bumps, the distrust deadline and the rotation counts;
// retirement by age (RotateExpired) and by hand (ForceRotate). Capacity rotations start here too, called
// from the probe path (core/filter.cc).
#include "core/filter.h"

#include <algorithm>
#include <stdexcept>

#include "core/filter_shard.h"

namespace scangate {

bool ShardedFilter::TryRotate(Shard& s, std::chrono::steady_clock::time_point now, RotationCause cause) {
  // relaxed: a hint that avoids bouncing the line with a failing exchange; the exchange decides.
  if (s.rotating.load(std::memory_order_relaxed)) return false;
  // acquire: pairs with the release unlock below so this rotator sees the previous rotation's writes.
  if (s.rotating.exchange(true, std::memory_order_acquire)) return false;
  const std::int64_t now_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  // relaxed: written only by lock holders, ordered by the lock's acquire/release. The birth of the active
  // generation is the time the generation this rotation clears stopped receiving inserts (T_{r-1}).
  const std::int64_t birth_ns = s.birth_ns.load(std::memory_order_relaxed);
  bool go = true;
  if (cause == RotationCause::kWindow && now_ns - birth_ns < window_.count()) go = false;
  // relaxed: trigger count only.
  if (cause == RotationCause::kCapacity && s.inserted.load(std::memory_order_relaxed) < geometry_.capacity_per_shard) {
    go = false;
  }
  if (go) {
    // relaxed: only lock holders store the epoch; the lock orders those stores.
    const std::uint64_t e = s.epoch.load(std::memory_order_relaxed);  // even: no rotation in progress
    std::atomic<std::uint64_t>* retiring = s.gen[((e >> 1) + 1) & 1];
    // Clearing a generation that was active (e >= 2) less than a window after it retired forgets keys
    // observed within the window: distrust negatives until they would have aged out ("Trust after a
    // shortened window" in filter.h). relaxed (load and store): only lock holders raise it (observers
    // only reset an expired value to 0); the store is published by the seq_cst epoch stores below.
    if (e >= 2 && now_ns - birth_ns < window_.count()) {
      const std::int64_t until = birth_ns + window_.count();
      if (until > s.distrust_until_ns.load(std::memory_order_relaxed)) {
        s.distrust_until_ns.store(until, std::memory_order_relaxed);
      }
    }
    s.epoch.store(e + 1);  // seq_cst: "rotation started", ordered before the clear (see filter.h)
    const std::uint64_t W = geometry_.words_per_generation_per_shard;
    for (std::uint64_t w = 0; w < W; ++w) {
      // release: an observer that reads this zero synchronizes with it, so its closing epoch load sees
      // at least e + 1 (stored before this clear) and that observer retries; see filter.h.
      retiring[w].store(0, std::memory_order_release);
    }
    // relaxed: trigger count only; in-flight inserts of the old epoch may still add a few.
    s.inserted.store(0, std::memory_order_relaxed);
    s.epoch.store(e + 2);  // seq_cst: the bump observers compare against (see filter.h)
    // The clock read after the bump bounds the retired generation's last insert (T_r in filter.h); never
    // before the caller's `now`. relaxed: read under the lock (TryRotate) or as telemetry (Stats).
    s.birth_ns.store(std::max(now_ns, NowNs()), std::memory_order_relaxed);
    // relaxed: only lock holders write the count (no lost update, no locked add); readers want a count.
    auto& count = s.rotations_by_cause[static_cast<int>(cause)];
    count.store(count.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  // release: publish this rotation's writes to the next lock holder.
  s.rotating.store(false, std::memory_order_release);
  return go;
}

void ShardedFilter::RotateExpired(std::chrono::steady_clock::time_point now) {
  const std::int64_t now_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  for (std::uint32_t i = 0; i < geometry_.shards; ++i) {
    Shard& s = shards_[i];
    // relaxed: a pre-check only; TryRotate re-checks the age under the lock.
    if (now_ns - s.birth_ns.load(std::memory_order_relaxed) >= window_.count()) {
      TryRotate(s, now, RotationCause::kWindow);
    }
  }
}

bool ShardedFilter::ForceRotate(std::uint32_t shard, std::chrono::steady_clock::time_point now) {
  if (shard >= geometry_.shards) throw std::out_of_range("ForceRotate: no such shard");
  return TryRotate(shards_[shard], now, RotationCause::kForced);
}

}  // namespace scangate
