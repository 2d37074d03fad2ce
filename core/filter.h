// ShardedFilter: a lock-free, sharded, rotating, register-blocked Bloom filter over 32-byte digests.
// Invariant: a digest observed while its generation is active is reported kPossiblySeen for at least one
// full window afterwards (no false negatives inside the window); among concurrent observers of one digest
// at most one is told kDefinitelyNew. A positive is only "possibly": the exact store decides duplicates.
// Use one instance per process in front of the exact store; the digest comes from core/digest.h.
// Files: the probe path in core/filter.cc, rotation in filter_rotation.cc, telemetry in filter_stats.cc, sizing in
// filter_geometry.h; the filter's internals in filter_shard.h and filter_insert_counts.h. Tested as a whole by
// tests/core/filter_test.cc and filter_concurrency_test.cc (sizing: filter_geometry_test.cc).
//
// Design (the whole idea lives here):
//
// Layout. The filter has S shards (power of two, chosen by digest bits 64..127, top bits). Each shard has
// two generations of W 64-bit words (std::atomic<uint64_t>). A digest maps to ONE word per generation
// (bits 0..63, multiply-shift range reduction: word = (h0 * W) >> 64, no power-of-two requirement) and
// sets k DISTINCT bits in it (6-bit chunks of two splitmix64 outputs of digest bits 0..127 mixed, duplicates skipped;
// when 20 chunks do not yield k distinct positions a splitmix64 stream seeded from them continues
// deterministically). Only bits 0..127 — the stored form PostgreSQL keeps (core/digest.h StoredDigest) — decide a
// digest's place, so a digest read back from PostgreSQL sets exactly the bits its key's full digest probes.
// One cache line per key per generation: a query costs one (possibly missing) load per live generation.
//
// Sizing (the blocked model, FilterGeometry::For): core/filter_geometry.h.
//
// Aging. Each shard has an epoch: 2 x (rotations completed), plus 1 while a rotation is in progress.
// Generation number g = epoch >> 1; generation (g & 1) is active, the other one is previous. Inserts go to
// the active one; queries consult both. A generation retires when its shard's inserted count reaches
// capacity_per_shard (the inserting thread that wins the shard's try-lock rotates inline) or when
// RotateExpired(now) finds it older than the window. Rotation (under the try-lock): mark it started
// (epoch 2g -> 2g+1), clear the previous generation's words (release stores), record the new birth
// time, then bump the epoch (2g+1 -> 2g+2). The previous generation becomes the empty active one; the old
// active one becomes previous. The "started" mark lets an observer tell that the previous generation may be
// half-cleared (it then answers kPossiblySeen) instead of trusting a torn previous generation.
//
// Observe protocol. e0 = epoch (seq_cst); prefetch the previous word; load the active word; if the k bits
// are not all set, fetch_or (seq_cst); if that set the last missing bit, load the previous word (seq_cst);
// e1 = epoch (seq_cst); the fetch_or is a CAS loop seeded by the load. If e1 != e0 the operation
// overlapped a rotation step: it is repeated against the new active generation and reports kPossiblySeen
// (conservative: it only costs an exact lookup). With e1 == e0 the verdict is kDefinitelyNew iff e0 is
// even, this fetch_or set the last missing bit in the active word and the previous word lacks some bit.
// Why seq_cst on the epoch and the fetch_or: with one total order S over those operations, an observer
// that read epoch e after its fetch_or into generation g = e >> 1 has that fetch_or before the store of
// 2g+2 in S, and any observer that later reads 2g+2 and then loads generation g (now previous) comes after
// that store in S, so its seq_cst load sees the bits (coherence with S). Acquire/release would not order
// the observer's fetch_or before its own later epoch load (the store-buffering shape), so a query that
// saw the new epoch could miss a fetch_or that its observer reported with the old epoch.
// Why release on the clearing stores: if a fetch_or or load reads a cleared value (or an RMW chain headed
// by it), it synchronizes with the clear, so the "started" epoch store that precedes the clear
// happens-before the observer's closing epoch load, which therefore sees the change and retries. Hence an
// operation that passes the e1 == e0 check never saw, and (for a fetch_or) precedes in its word's
// modification order, the next clear of its generation. Word loads on the observe path are seq_cst too
// (a plain load on x86), so a load that finds the bits already set is ordered after the fetch_or that set
// them in S.
//
// Proof that an observed key survives at least one full window. Let an observation of key x finish its
// final attempt with e0 == e1 == e, g = e >> 1. Its fetch_or (or the seq_cst load that found the bits set)
// put x's bits in generation g & 1, ordered in S before the store of 2g+2. That generation is next cleared
// by the rotation that starts with the store of 2g+3, and by the release/acquire argument that clear
// cannot precede our fetch_or in the word's modification order. Queries with a stable epoch 2g or 2g+1
// see the generation as active; queries with stable epoch 2g+2 see it as previous, untouched, and by the
// seq_cst argument see the bits. So x is found until the rotation g+1 -> g+2 starts. That rotation happens
// no earlier than the birth of generation g+1 plus the window (time-based retirement). Generation g+1 is
// born by the rotation g -> g+1, whose closing bump 2g+2 follows x's fetch_or in S; its birth is the
// filter clock read after that bump (and not before the rotation's `now`), so it is no earlier than x's
// observation. Therefore x survives at least one full window under time-based retirement. Capacity
// retirements can make a generation shorter than the window; see "Trust after a shortened window" for how
// the filter then stops vouching for its negatives.
// Corollary used by the tests: two "definitely new" verdicts (kDefinitelyNew or kDefinitelyNewUntrusted) for
// one digest need >= 2 completed rotations of its shard between them.
//
// Trust after a shortened window. Each rotation records, as the new active generation's birth T, the
// filter clock read after its closing epoch bump: the old active generation (now previous) receives no
// insert after that bump (an insert that passes the e1 == e0 check is ordered before it in S), so T bounds
// the insert times of every key it holds. The rotation r at time now_r clears the generation retired by
// rotation r-1 at T_{r-1} (the current birth); its keys were observed at or before T_{r-1}. If
// now_r >= T_{r-1} + window (every time-based rotation: RotateExpired requires exactly that age) nothing
// younger than the window is forgotten. Otherwise (a capacity rotation, or ForceRotate, under overload)
// keys observed within the last window may be forgotten, so the shard distrusts its negatives until
//   distrust_until = T_{r-1} + window        (kept as a maximum over such rotations)
// An observation that would be kDefinitelyNew reads distrust_until after its opening epoch load and, while
// the filter clock is before it, answers kDefinitelyNewUntrusted instead: the caller must then ask the
// exact store. The first rotation of a shard (epoch 0) clears a generation that was never active and
// shortens nothing. Why it is exact: a key x last observed at t_x <= T_{r-1} and forgotten by rotation r is
// answered "trusted new" only at clock t >= T_{r-1} + window >= t_x + window, i.e. outside its window.
// Why the distrust store is seen: it is made (relaxed, under the rotation try-lock) before the rotation's
// "started" epoch store; an observer whose opening seq_cst epoch load reads the completed epoch (or any
// later one) synchronizes with the rotator's bump, which is sequenced after the distrust store, so its
// later relaxed load of distrust_until reads that value or a later one (read-write coherence). Observers
// that read the odd "started" epoch never answer "new". distrust_until goes back to 0 lazily: an observer
// that finds the clock past it clears it with a CAS (a failed CAS means a rotation raised it), so in steady
// state the observe path reads no clock. Rotations are counted per shard and cause (capacity, window,
// forced) so the server can report them.
//
// Insert counting. A locked fetch_add per insert would double the cost of an L2-resident observe (two
// locked instructions at ~7 ns each on the benchmark machine). Each thread instead accumulates up to
// count_batch = clamp(capacity_per_shard / 256, 1, 16) inserts per shard in a thread_local array and
// publishes them with one fetch_add. A capacity rotation can therefore fire late by at most
// (count_batch - 1) x threads keys per shard (<= threads/256 of the capacity). Stats() folds the counts
// still pending in live threads into ShardStats::inserted (each thread's counts sit in a registry that
// only Stats() and thread start/exit lock), so telemetry shows every insert: three new keys read as
// three. Counts pending in a thread that exits or switches to another filter instance are dropped.
//
// Telemetry is per shard (alignas(64), no counter shared by all threads); Stats() estimates fill and FP
// from a sample of words (see ShardStats).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "core/digest.h"
#include "core/filter_geometry.h"

namespace scangate {

// What an observation found. kDefinitelyNewUntrusted: the key was not in the filter, but its shard has
// forgotten keys observed within the last window (a capacity rotation, see "Trust after a shortened window"),
// so the negative must be confirmed by the exact store. Both "new" values are given to at most one of
// concurrent observers of a digest, exactly like kDefinitelyNew alone was.
enum class Probe : std::uint8_t { kDefinitelyNew, kPossiblySeen, kDefinitelyNewUntrusted };

// Why a shard rotated. kForced: ForceRotate (tests, operations).
enum class RotationCause : std::uint8_t { kCapacity, kWindow, kForced };

// One shard's telemetry. fill_ratio and estimated_fp come from a sample of up to kStatsSampleWords evenly
// spaced words per generation (exact when the shard has fewer words). estimated_fp is the mean over sampled
// words of C(popcount, k) / C(64, k) for each live generation, combined as 1 - (1-a)(1-p): for keys
// hashed uniformly this is the expected FP of a fresh query; validated in filter_test against a measured
// rate (within 10 % relative at design load). Used for metrics, never for decisions.
struct ShardStats {
  std::uint64_t inserted;      // keys that set a bit in the active generation since it became active,
                               // pending per-thread counts included (see "Insert counting")
  double fill_ratio;           // fraction of set bits in the active generation
  double age_seconds;          // age of the active generation
  double estimated_fp;         // FP of a query against this shard (both generations), from fill
  std::uint64_t rotations;     // rotations of this shard since construction
  std::uint64_t capacity_rotations;  // of which triggered by the active generation reaching capacity
  std::uint64_t window_rotations;    // of which triggered by age (RotateExpired)
  // Until when this shard's negatives are kDefinitelyNewUntrusted; time_point{} (epoch) = trusted now.
  std::chrono::steady_clock::time_point distrust_until;
};

// Rotation counters and trust state of one shard, cheap to read (no word sampling), for a poller.
struct ShardRotations {
  std::uint64_t capacity = 0, window = 0, forced = 0;
  std::chrono::steady_clock::time_point distrust_until;  // time_point{} = trusted (may lag: cleared lazily)
};

inline constexpr std::uint64_t kStatsSampleWords = 4096;  // words per generation per shard read by Stats()

class ShardedFilter {
 public:
  // Allocates 2 generations x shards x words (zeroed). Throws std::invalid_argument with a clear message.
  // Threading: construction and destruction are not concurrent with anything else.
  explicit ShardedFilter(const FilterOptions&);
  ~ShardedFilter();
  ShardedFilter(const ShardedFilter&) = delete;
  ShardedFilter& operator=(const ShardedFilter&) = delete;

  // Atomic test-and-set: among concurrent observers of one digest, at most one gets a "new" verdict
  // (kDefinitelyNew, or kDefinitelyNewUntrusted while its shard distrusts its negatives; exactly one unless
  // the key is a false positive or an observation overlapped a rotation). May rotate the shard inline when
  // the active generation reaches capacity. Threading: safe to call concurrently with every member
  // function; lock-free except for the inline rotation, which only the try-lock winner performs.
  Probe ObserveConcurrently(const Digest& d);
  // Same verdicts as calling ObserveConcurrently on each digest in order; prefetches the words of a chunk
  // of digests first, then does the atomic ops. Throws std::invalid_argument if out.size() < in.size().
  // Threading: as above.
  void ObserveBatchConcurrently(std::span<const Digest> in, std::span<Probe> out);
  // Warm load: sets the digest's bits in the active generation, no verdict. Counts towards capacity.
  // Threading: safe to call concurrently with every member function.
  void InsertConcurrently(const Digest& d);
  // Batch form of InsertConcurrently with the same prefetching. Threading: as above.
  void InsertBatchConcurrently(std::span<const Digest> in);
  // Adds the calling thread's pending insert counts for this filter to their shards now (see "Insert
  // counting"): for a thread about to exit after inserting, such as a warm-load stream, whose pending
  // counts would otherwise be dropped. O(shards). Threading: safe to call concurrently; acts on the
  // calling thread's counts only.
  void PublishPendingInserts();
  // Read-only query of both live generations (tests, diagnostics). Threading: safe to call concurrently.
  bool MayContain(const Digest& d) const;
  // Shard index of a digest, stable for the process lifetime. Threading: pure function of the geometry.
  std::uint32_t ShardOf(const Digest& d) const;
  // Rotate every shard whose active generation is older than the window. Call periodically (server: 1 s timer).
  // Threading: safe to call concurrently with everything (shards being rotated by others are skipped).
  void RotateExpired(std::chrono::steady_clock::time_point now);
  // Rotates one shard now regardless of age or load (tests, operations). Returns false if another thread
  // was rotating it. Threading: safe to call concurrently.
  bool ForceRotate(std::uint32_t shard, std::chrono::steady_clock::time_point now);
  // Rotation counts by cause and the distrust deadline of one shard (see "Trust after a shortened window").
  // Threading: safe to call concurrently; the fields are read one by one, not as a snapshot.
  ShardRotations RotationsOf(std::uint32_t shard) const;
  // Raw epoch of a shard: 2 x rotations completed, +1 while a rotation is in progress (tests, diagnostics).
  // Threading: safe to call concurrently.
  std::uint64_t EpochOf(std::uint32_t shard) const;
  // Per-shard telemetry, O(shards x (kStatsSampleWords + threads)); takes the per-thread count registry's
  // mutex (also taken once per thread at its first insert and at its exit). Servers call it from a timer,
  // not per scrape. Threading: safe to call concurrently; figures from different shards are not a
  // snapshot of one instant.
  std::vector<ShardStats> Stats() const;
  // Threading: immutable after construction.
  const FilterGeometry& geometry() const { return geometry_; }
  // Inserts a thread accumulates per shard before publishing them (see "Insert counting"); tests use it
  // to bound the counter's lag. Threading: immutable after construction.
  std::uint32_t insert_count_batch() const { return count_batch_; }

 private:
  struct Shard;
  struct Location {
    Shard* shard;
    std::uint64_t word;
    std::uint64_t mask;
  };
  Location Locate(const Digest& d) const;
  Probe Apply(const Location& loc, bool want_verdict);
  void Prefetch(const Location& loc) const;
  // Batch body shared by the two batch APIs; out == nullptr means insert without verdicts.
  void ApplyBatch(std::span<const Digest> in, Probe* out);
  void CountInsert(Shard& s, std::uint32_t shard_index);
  bool TryRotate(Shard& s, std::chrono::steady_clock::time_point now, RotationCause cause);
  // kDefinitelyNew, or kDefinitelyNewUntrusted while the shard distrusts its negatives (clears an expired
  // distrust lazily). Call after the observation's opening epoch load.
  Probe NewVerdict(Shard& s);
  std::int64_t NowNs() const;

  FilterGeometry geometry_;
  std::chrono::nanoseconds window_;
  std::function<std::chrono::steady_clock::time_point()> clock_;  // never empty after construction
  std::uint32_t shard_shift_;               // 64 - log2(shards); shard = h1 >> shift (0 shards bits: 0)
  std::unique_ptr<Shard[]> shards_;
  std::atomic<std::uint64_t>* words_ = nullptr;  // shards x 2 generations x W, huge-page advised
  std::size_t words_bytes_ = 0;
  std::vector<double> pop_fp_;              // C(p, k) / C(64, k) for p = 0..64, for estimated_fp
  std::uint64_t id_;                        // process-unique: keys the per-thread pending insert counts
  std::uint32_t count_batch_;               // inserts a thread accumulates per shard before one fetch_add
};

}  // namespace scangate
