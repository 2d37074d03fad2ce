// RateLimiter: token buckets (--rate-limit N per second, --rate-burst M) keyed by a terminal id (tokens on) or
// a client address (tokens off), asked by the Router once a request's header is read, before its body is read
// or decided. Invariant: a key over its limit never slows another key — buckets live in kRateLimitShards
// shards, each under its own lock, so a check is one hash, one lock of one shard and O(1) arithmetic (no
// global lock); memory is bounded: a shard holds at most max_buckets / kRateLimitShards buckets, a full one
// first drops buckets that have refilled (they are indistinguishable from a fresh bucket: nothing is lost),
// then the least recently used one (counted in `evictions`). Rejections are counted per terminal id (a set
// bounded by the tokens file, capped at kMaxRateLimitLabels) or, for addresses, in one aggregate — never per
// address. The clock is injected (`now` of every call): unit-tested in tests/server/http/rate_limit_test.cc.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace scangate::server {

inline constexpr std::size_t kRateLimitShards = 64;        // independent locks; a power of two
inline constexpr std::size_t kMaxRateBuckets = 65'536;     // buckets held at once (~100 B each: ~6.5 MiB)
inline constexpr std::size_t kMaxRateLimitLabels = 10'000;  // terminal label values (= kMaxTokenHashes)
static_assert((kRateLimitShards & (kRateLimitShards - 1)) == 0, "shard choice masks the hash");
// Label values of the aggregate counters: not valid terminal ids ([A-Za-z0-9._-]), so they cannot collide.
inline constexpr std::string_view kRateLimitAddressLabel = "(address)";
inline constexpr std::string_view kRateLimitOtherLabel = "(other)";

struct RateLimitStats {
  std::vector<std::pair<std::string, std::uint64_t>> limited;  // label -> 429s, sorted by label, non-zero only
  std::uint64_t buckets = 0;    // held now
  std::uint64_t evictions = 0;  // buckets dropped before they had refilled (shard full)
};

class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  // What a check decided; retry_after (>= 1 s) only when refused: time until the bucket holds one token.
  struct Decision {
    bool allowed = true;
    std::chrono::seconds retry_after{0};
  };
  // What the key names, for the rejection counters.
  enum class KeyKind : std::uint8_t { kTerminal, kAddress };

  // `rate_per_second` > 0 tokens added per second, up to `burst` >= 1 (a new bucket starts full).
  RateLimiter(double rate_per_second, double burst, std::size_t max_buckets = kMaxRateBuckets);
  ~RateLimiter();
  RateLimiter(const RateLimiter&) = delete;
  RateLimiter& operator=(const RateLimiter&) = delete;

  // Takes one token from `key`'s bucket at time `now` (monotonic; an earlier `now` than the bucket's last
  // adds nothing). Safe to call concurrently; locks only the key's shard.
  Decision Acquire(std::string_view key, KeyKind kind, Clock::time_point now);
  // Takes `extra` more tokens from `key`'s bucket at `now`, for work an Acquire already admitted (a batch of
  // 1 + extra keys: admitted before its body was read, charged once its keys are counted). Never refuses: the
  // bucket may fall below zero, so that the key's next requests wait until it has paid (a batch larger than the
  // burst still passes, and costs its keys). A key not held (evicted meanwhile) is not charged. Safe to call
  // concurrently; locks only the key's shard.
  void Charge(std::string_view key, double extra, Clock::time_point now);
  // What Acquire would decide for `key` at `now`, without taking a token (a key never seen is allowed). Safe to
  // call concurrently; locks only the key's shard.
  Decision Peek(std::string_view key, Clock::time_point now) const;
  // Rejection counters and bucket counts. Safe to call concurrently (locks each shard in turn).
  RateLimitStats Stats() const;

  double rate() const { return rate_; }
  double burst() const { return burst_; }

 private:
  struct Shard;
  Shard& ShardOf(std::string_view key) const;

  const double rate_;
  const double burst_;
  const std::size_t per_shard_;
  std::unique_ptr<Shard[]> shards_;
  // Distinct terminal labels counted so far (<= kMaxRateLimitLabels; beyond, "(other)"). Relaxed: a bound
  // on a metric's cardinality, not a synchronisation point — a few over the cap under a race is harmless.
  std::atomic<std::size_t> labels_{0};
  std::atomic<std::uint64_t> limited_other_{0};    // relaxed: a counter read by scrapes only
  std::atomic<std::uint64_t> limited_address_{0};  // relaxed: a counter read by scrapes only
};

}  // namespace scangate::server
