// ConnectionLimiter: open connections per client address (--max-connections-per-address on the main listener,
// --admin-max-connections-per-address on the admin one), so one client — a broken till reconnecting in a loop, or
// a many-connections attack from one host — cannot take every connection slot from the others. Invariant:
// Acquire() succeeds for an address at most `per_address` times while its Slots live, and a Slot gives back
// exactly the key it took (its own copy of the key's bytes), once: nothing leaks whatever happens to the
// connection after accept (issue 43: a peer that reset before its session read its address again leaked its slot);
// memory is one small entry per address with an open connection (erased at its last release). Keys are
// AddressKey()s (server/http/address_key.h). Counts live in kConnectionLimitShards shards, each under its own lock:
// an accept is one hash and one short lock. Safe to call from every I/O thread; the accept path acquires, the
// session owns the Slot.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "server/http/address_key.h"

namespace scangate::server {

inline constexpr std::size_t kConnectionLimitShards = 64;  // a power of two
static_assert((kConnectionLimitShards & (kConnectionLimitShards - 1)) == 0, "shard choice masks the hash");

class ConnectionLimiter {
 public:
  // One slot Acquire() took, given back when the Slot is destroyed (or assigned over). Move-only.
  class Slot {
   public:
    Slot() = default;
    Slot(Slot&& o) noexcept { *this = std::move(o); }
    Slot& operator=(Slot&& o) noexcept;
    ~Slot() { Release(); }
    void Release();
    bool held() const { return limiter_ != nullptr; }

   private:
    friend class ConnectionLimiter;
    ConnectionLimiter* limiter_ = nullptr;  // null: nothing to give back (empty, moved from, or no limit)
    AddressKeyBuffer key_{};
    std::size_t size_ = 0;
  };

  // `per_address` 0 = unlimited (Acquire always succeeds and keeps no state).
  explicit ConnectionLimiter(std::uint32_t per_address);
  ~ConnectionLimiter();
  ConnectionLimiter(const ConnectionLimiter&) = delete;
  ConnectionLimiter& operator=(const ConnectionLimiter&) = delete;

  // Takes one of `key`'s slots (at most AddressKeyBuffer's size); nullopt (nothing taken) when it already holds
  // per_address. Any thread. The Slot must not outlive the limiter.
  std::optional<Slot> Acquire(std::string_view key);
  // Connections refused so far (a counter for /metrics). Any thread.
  std::uint64_t refused() const;
  // Addresses holding at least one connection now. Any thread (locks each shard in turn).
  std::size_t addresses() const;
  std::uint32_t per_address() const { return per_address_; }

 private:
  struct Shard;
  Shard& ShardOf(std::string_view key) const;
  void Release(std::string_view key);
  const std::uint32_t per_address_;
  std::unique_ptr<Shard[]> shards_;
};

}  // namespace scangate::server
