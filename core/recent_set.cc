#include "core/recent_set.h"

#include <cstring>
#include <utility>

#include <absl/base/thread_annotations.h>
#include <absl/container/flat_hash_map.h>

#include "core/digest_hash.h"
#include "core/mutex.h"

namespace scangate {
namespace {

// Shards the set aims for at large capacities (64..127 after rounding the generations to table sizes):
// contention on a shard mutex is then ~1/64 of the I/O threads' lookups, and a rotation frees ~1/128 of
// the set at a time (~0.8 % of the keys forgotten at once).
constexpr std::uint32_t kTargetShards = 64;
// The smallest generation rounded to a table size (7/8 of 16 slots). Below 2 x kTargetShards x this many
// keys the set is one shard of capacity / 2 per generation (tests, tiny deployments).
constexpr std::uint64_t kMinRoundedGeneration = 14;

// Keys are stored forms (core/digest.h StoredDigest): bits 0..63 pick the shard, bits 64..127 hash inside it
// (core/digest_hash.h).
using Map = absl::flat_hash_map<Digest, std::int64_t, DigestHash, DigestEq>;

}  // namespace

struct alignas(64) RecentSet::Shard {
  mutable Mutex mu;
  Map current ABSL_GUARDED_BY(mu);
  Map previous ABSL_GUARDED_BY(mu);
  std::uint64_t rotations ABSL_GUARDED_BY(mu) = 0;

  // Adds an entry known to be in neither generation; rotates first when `current` is full.
  void AddLocked(const Digest& d, std::int64_t first_seen_us, std::uint64_t generation_capacity)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (current.size() >= generation_capacity) {
      previous.swap(current);
      current.clear();  // frees a large table (absl): the reserve below takes one allocation, no rehashes
      current.reserve(generation_capacity);
      ++rotations;
    }
    current.emplace(d, first_seen_us);
  }
};

RecentSet::RecentSet(std::uint64_t capacity) : capacity_(capacity) {
  if (capacity == 0) return;
  if (capacity >= 2 * kTargetShards * kMinRoundedGeneration) {
    // The largest 7 x 2^j <= capacity / (2 x kTargetShards), then as many shards as fit: 64..127 shards.
    const std::uint64_t max_generation = capacity / (2 * kTargetShards);
    std::uint64_t g = kMinRoundedGeneration;
    while (g * 2 <= max_generation) g *= 2;
    generation_capacity_ = g;
    shard_count_ = static_cast<std::uint32_t>(capacity / (2 * g));
  } else {
    generation_capacity_ = capacity / 2 == 0 ? 1 : capacity / 2;
    shard_count_ = 1;
  }
  shards_ = std::make_unique<Shard[]>(shard_count_);
}

RecentSet::~RecentSet() = default;

RecentSet::Shard& RecentSet::ShardOf(const Digest& d) const {
  std::uint64_t w;
  std::memcpy(&w, d.data(), sizeof w);
  const auto index = static_cast<std::uint32_t>((static_cast<unsigned __int128>(w) * shard_count_) >> 64);
  return shards_[index];
}

void RecentSet::InsertConcurrently(const Digest& full, std::int64_t first_seen_us, std::int64_t expired_before_us) {
  if (!enabled()) return;
  const Digest d = StoredDigest(full);
  Shard& s = ShardOf(d);
  const MutexLock lock(&s.mu);
  if (const auto it = s.current.find(d); it != s.current.end()) {
    if (it->second < expired_before_us) it->second = first_seen_us;  // an expired record, recorded anew
    return;
  }
  if (const auto it = s.previous.find(d); it != s.previous.end()) {
    // The first record wins (unless expired); refreshed into the current generation.
    if (it->second >= expired_before_us) first_seen_us = it->second;
    s.previous.erase(it);
  }
  s.AddLocked(d, first_seen_us, generation_capacity_);
}

std::optional<std::int64_t> RecentSet::FindConcurrently(const Digest& full) {
  if (!enabled()) return std::nullopt;
  const Digest d = StoredDigest(full);
  Shard& s = ShardOf(d);
  const MutexLock lock(&s.mu);
  if (const auto it = s.current.find(d); it != s.current.end()) return it->second;
  const auto it = s.previous.find(d);
  if (it == s.previous.end()) return std::nullopt;
  const std::int64_t first_seen_us = it->second;
  s.previous.erase(it);
  s.AddLocked(d, first_seen_us, generation_capacity_);
  return first_seen_us;
}

std::uint64_t RecentSet::size() const {
  std::uint64_t n = 0;
  for (std::uint32_t i = 0; i < shard_count_; ++i) {
    const MutexLock lock(&shards_[i].mu);
    n += shards_[i].current.size() + shards_[i].previous.size();
  }
  return n;
}

std::uint64_t RecentSet::rotations() const {
  std::uint64_t n = 0;
  for (std::uint32_t i = 0; i < shard_count_; ++i) {
    const MutexLock lock(&shards_[i].mu);
    n += shards_[i].rotations;
  }
  return n;
}

}  // namespace scangate
