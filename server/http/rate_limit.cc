#include "server/http/rate_limit.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <absl/container/flat_hash_map.h>
#include <absl/hash/hash.h>
#include <absl/strings/string_view.h>

#include "core/mutex.h"

namespace scangate::server {

namespace {

struct Bucket {
  double tokens = 0;
  RateLimiter::Clock::time_point last{};
};

// Adds what the time since the bucket's last use refilled, up to `burst` (an earlier `now` adds nothing).
void Refill(Bucket& b, RateLimiter::Clock::time_point now, double rate, double burst) {
  if (now > b.last) {
    b.tokens = std::min(burst, b.tokens + std::chrono::duration<double>(now - b.last).count() * rate);
    b.last = now;
  }
}

}  // namespace

// One shard on its own cache lines: keys of different shards never contend.
struct alignas(64) RateLimiter::Shard {
  mutable Mutex mu;
  absl::flat_hash_map<std::string, Bucket> buckets ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<std::string, std::uint64_t> limited ABSL_GUARDED_BY(mu);  // terminal label -> 429s
  std::uint64_t evictions ABSL_GUARDED_BY(mu) = 0;
};

RateLimiter::RateLimiter(double rate_per_second, double burst, std::size_t max_buckets)
    : rate_(rate_per_second),
      burst_(burst),
      per_shard_(std::max<std::size_t>(1, max_buckets / kRateLimitShards)),
      shards_(new Shard[kRateLimitShards]) {
  if (!(rate_per_second > 0) || !(burst >= 1)) throw std::invalid_argument("rate limit: rate > 0 and burst >= 1");
}

RateLimiter::~RateLimiter() = default;

RateLimiter::Shard& RateLimiter::ShardOf(std::string_view key) const {
  return shards_[absl::Hash<std::string_view>{}(key) & (kRateLimitShards - 1)];
}

RateLimiter::Decision RateLimiter::Acquire(std::string_view key, KeyKind kind, Clock::time_point now) {
  Shard& s = ShardOf(key);
  // absl's heterogeneous lookup takes absl::string_view (not std::string_view in Debian's build): no copy.
  const absl::string_view akey(key.data(), key.size());
  MutexLock lock(&s.mu);
  auto it = s.buckets.find(akey);
  if (it == s.buckets.end()) {
    if (s.buckets.size() >= per_shard_) {
      // Full: drop every bucket that has refilled (no state lost); none: the least recently used one.
      auto oldest = s.buckets.end();
      for (auto b = s.buckets.begin(); b != s.buckets.end();) {
        const double idle = std::chrono::duration<double>(now - b->second.last).count();
        if (b->second.tokens + idle * rate_ >= burst_) {
          s.buckets.erase(b++);
          continue;
        }
        if (oldest == s.buckets.end() || b->second.last < oldest->second.last) oldest = b;
        ++b;
      }
      if (s.buckets.size() >= per_shard_ && oldest != s.buckets.end()) {
        s.buckets.erase(oldest);
        ++s.evictions;
      }
    }
    it = s.buckets.emplace(std::string(key), Bucket{burst_, now}).first;
  }
  Bucket& b = it->second;
  Refill(b, now, rate_, burst_);
  if (b.tokens >= 1) {
    b.tokens -= 1;
    return {};
  }
  // Refused: seconds until one whole token is back, rounded up, at least 1 (Retry-After is whole seconds).
  const double wait = (1 - b.tokens) / rate_;
  const auto retry = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(wait)));
  if (kind == KeyKind::kAddress) {
    limited_address_.fetch_add(1, std::memory_order_relaxed);  // relaxed: a counter, see the header
  } else if (auto c = s.limited.find(akey); c != s.limited.end()) {
    ++c->second;
  } else if (labels_.fetch_add(1, std::memory_order_relaxed) < kMaxRateLimitLabels) {  // relaxed: see the header
    s.limited.emplace(std::string(key), 1);
  } else {
    limited_other_.fetch_add(1, std::memory_order_relaxed);  // relaxed: a counter, see the header
  }
  return {false, std::chrono::seconds(retry)};
}

void RateLimiter::Charge(std::string_view key, double extra, Clock::time_point now) {
  if (!(extra > 0)) return;
  Shard& s = ShardOf(key);
  const absl::string_view akey(key.data(), key.size());
  MutexLock lock(&s.mu);
  const auto it = s.buckets.find(akey);
  if (it == s.buckets.end()) return;
  Bucket& b = it->second;
  Refill(b, now, rate_, burst_);
  b.tokens -= extra;
}

RateLimiter::Decision RateLimiter::Peek(std::string_view key, Clock::time_point now) const {
  Shard& s = ShardOf(key);
  const absl::string_view akey(key.data(), key.size());
  MutexLock lock(&s.mu);
  const auto it = s.buckets.find(akey);
  if (it == s.buckets.end()) return {};
  const Bucket& b = it->second;
  const double refill = now > b.last ? std::chrono::duration<double>(now - b.last).count() * rate_ : 0;
  const double tokens = std::min(burst_, b.tokens + refill);
  if (tokens >= 1) return {};
  const auto retry = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil((1 - tokens) / rate_)));
  return {false, std::chrono::seconds(retry)};
}

RateLimitStats RateLimiter::Stats() const {
  RateLimitStats out;
  for (std::size_t i = 0; i < kRateLimitShards; ++i) {
    const Shard& s = shards_[i];
    MutexLock lock(&s.mu);
    out.buckets += s.buckets.size();
    out.evictions += s.evictions;
    for (const auto& [label, n] : s.limited) out.limited.emplace_back(label, n);
  }
  std::sort(out.limited.begin(), out.limited.end());
  // relaxed: counters read by a scrape (see the header).
  if (const auto n = limited_address_.load(std::memory_order_relaxed)) out.limited.emplace_back(kRateLimitAddressLabel, n);
  if (const auto n = limited_other_.load(std::memory_order_relaxed)) out.limited.emplace_back(kRateLimitOtherLabel, n);
  return out;
}

}  // namespace scangate::server
