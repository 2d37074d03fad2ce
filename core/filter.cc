// ShardedFilter's construction and probe path (core/filter.h): routing a digest to its shard, word and
// bit mask, the observe/insert protocol and its batch forms, and the per-thread insert counting it feeds.
// These stay in one translation unit on purpose: the build has no LTO, and here the compiler sees the whole
// per-request path at once (Load64, BitMask and SplitMix64 inline into Locate; Locate, Apply, CountInsert and
// NewVerdict are local calls). Rotation: core/filter_rotation.cc; telemetry: core/filter_stats.cc; sizing:
// core/filter_geometry.cc.
#include "core/filter.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>

#include "core/filter_insert_counts.h"
#include "core/filter_shard.h"

namespace scangate {

using filter_detail::kBitsPerWord;
using filter_detail::kMaxCountBatch;
using filter_detail::ThreadCounts;

namespace {

// Digests per prefetch round in the batch API (each prefetches 2 lines). Measured effect: bench/RESULTS-history.md
// ("Batch prefetch chunk"). SCANGATE_PREFETCH_CHUNK overrides it for that tuning run only.
#ifndef SCANGATE_PREFETCH_CHUNK
#define SCANGATE_PREFETCH_CHUNK 16
#endif
constexpr std::size_t kPrefetchChunk = SCANGATE_PREFETCH_CHUNK;
static_assert(kPrefetchChunk >= 1 && kPrefetchChunk <= 256);
// Word arrays of at least this size are 2 MiB-aligned and advised for transparent huge pages, so a random
// probe into a large filter need not also miss the TLB. Measured effect on the benchmark VM: none (the
// 256 MiB pointer chase costs the same with 4 KiB pages, BM_RandomMissChase/0 vs /1); kept because on hosts
// with costly page walks it removes one walk per probe, and it costs nothing.
constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

// Trivially constructed, so the per-insert access needs no TLS guard check; set by RegisterThread().
thread_local ThreadCounts* t_counts = nullptr;
ThreadCounts& RegisterThread() {
  t_counts = filter_detail::RegisterThreadCounts();  // registers on the first call of this thread only
  return *t_counts;
}
std::atomic<std::uint64_t> g_next_filter_id{1};

std::uint64_t Load64(const std::uint8_t* p) {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;  // host order: only a stable function of the digest is needed, not a portable one
}

std::uint64_t SplitMix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// k distinct bit positions from 6-bit chunks of (h2, h3); duplicates are skipped. 20 chunks usually give
// k <= 16 distinct positions; otherwise a splitmix64 stream seeded from h2, h3 continues.
// Sampling without replacement this way yields a uniform k-subset, as the blocked model assumes.
std::uint64_t BitMask(std::uint64_t h2, std::uint64_t h3, std::uint32_t k) {
  std::uint64_t mask = 0;
  // Fast path (k <= 10, the first k chunks of h2 are distinct: 79 % of keys at k = 6): a loop whose trip
  // count is the filter's constant k, so its exit branch is predicted. Same mask as the general loop below.
  if (k <= 10) {
    std::uint64_t dup = 0, x = h2;
    for (std::uint32_t c = 0; c < k; ++c, x >>= 6) {
      const std::uint64_t bit = std::uint64_t{1} << (x & 63);
      dup |= mask & bit;
      mask |= bit;
    }
    if (dup == 0) return mask;
    mask = 0;
  }
  std::uint32_t have = 0;
  // Branch-free duplicate skipping: a chunk adds a position only if its bit is not already in the mask.
  auto take = [&](std::uint64_t x) {
    for (int c = 0; c < 10; ++c, x >>= 6) {
      const std::uint64_t bit = std::uint64_t{1} << (x & 63);
      have += (mask & bit) == 0;
      mask |= bit;
      if (have == k) return true;
    }
    return false;
  };
  if (take(h2) || take(h3)) return mask;
  std::uint64_t state = h2 ^ std::rotl(h3, 32);
  while (!take(SplitMix64(state))) {
    // deterministic fallback; terminates because k <= 64 and splitmix64 output covers all positions
  }
  return mask;
}

}  // namespace

ShardedFilter::ShardedFilter(const FilterOptions& options)
    : geometry_(FilterGeometry::For(options)),
      window_(options.window),
      clock_(options.clock ? options.clock : [] { return std::chrono::steady_clock::now(); }) {
  const int shard_bits = std::countr_zero(geometry_.shards);
  shard_shift_ = static_cast<std::uint32_t>(64 - shard_bits);
  const std::size_t W = geometry_.words_per_generation_per_shard;
  const std::size_t n = W * 2 * geometry_.shards;
  words_bytes_ = n * sizeof(std::atomic<std::uint64_t>);
  static_assert(sizeof(std::atomic<std::uint64_t>) == 8 && std::atomic<std::uint64_t>::is_always_lock_free);
  void* mem = nullptr;
  if (words_bytes_ >= kHugePageBytes) {
    const std::size_t rounded = (words_bytes_ + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
    mem = std::aligned_alloc(kHugePageBytes, rounded);
    if (mem != nullptr) madvise(mem, rounded, MADV_HUGEPAGE);  // advisory: failure only costs TLB misses
  } else {
    mem = std::aligned_alloc(64, (words_bytes_ + 63) / 64 * 64);
  }
  if (mem == nullptr) throw std::bad_alloc();
  words_ = static_cast<std::atomic<std::uint64_t>*>(mem);
  std::uninitialized_value_construct_n(words_, n);

  shards_ = std::make_unique<Shard[]>(geometry_.shards);
  const std::int64_t now = NowNs();
  for (std::uint32_t s = 0; s < geometry_.shards; ++s) {
    shards_[s].gen[0] = words_ + (std::size_t{s} * 2 + 0) * W;
    shards_[s].gen[1] = words_ + (std::size_t{s} * 2 + 1) * W;
    shards_[s].birth_ns.store(now, std::memory_order_relaxed);  // relaxed: construction precedes sharing
  }
  // relaxed: only uniqueness of the id is needed.
  id_ = g_next_filter_id.fetch_add(1, std::memory_order_relaxed);
  count_batch_ = static_cast<std::uint32_t>(
      std::clamp<std::uint64_t>(geometry_.capacity_per_shard / 256, 1, kMaxCountBatch));
  pop_fp_.resize(kBitsPerWord + 1);
  for (int p = 0; p <= kBitsPerWord; ++p) pop_fp_[p] = WordFp(static_cast<std::uint32_t>(p), geometry_.k);
}

ShardedFilter::~ShardedFilter() { std::free(words_); }  // atomics are trivially destructible

std::int64_t ShardedFilter::NowNs() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_().time_since_epoch()).count();
}

std::uint32_t ShardedFilter::ShardOf(const Digest& d) const {
  if (shard_shift_ == 64) return 0;
  return static_cast<std::uint32_t>(Load64(d.data() + 8) >> shard_shift_);
}

ShardedFilter::Location ShardedFilter::Locate(const Digest& d) const {
  // Only the stored prefix (bytes 0..15, core/digest.h kStoredDigestBytes) decides a digest's place, so a digest read
  // back from PostgreSQL (the warm start, the follower) sets the bits the full digest of its key probes. The word
  // comes from bytes 0..7, the shard from 8..15 (ShardOf); the bit mask from a mix of both words, so digests that
  // share a word or a shard still get independent masks.
  const std::uint64_t h0 = Load64(d.data());
  std::uint64_t mix = h0 ^ std::rotl(Load64(d.data() + 8), 32);
  const std::uint64_t h2 = SplitMix64(mix);
  const std::uint64_t h3 = SplitMix64(mix);
  static_assert(kStoredDigestBytes == 16);
  Location loc;
  loc.shard = &shards_[ShardOf(d)];
  // Multiply-shift range reduction (Lemire): uniform over [0, W) for uniform h0, no division.
  loc.word = static_cast<std::uint64_t>(
      (static_cast<unsigned __int128>(h0) * geometry_.words_per_generation_per_shard) >> 64);
  loc.mask = BitMask(h2, h3, geometry_.k);
  return loc;
}

void ShardedFilter::Prefetch(const Location& loc) const {
  // relaxed: only picks which lines to prefetch; a stale epoch just wastes a prefetch.
  const std::uint64_t g = loc.shard->epoch.load(std::memory_order_relaxed) >> 1;
  __builtin_prefetch(loc.shard->gen[g & 1] + loc.word, 1, 3);        // active: will be written
  __builtin_prefetch(loc.shard->gen[(g + 1) & 1] + loc.word, 0, 3);  // previous: read only
}

Probe ShardedFilter::Apply(const Location& loc, bool want_verdict) {
  Shard& s = *loc.shard;
  const std::uint64_t mask = loc.mask;
  bool retried = false;
  for (;;) {
    // All seq_cst: see "Why seq_cst" in filter.h (on x86 only the fetch_or is a locked instruction).
    const std::uint64_t e0 = s.epoch.load();
    const std::uint64_t g = e0 >> 1;
    const bool rotating = (e0 & 1) != 0;  // previous generation may be half-cleared: no "new" verdict
    std::atomic<std::uint64_t>& active = s.gen[g & 1][loc.word];
    std::atomic<std::uint64_t>& previous = s.gen[(g + 1) & 1][loc.word];
    // Start the previous generation's line now so its miss overlaps the active one's (a large filter
    // otherwise pays two serialized misses: the locked fetch_or below orders later loads after it).
    if (want_verdict) __builtin_prefetch(&previous, 0, 3);
    bool set_last_bit = false;
    // Load first: a word that already holds the bits is not written, so its line stays shared. The
    // fetch_or is spelled as a CAS loop seeded with that load (x86 has no fetch_or returning the prior
    // value; the compiler's own loop would reload the word). A successful CAS is the seq_cst RMW that
    // completed the mask (exactly one observer's does); a failed one re-reads the word and re-checks.
    std::uint64_t cur = active.load();
    while ((cur & mask) != mask) {
      if (active.compare_exchange_weak(cur, cur | mask)) {
        set_last_bit = true;
        break;
      }
    }
    const bool maybe_new = want_verdict && set_last_bit && !retried && !rotating;
    const bool in_previous = maybe_new && (previous.load() & mask) == mask;
    const std::uint64_t e1 = s.epoch.load();
    if (set_last_bit) CountInsert(s, static_cast<std::uint32_t>(loc.shard - shards_.get()));
    if (e1 == e0) return (maybe_new && !in_previous) ? NewVerdict(s) : Probe::kPossiblySeen;
    // Overlapped a rotation: redo it against the new active generation so the key is in a generation that
    // has a full lifetime ahead, and answer conservatively.
    retried = true;
  }
}

Probe ShardedFilter::NewVerdict(Shard& s) {
  // relaxed: the observer's opening seq_cst epoch load synchronized with the bump of every rotation it can
  // have been shortened by, and those rotations stored this value before their bump (see "Trust after a
  // shortened window" in filter.h), so coherence alone makes this load see their value or a later one.
  const std::int64_t until = s.distrust_until_ns.load(std::memory_order_relaxed);
  if (until == 0) return Probe::kDefinitelyNew;
  if (NowNs() < until) return Probe::kDefinitelyNewUntrusted;
  // Expired: clear it so later observers skip the clock read. relaxed: the value publishes nothing else; a
  // failed CAS means a rotation raised it (or another observer cleared it), and is then simply dropped.
  std::int64_t expected = until;
  s.distrust_until_ns.compare_exchange_strong(expected, 0, std::memory_order_relaxed);
  return Probe::kDefinitelyNew;
}

void ShardedFilter::CountInsert(Shard& s, std::uint32_t shard_index) {
  std::uint64_t add = 1;
  if (count_batch_ > 1) {
    ThreadCounts& tc = t_counts != nullptr ? *t_counts : RegisterThread();
    // relaxed (all pending/filter_id accesses here): this thread is the only writer; see ThreadCounts.
    if (tc.filter_id.load(std::memory_order_relaxed) != id_) {  // first insert of this thread into this filter
      for (auto& p : tc.pending) p.store(0, std::memory_order_relaxed);
      tc.filter_id.store(id_, std::memory_order_relaxed);
    }
    std::atomic<std::uint8_t>& pending = tc.pending[shard_index];
    const auto v = static_cast<std::uint8_t>(pending.load(std::memory_order_relaxed) + 1);
    if (v < count_batch_) {
      pending.store(v, std::memory_order_relaxed);
      return;
    }
    add = v;
    pending.store(0, std::memory_order_relaxed);
  }
  // relaxed: a trigger count only; rotation re-checks it under the try-lock.
  const std::uint64_t n = s.inserted.fetch_add(add, std::memory_order_relaxed) + add;
  if (n >= geometry_.capacity_per_shard) {
    TryRotate(s, clock_(), RotationCause::kCapacity);
  }
}

void ShardedFilter::PublishPendingInserts() {
  ThreadCounts* tc = t_counts;
  // relaxed (pending/filter_id): this thread is their only writer; see ThreadCounts.
  if (tc == nullptr || tc->filter_id.load(std::memory_order_relaxed) != id_) return;
  for (std::uint32_t i = 0; i < geometry_.shards; ++i) {
    const std::uint64_t add = tc->pending[i].load(std::memory_order_relaxed);
    if (add == 0) continue;
    tc->pending[i].store(0, std::memory_order_relaxed);
    // relaxed: a trigger count only, as in CountInsert.
    if (shards_[i].inserted.fetch_add(add, std::memory_order_relaxed) + add >= geometry_.capacity_per_shard) {
      TryRotate(shards_[i], clock_(), RotationCause::kCapacity);
    }
  }
}

Probe ShardedFilter::ObserveConcurrently(const Digest& d) { return Apply(Locate(d), true); }

void ShardedFilter::InsertConcurrently(const Digest& d) { Apply(Locate(d), false); }

void ShardedFilter::ApplyBatch(std::span<const Digest> in, Probe* out) {
  // Locate and prefetch a chunk of digests first, then do their atomic operations, so the cache misses of
  // one chunk overlap instead of following each other.
  Location locs[kPrefetchChunk];
  for (std::size_t base = 0; base < in.size(); base += kPrefetchChunk) {
    const std::size_t n = std::min(kPrefetchChunk, in.size() - base);
    for (std::size_t i = 0; i < n; ++i) {
      locs[i] = Locate(in[base + i]);
      Prefetch(locs[i]);
    }
    for (std::size_t i = 0; i < n; ++i) {
      const Probe p = Apply(locs[i], out != nullptr);
      if (out != nullptr) out[base + i] = p;
    }
  }
}

void ShardedFilter::ObserveBatchConcurrently(std::span<const Digest> in, std::span<Probe> out) {
  if (out.size() < in.size()) throw std::invalid_argument("ObserveBatchConcurrently: out smaller than in");
  ApplyBatch(in, out.data());
}

void ShardedFilter::InsertBatchConcurrently(std::span<const Digest> in) { ApplyBatch(in, nullptr); }

bool ShardedFilter::MayContain(const Digest& d) const {
  const Location loc = Locate(d);
  const Shard& s = *loc.shard;
  for (;;) {  // seq_cst throughout, as in Apply; retried until no rotation overlapped the two loads
    const std::uint64_t e0 = s.epoch.load();
    const std::uint64_t g = e0 >> 1;  // mid-rotation the previous generation may be half-cleared: its
                                      // surviving bits are still real, so it is consulted anyway
    const bool hit = (s.gen[g & 1][loc.word].load() & loc.mask) == loc.mask ||
                     (s.gen[(g + 1) & 1][loc.word].load() & loc.mask) == loc.mask;
    if (s.epoch.load() == e0) return hit;
  }
}

}  // namespace scangate
