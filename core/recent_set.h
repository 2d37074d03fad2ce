// RecentSet: an exact, bounded map digest -> first_seen (µs since the epoch) of keys this instance KNOWS are
// recorded (committed in PostgreSQL, accepted for write-behind, or durable in the journal). It lets a Bloom
// positive be answered "duplicate" at once instead of waiting for PostgreSQL behind the write backlog.
// Invariant: Find() reports only digests that were Insert()ed, with the first_seen they were inserted with;
// eviction only forgets (a forgotten digest then goes to PostgreSQL, which is always safe). No HTTP, no SQL.
// The server's use of it (what may enter, and when) is in server/verdict/service.h.
//
// A digest is known by its stored form (core/digest.h StoredDigest: its first 16 bytes, what PostgreSQL holds), so a
// digest the follower read back from PostgreSQL finds the entry of the full digest of its key and vice versa.
// Design. S shards (chosen by digest bits 0..63, multiply-shift), each an absl::flat_hash_map pair under
// its own mutex: a `current` generation that takes inserts and a `previous` one that is only read. When the
// current generation holds `generation_capacity` entries it becomes the previous one and the old previous
// one is dropped (like the Bloom filter's generations): memory is bounded and eviction is coarse but O(1)
// amortised. A hit in the previous generation moves the entry to the current one, so keys that keep being
// repeated survive rotations. Bound: size() <= 2 x shards x generation_capacity <= max(capacity, 2).
// Sizing: generation_capacity is 7/8 of a power of two (absl's growth limit of a table of 2^k - 1 slots), so
// a full generation fills its table to the maximum load factor; each slot is 40 bytes (digest + int64) plus
// one control byte, i.e. ~47 bytes per key of capacity when both generations are full (README: memory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>

#include "core/digest.h"

namespace scangate {

class RecentSet {
 public:
  // `capacity` = 0 disables the set (Insert does nothing, Find finds nothing). Otherwise at most
  // max(capacity, 2) entries are held. Allocates nothing until the first insert.
  // Threading: construction and destruction are not concurrent with anything else.
  explicit RecentSet(std::uint64_t capacity);
  ~RecentSet();
  RecentSet(const RecentSet&) = delete;
  RecentSet& operator=(const RecentSet&) = delete;

  // Records `d` as recorded with `first_seen_us`. An entry already held keeps its own (earlier) first_seen:
  // the first record of a digest wins — unless that entry is older than `expired_before_us` (the
  // de-duplication horizon's edge: its record has expired and the key was recorded anew), which is replaced.
  // May forget other entries (rotation). No-op when disabled.
  // Threading: safe to call concurrently with every member function (locks one shard).
  void InsertConcurrently(const Digest& d, std::int64_t first_seen_us,
                          std::int64_t expired_before_us = std::numeric_limits<std::int64_t>::min());
  // The first_seen `d` was inserted with, if it is still held; nullopt when it never was, or was forgotten.
  // A hit in the previous generation promotes the entry to the current one.
  // Threading: safe to call concurrently with every member function (locks one shard).
  std::optional<std::int64_t> FindConcurrently(const Digest& d);

  // Entries held now (for metrics): the shards are read one by one, not as a snapshot of one instant.
  // Threading: safe to call concurrently (locks each shard briefly).
  std::uint64_t size() const;
  // Threading: immutable after construction.
  bool enabled() const { return shard_count_ != 0; }
  std::uint64_t capacity() const { return capacity_; }                       // as given
  std::uint64_t bound() const { return 2 * shard_count_ * generation_capacity_; }  // max entries ever held
  std::uint32_t shards() const { return shard_count_; }
  std::uint64_t generation_capacity() const { return generation_capacity_; }  // entries per shard generation
  // Rotations of all shards so far (tests, metrics). Threading: safe to call concurrently.
  std::uint64_t rotations() const;

 private:
  struct Shard;
  Shard& ShardOf(const Digest& d) const;

  std::uint64_t capacity_;
  std::uint32_t shard_count_ = 0;
  std::uint64_t generation_capacity_ = 0;
  std::unique_ptr<Shard[]> shards_;
};

}  // namespace scangate
