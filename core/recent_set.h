// RecentSet: an exact, bounded map digest -> (first_seen µs since the epoch, the request that recorded it) of keys
// this instance KNOWS are recorded (committed in PostgreSQL, accepted for write-behind, or durable in the journal).
// It lets a Bloom positive be answered "duplicate" at once instead of waiting for PostgreSQL behind the write
// backlog, and (Idempotency-Key, issue 34) a retry of the request that recorded the key be told apart from a
// second scan without asking PostgreSQL.
// Invariant: Find() reports only digests that were Insert()ed, with the first_seen and recorder of the first
// record inserted (or of a record that replaced an expired one, or a newer row PostgreSQL inserted); a recorder is
// only ever known when an insert said so — never guessed, never a later request's. Eviction only forgets (a
// forgotten digest then goes to PostgreSQL, which is always safe). No HTTP, no SQL. The server's use of it (what
// may enter, and when) is in server/verdict/service.h.
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
// a full generation fills its table to the maximum load factor; each slot is 41 bytes (stored digest 16 +
// first_seen 8 + recorder state 1 + request record 16, packed to alignment 1) plus one control byte, i.e. ~48 bytes
// per key of capacity when both generations are full (docs/design.md "The recent set": measured by
// bench/core/recent_set_bench).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>

#include "core/digest.h"

namespace scangate {

// A request's idempotency record (Idempotency-Key, issue 34; storage::RequestId is this type): 16 bytes of a keyed
// digest of the caller and its idempotency key, compared whole.
using RequestRecord = std::array<std::uint8_t, 16>;

// What the recent set knows of the request that recorded a key. kNone: a request without an idempotency record
// recorded it; kRequest: the request of `request` did; kUnknown: the entry's source did not carry the recorder (a
// follower's row, a duplicate whose row's record was not read). Only a known recorder can tell a retry (the
// recording request again) from a second scan; an unknown one cannot answer a request that has a record.
struct Recorder {
  enum class State : std::uint8_t { kUnknown = 0, kNone = 1, kRequest = 2 };
  State state = State::kUnknown;
  RequestRecord request{};  // meaningful only in kRequest

  static Recorder Unknown() { return {}; }
  // The recorder of a row written by a request with record `r` (none: without one): known.
  static Recorder Of(const std::optional<RequestRecord>& r) {
    return r ? Recorder{State::kRequest, *r} : Recorder{State::kNone, {}};
  }
  bool known() const { return state != State::kUnknown; }
  // True only when known to be the request of `r` (an unknown recorder is never a match, nor a mismatch).
  bool Is(const RequestRecord& r) const { return state == State::kRequest && request == r; }
  bool operator==(const Recorder& o) const {
    return state == o.state && (state != State::kRequest || request == o.request);
  }
};

class RecentSet {
 public:
  // What an insert reports (how it meets an entry already held for its digest within the horizon):
  // kRecorded — the digest is recorded with this first_seen (committed, accepted for write-behind, durable in the
  //   journal, or read back from PostgreSQL): a held entry keeps its own first_seen and recorder (the first
  //   record wins), except that an entry whose recorder is unknown learns it from a record of the same first_seen
  //   (the same row, read again).
  // kInsertedNow — PostgreSQL has just inserted the row, or taken an expired one over, with this first_seen and
  //   recorder: it is the row PostgreSQL holds now, so a held entry with an earlier first_seen (a row taken over,
  //   expired by PostgreSQL's clock though not yet by this one's) is replaced; a later one is kept (a stale report).
  enum class Fact : std::uint8_t { kRecorded, kInsertedNow };

  struct Entry {
    std::int64_t first_seen_us;
    Recorder recorder;
  };

  // `capacity` = 0 disables the set (Insert does nothing, Find finds nothing). Otherwise at most
  // max(capacity, 2) entries are held. Allocates nothing until the first insert.
  // Threading: construction and destruction are not concurrent with anything else.
  explicit RecentSet(std::uint64_t capacity);
  ~RecentSet();
  RecentSet(const RecentSet&) = delete;
  RecentSet& operator=(const RecentSet&) = delete;

  // Records `d` as recorded with `first_seen_us` by `recorder` (Fact above says how it meets a held entry). An
  // entry older than `expired_before_us` (the de-duplication horizon's edge: its record has expired and the key
  // was recorded anew) is replaced whatever the fact. May forget other entries (rotation). No-op when disabled.
  // Threading: safe to call concurrently with every member function (locks one shard).
  void InsertConcurrently(const Digest& d, std::int64_t first_seen_us, const Recorder& recorder,
                          std::int64_t expired_before_us = std::numeric_limits<std::int64_t>::min(),
                          Fact fact = Fact::kRecorded);
  // The entry of `d` if it is still held; nullopt when it never was, or was forgotten. A hit in the previous
  // generation promotes the entry to the current one.
  // Threading: safe to call concurrently with every member function (locks one shard).
  std::optional<Entry> FindConcurrently(const Digest& d);

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
