#include "server/http/connection_limit.h"

#include <algorithm>
#include <atomic>
#include <string>

#include <absl/container/flat_hash_map.h>
#include <absl/hash/hash.h>
#include <absl/strings/string_view.h>

#include "core/mutex.h"

namespace scangate::server {

// One shard on its own cache lines: addresses of different shards never contend.
struct alignas(64) ConnectionLimiter::Shard {
  mutable Mutex mu;
  absl::flat_hash_map<std::string, std::uint32_t> open ABSL_GUARDED_BY(mu);
  std::atomic<std::uint64_t> refused{0};  // relaxed: a counter read by scrapes only
};

ConnectionLimiter::ConnectionLimiter(std::uint32_t per_address)
    : per_address_(per_address), shards_(new Shard[kConnectionLimitShards]) {}

ConnectionLimiter::~ConnectionLimiter() = default;

ConnectionLimiter::Shard& ConnectionLimiter::ShardOf(std::string_view key) const {
  return shards_[absl::Hash<std::string_view>{}(key) & (kConnectionLimitShards - 1)];
}

ConnectionLimiter::Slot& ConnectionLimiter::Slot::operator=(Slot&& o) noexcept {
  if (this != &o) {
    Release();
    limiter_ = o.limiter_;
    key_ = o.key_;
    size_ = o.size_;
    o.limiter_ = nullptr;
  }
  return *this;
}

void ConnectionLimiter::Slot::Release() {
  if (limiter_ == nullptr) return;
  limiter_->Release(std::string_view(key_.data(), size_));
  limiter_ = nullptr;
}

std::optional<ConnectionLimiter::Slot> ConnectionLimiter::Acquire(std::string_view key) {
  Slot slot;
  if (per_address_ == 0) return slot;
  if (key.size() > slot.key_.size()) return std::nullopt;  // not an AddressKey: never the case
  Shard& s = ShardOf(key);
  {
    MutexLock lock(&s.mu);
    auto [it, inserted] = s.open.try_emplace(absl::string_view(key.data(), key.size()), 0);
    if (it->second >= per_address_) {
      s.refused.fetch_add(1, std::memory_order_relaxed);  // relaxed: a counter (see Shard)
      return std::nullopt;
    }
    ++it->second;
  }
  slot.limiter_ = this;
  std::copy(key.begin(), key.end(), slot.key_.begin());
  slot.size_ = key.size();
  return slot;
}

void ConnectionLimiter::Release(std::string_view key) {
  if (per_address_ == 0) return;
  Shard& s = ShardOf(key);
  MutexLock lock(&s.mu);
  const auto it = s.open.find(absl::string_view(key.data(), key.size()));
  if (it == s.open.end()) return;
  if (--it->second == 0) s.open.erase(it);
}

std::uint64_t ConnectionLimiter::refused() const {
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < kConnectionLimitShards; ++i) {
    n += shards_[i].refused.load(std::memory_order_relaxed);  // relaxed: a counter (see Shard)
  }
  return n;
}

std::size_t ConnectionLimiter::addresses() const {
  std::size_t n = 0;
  for (std::size_t i = 0; i < kConnectionLimitShards; ++i) {
    MutexLock lock(&shards_[i].mu);
    n += shards_[i].open.size();
  }
  return n;
}

}  // namespace scangate::server
