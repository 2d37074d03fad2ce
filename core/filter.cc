#include "core/filter.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <sstream>
#include <stdexcept>
#include <string>

#include <absl/base/thread_annotations.h>

#include "core/mutex.h"

namespace scangate {
namespace {

constexpr int kBitsPerWord = 64;
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
// Upper bound of count_batch_ (see "Insert counting" in filter.h): 16 removes ~15/16 of the counter's
// locked adds; the pending counts fit in one byte each.
constexpr std::uint32_t kMaxCountBatch = 16;
static_assert(kMaxCountBatch <= 255);

// Per-thread insert counts not yet added to their shard's counter, for one filter instance at a time.
// Written only by the owning thread; Stats() reads them from another thread through the registry below
// and folds them into ShardStats::inserted. Single writer, so the owner's increments are relaxed
// load + relaxed store (a plain byte load and store on x86, no locked instruction); relaxed is enough
// because the reader only wants some recent value and nothing else is published through these.
struct ThreadCounts {
  std::atomic<std::uint64_t> filter_id{0};  // 0: none
  std::atomic<std::uint8_t> pending[kMaxShards] = {};
};
// Every live thread's ThreadCounts, so Stats() can fold pending counts in. Registration and removal
// happen once per thread (first insert, thread exit), never on the per-insert path. Leaked on purpose:
// threads may still exit (and unregister) while static destructors run.
struct CountRegistry {
  Mutex mu;
  std::vector<ThreadCounts*> live ABSL_GUARDED_BY(mu);
};
CountRegistry& Registry() {
  static auto* r = new CountRegistry;
  return *r;
}
// Owns the calling thread's ThreadCounts; its destructor (thread exit) unregisters and frees them.
struct ThreadRegistration {
  ThreadCounts* counts = new ThreadCounts;
  ThreadRegistration() {
    CountRegistry& r = Registry();
    const MutexLock lock(&r.mu);
    r.live.push_back(counts);
  }
  ~ThreadRegistration() {
    CountRegistry& r = Registry();
    const MutexLock lock(&r.mu);
    std::erase(r.live, counts);
    delete counts;
  }
};
// Trivially constructed, so the per-insert access needs no TLS guard check; set by RegisterThread().
thread_local ThreadCounts* t_counts = nullptr;
ThreadCounts& RegisterThread() {
  thread_local ThreadRegistration registration;  // constructed on the first call of this thread only
  t_counts = registration.counts;
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

long double Choose(int n, int k) {
  if (k < 0 || k > n) return 0.0L;
  long double r = 1.0L;
  for (int i = 1; i <= k; ++i) r = r * (n - k + i) / i;
  return r;
}

// Best k and its FP for keys_per_word.
std::pair<std::uint32_t, double> BestK(double keys_per_word) {
  std::uint32_t best_k = 1;
  double best = BlockedBloomFp(keys_per_word, 1);
  for (std::uint32_t k = 2; k <= kMaxBitsPerWordK; ++k) {
    const double fp = BlockedBloomFp(keys_per_word, k);
    if (fp < best) {
      best = fp;
      best_k = k;
    }
  }
  return {best_k, best};
}

std::string Str(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace

double BlockedBloomFp(double keys_per_word, std::uint32_t k) {
  if (k == 0 || k > static_cast<std::uint32_t>(kBitsPerWord)) return 1.0;
  if (keys_per_word <= 0) return 0.0;
  const long double total = Choose(kBitsPerWord, static_cast<int>(k));
  long double sum = 0.0L;
  for (int i = 0; i <= static_cast<int>(k); ++i) {
    const long double r = Choose(kBitsPerWord - i, static_cast<int>(k)) / total;  // P(one key avoids i given bits)
    const long double term = Choose(static_cast<int>(k), i) * std::exp(-keys_per_word * (1.0L - r));
    sum += (i % 2 == 0) ? term : -term;
  }
  return static_cast<double>(std::clamp(sum, 0.0L, 1.0L));
}

double StandardBloomFp(double bits_per_key, std::uint32_t k) {
  return std::pow(1.0 - std::exp(-static_cast<double>(k) / bits_per_key), static_cast<double>(k));
}

FilterGeometry FilterGeometry::For(const FilterOptions& o) {
  if (o.capacity < 1) throw std::invalid_argument("filter capacity must be >= 1 key");
  if (!(o.fp_target > 0.0 && o.fp_target < 1.0)) {
    throw std::invalid_argument("filter fp_target must be in (0, 1), got " + Str(o.fp_target));
  }
  if (o.shards < 1 || o.shards > kMaxShards || !std::has_single_bit(o.shards)) {
    throw std::invalid_argument("filter shards must be a power of two in [1, " + std::to_string(kMaxShards) +
                                "], got " + std::to_string(o.shards));
  }
  if (o.window <= std::chrono::nanoseconds::zero()) throw std::invalid_argument("filter window must be > 0");

  // Both live generations may be at design load: each must meet per_gen so that
  // 1 - (1 - per_gen)^2 == fp_target. Computed as -expm1(log1p(-t)/2) to keep precision for tiny targets.
  const double per_gen = -std::expm1(0.5 * std::log1p(-o.fp_target));
  const double floor_fp = BestK(kBitsPerWord / kMaxBitsPerKey).second;
  if (floor_fp > per_gen) {
    const double floor_total = 1.0 - (1.0 - floor_fp) * (1.0 - floor_fp);
    throw std::invalid_argument("filter fp_target " + Str(o.fp_target) +
                                " is unreachable with 64-bit blocks: the lowest is ~" + Str(floor_total) + " at " +
                                Str(kMaxBitsPerKey) + " bits/key (kMaxBitsPerKey)");
  }
  // Smallest bits/key (largest keys per word) whose best k meets per_gen; FP is monotone in load.
  double lo = kMinBitsPerKey, hi = kMaxBitsPerKey;  // invariant: hi feasible
  if (BestK(kBitsPerWord / lo).second <= per_gen) {
    hi = lo;
  } else {
    for (int it = 0; it < 100 && hi - lo > 1e-7 * hi; ++it) {  // ~37 steps
      const double mid = std::sqrt(lo * hi);
      (BestK(kBitsPerWord / mid).second <= per_gen ? hi : lo) = mid;
    }
  }
  const double max_keys_per_word = kBitsPerWord / hi;

  FilterGeometry g{};
  g.shards = o.shards;
  g.capacity_per_shard = (o.capacity + o.shards - 1) / o.shards;
  const long double words = std::ceil(static_cast<long double>(g.capacity_per_shard) / max_keys_per_word);
  const long double bytes = words * 8.0L * 2.0L * o.shards;
  if (bytes > static_cast<long double>(kMaxFilterBytes)) {
    throw std::invalid_argument("filter would need " + Str(static_cast<double>(bytes)) + " bytes (capacity " +
                                std::to_string(o.capacity) + ", fp_target " + Str(o.fp_target) +
                                "), above kMaxFilterBytes " + std::to_string(kMaxFilterBytes));
  }
  g.words_per_generation_per_shard = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(words));
  const double keys_per_word =
      static_cast<double>(g.capacity_per_shard) / static_cast<double>(g.words_per_generation_per_shard);
  const auto [k, fp] = BestK(keys_per_word);
  g.k = k;
  g.generation_fp = fp;
  g.design_fp = 1.0 - (1.0 - fp) * (1.0 - fp);
  g.bits_per_key = kBitsPerWord / keys_per_word;
  g.memory_bytes = static_cast<std::size_t>(g.words_per_generation_per_shard) * 8 * 2 * g.shards;
  return g;
}

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
  const long double total = Choose(kBitsPerWord, static_cast<int>(geometry_.k));
  for (int p = 0; p <= kBitsPerWord; ++p) {
    pop_fp_[p] = static_cast<double>(Choose(p, static_cast<int>(geometry_.k)) / total);
  }
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
  const std::uint64_t h0 = Load64(d.data());
  const std::uint64_t h2 = Load64(d.data() + 16);
  const std::uint64_t h3 = Load64(d.data() + 24);
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
  if (count_batch_ > 1) {
    CountRegistry& r = Registry();
    const MutexLock lock(&r.mu);
    for (const ThreadCounts* tc : r.live) {
      // relaxed (here and below): telemetry; any recent value of another thread's counts will do.
      if (tc->filter_id.load(std::memory_order_relaxed) != id_) continue;
      for (std::uint32_t i = 0; i < geometry_.shards; ++i) pending[i] += tc->pending[i].load(std::memory_order_relaxed);
    }
  }
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
    st.fill_ratio = static_cast<double>(active_bits) / static_cast<double>(samples * kBitsPerWord);
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
