// ShardedFilter's telemetry (core/filter.h, ShardStats and ShardRotations): per-shard fill and FP estimated
// from sampled words, insert counts with the pending per-thread counts folded in, rotation counts, epochs.
// Read-only: nothing here changes what the filter answers.
#include "core/filter.h"

#include <algorithm>
#include <bit>
#include <span>
#include <stdexcept>

#include "core/filter_insert_counts.h"
#include "core/filter_shard.h"

namespace scangate {

ShardRotations ShardedFilter::RotationsOf(std::uint32_t shard) const {
  if (shard >= geometry_.shards) throw std::out_of_range("RotationsOf: no such shard");
  const Shard& s = shards_[shard];
  ShardRotations r;
  // relaxed (all): counters and a deadline for reporting; nothing else is read through them.
  r.capacity = s.rotations_by_cause[static_cast<int>(RotationCause::kCapacity)].load(std::memory_order_relaxed);
  r.window = s.rotations_by_cause[static_cast<int>(RotationCause::kWindow)].load(std::memory_order_relaxed);
  r.forced = s.rotations_by_cause[static_cast<int>(RotationCause::kForced)].load(std::memory_order_relaxed);
  const std::int64_t until = s.distrust_until_ns.load(std::memory_order_relaxed);
  if (until != 0) r.distrust_until = std::chrono::steady_clock::time_point(std::chrono::nanoseconds(until));
  return r;
}

std::uint64_t ShardedFilter::EpochOf(std::uint32_t shard) const {
  if (shard >= geometry_.shards) throw std::out_of_range("EpochOf: no such shard");
  return shards_[shard].epoch.load();
}

std::vector<ShardStats> ShardedFilter::Stats() const {
  const std::uint64_t W = geometry_.words_per_generation_per_shard;
  const std::uint64_t samples = std::min(W, kStatsSampleWords);
  const std::int64_t now_ns = NowNs();
  // Insert counts still pending in live threads (see "Insert counting"), folded into `inserted`.
  std::vector<std::uint64_t> pending(geometry_.shards, 0);
  if (count_batch_ > 1) filter_detail::AddPendingInsertCounts(id_, pending);
  std::vector<ShardStats> out;
  out.reserve(geometry_.shards);
  for (std::uint32_t i = 0; i < geometry_.shards; ++i) {
    const Shard& s = shards_[i];
    const std::uint64_t e = s.epoch.load();
    const std::uint64_t gnum = e >> 1;
    double fp[2] = {0, 0};
    std::uint64_t active_bits = 0;
    for (int g = 0; g < 2; ++g) {
      const std::atomic<std::uint64_t>* words = s.gen[(gnum + g) & 1];  // g == 0: active
      double sum = 0;
      for (std::uint64_t j = 0; j < samples; ++j) {
        const std::uint64_t w = static_cast<std::uint64_t>((static_cast<unsigned __int128>(j) * W) / samples);
        // relaxed: telemetry; any recent value of each word will do.
        const int pop = std::popcount(words[w].load(std::memory_order_relaxed));
        sum += pop_fp_[pop];
        if (g == 0) active_bits += static_cast<std::uint64_t>(pop);
      }
      fp[g] = sum / static_cast<double>(samples);
    }
    ShardStats st;
    st.inserted = s.inserted.load(std::memory_order_relaxed) + pending[i];  // relaxed: telemetry
    st.fill_ratio = static_cast<double>(active_bits) / static_cast<double>(samples * filter_detail::kBitsPerWord);
    st.age_seconds = static_cast<double>(now_ns - s.birth_ns.load(std::memory_order_relaxed)) * 1e-9;  // relaxed: telemetry
    st.estimated_fp = 1.0 - (1.0 - fp[0]) * (1.0 - fp[1]);
    st.rotations = gnum;
    const ShardRotations rot = RotationsOf(i);
    st.capacity_rotations = rot.capacity;
    st.window_rotations = rot.window;
    st.distrust_until = rot.distrust_until;
    out.push_back(st);
  }
  return out;
}

}  // namespace scangate
