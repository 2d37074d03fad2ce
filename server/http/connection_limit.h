// ConnectionLimiter: open connections per client address (--max-connections-per-address), so one client —
// a broken till reconnecting in a loop, or a many-connections attack from one host — cannot take every
// connection slot (kMaxConnections) from the others. Invariant: Acquire() succeeds for an address at most
// `per_address` times without a matching Release(); memory is one small entry per address with an open
// connection (erased at its last Release). Keys are AddressKey()s (server/http/rate_limit.h: an IPv6 client
// by its /64). Counts live in kConnectionLimitShards shards, each under its own lock: an accept is one hash and
// one short lock. Safe to call from every I/O thread; the accept path calls Acquire, the session's destructor
// Release.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

namespace scangate::server {

inline constexpr std::size_t kConnectionLimitShards = 64;  // a power of two
static_assert((kConnectionLimitShards & (kConnectionLimitShards - 1)) == 0, "shard choice masks the hash");

class ConnectionLimiter {
 public:
  // `per_address` 0 = unlimited (Acquire always succeeds and keeps no state).
  explicit ConnectionLimiter(std::uint32_t per_address);
  ~ConnectionLimiter();
  ConnectionLimiter(const ConnectionLimiter&) = delete;
  ConnectionLimiter& operator=(const ConnectionLimiter&) = delete;

  // Takes one of `key`'s slots; false (nothing taken) when it already holds per_address. Any thread.
  bool Acquire(std::string_view key);
  // Gives back a slot Acquire() took for `key`. Any thread.
  void Release(std::string_view key);
  // Connections refused so far (a counter for /metrics). Any thread.
  std::uint64_t refused() const;
  // Addresses holding at least one connection now. Any thread (locks each shard in turn).
  std::size_t addresses() const;
  std::uint32_t per_address() const { return per_address_; }

 private:
  struct Shard;
  Shard& ShardOf(std::string_view key) const;
  const std::uint32_t per_address_;
  std::unique_ptr<Shard[]> shards_;
};

}  // namespace scangate::server
