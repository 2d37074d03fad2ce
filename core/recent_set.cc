#include "core/recent_set.h"

#include <array>
#include <cstring>
#include <optional>
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

// The map's value: 25 bytes of alignment 1, so that a slot is 16 + 25 = 41 bytes (a struct of int64 + state +
// record pads to 32 bytes: a 48-byte slot, +17 % of memory). first_seen is copied in and out of its bytes.
class Value {
 public:
  Value(std::int64_t first_seen_us, const Recorder& r) : state_(r.state), request_(r.request) {
    std::memcpy(first_seen_.data(), &first_seen_us, sizeof first_seen_us);
    if (state_ != Recorder::State::kRequest) request_ = {};
  }
  std::int64_t first_seen_us() const {
    std::int64_t t;
    std::memcpy(&t, first_seen_.data(), sizeof t);
    return t;
  }
  Recorder recorder() const { return Recorder{state_, request_}; }
  RecentSet::Entry entry() const { return RecentSet::Entry{first_seen_us(), recorder()}; }

 private:
  std::array<std::uint8_t, 8> first_seen_;
  Recorder::State state_;
  RequestRecord request_;
};
static_assert(sizeof(Value) == 25 && alignof(Value) == 1, "the recent set's memory per key assumes a packed value");

// The value to hold after a fact (first_seen_us, r, fact) about a digest whose held value is `held`
// (RecentSet::Fact).
Value Merge(const Value& held, std::int64_t first_seen_us, const Recorder& r, std::int64_t expired_before_us,
            RecentSet::Fact fact) {
  const std::int64_t t = held.first_seen_us();
  if (t < expired_before_us) return Value(first_seen_us, r);  // an expired record, recorded anew
  if (fact == RecentSet::Fact::kInsertedNow && first_seen_us > t) return Value(first_seen_us, r);  // taken over
  if (first_seen_us == t && !held.recorder().known() && r.known()) return Value(t, r);  // the same row, now known
  return held;  // the first record wins
}

// The map's key: a digest's stored form (core/digest.h StoredDigest), its first kStoredDigestBytes bytes, and no
// more: the other 16 bytes of a Digest are zero in every key the set meets, so keeping them cost 16 of a slot's 57
// bytes (28 % of the set's memory) and a cache line more per probe now and then.
using Key = std::array<std::uint8_t, kStoredDigestBytes>;

Key KeyOf(const Digest& d) {
  Key k;
  std::memcpy(k.data(), d.data(), k.size());
  return k;
}

// Bits 0..63 pick the shard (RecentSet::ShardOf), bits 64..127 hash inside it (core/digest_hash.h, which takes the
// 16-byte prefix as it takes a whole digest).
using Map = absl::flat_hash_map<Key, Value, DigestHash, DigestEq>;
static_assert(sizeof(Map::slot_type) == 41, "the recent set's memory per key assumes a 41-byte slot");

}  // namespace

struct alignas(64) RecentSet::Shard {
  mutable Mutex mu;
  Map current ABSL_GUARDED_BY(mu);
  Map previous ABSL_GUARDED_BY(mu);
  std::uint64_t rotations ABSL_GUARDED_BY(mu) = 0;

  // Makes room for one more entry in `current`: a full generation becomes the previous one (the old previous is
  // dropped) before an insert could grow its table. Callers search `previous` first.
  void RoomLocked(std::uint64_t generation_capacity) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (current.size() < generation_capacity) return;
    previous.swap(current);
    current.clear();  // frees a large table (absl): the reserve below takes one allocation, no rehashes
    current.reserve(generation_capacity);
    ++rotations;
  }

  // `k`'s entry in `current` (taken from `previous` if it is there; made from `fresh` if in neither), with
  // `inserted` true when it was in neither. While `current` has room: one probe of each table for a key seen for
  // the first time (the writers' case: every committed key) instead of find, find and emplace, and the two
  // tables' control bytes are fetched at the same time (prefetch), so the two cache misses of a new key overlap.
  // A full `current` is rotated only after `previous` was searched (a rotation drops it).
  std::pair<Map::iterator, bool> TakeLocked(const Key& k, const Value& fresh, std::uint64_t generation_capacity)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    previous.prefetch(k);
    if (current.size() >= generation_capacity) {  // an insert would grow the table: rotate first, if it is one
      if (const auto it = current.find(k); it != current.end()) return {it, false};
      std::optional<Value> held;
      if (const auto p = previous.find(k); p != previous.end()) {
        held = p->second;
        previous.erase(p);
      }
      RoomLocked(generation_capacity);
      return {current.emplace(k, held.value_or(fresh)).first, !held.has_value()};
    }
    auto [it, inserted] = current.try_emplace(k, fresh);
    if (!inserted) return {it, false};
    if (const auto p = previous.find(k); p != previous.end()) {
      it->second = p->second;
      previous.erase(p);
      return {it, false};
    }
    return {it, true};
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

void RecentSet::InsertConcurrently(const Digest& full, std::int64_t first_seen_us, const Recorder& recorder,
                                   std::int64_t expired_before_us, Fact fact) {
  if (!enabled()) return;
  const Key k = KeyOf(full);
  Shard& s = ShardOf(full);
  const Value fresh(first_seen_us, recorder);
  const MutexLock lock(&s.mu);
  // Held in either generation: merged (and refreshed into the current one); in neither: `fresh` is the entry.
  const auto [it, inserted] = s.TakeLocked(k, fresh, generation_capacity_);
  if (!inserted) it->second = Merge(it->second, first_seen_us, recorder, expired_before_us, fact);
}

std::optional<RecentSet::Entry> RecentSet::FindConcurrently(const Digest& full) {
  if (!enabled()) return std::nullopt;
  const Key k = KeyOf(full);
  Shard& s = ShardOf(full);
  const MutexLock lock(&s.mu);
  if (const auto it = s.current.find(k); it != s.current.end()) return it->second.entry();
  const auto it = s.previous.find(k);
  if (it == s.previous.end()) return std::nullopt;
  const Value v = it->second;
  s.previous.erase(it);
  s.RoomLocked(generation_capacity_);
  s.current.emplace(k, v);
  return v.entry();
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
