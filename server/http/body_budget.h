// BodyBudget: the bytes of request bodies the HTTP server holds at once (--max-body-bytes-in-flight), across
// every connection and thread. A session takes its body's declared size (Content-Length, or the route's limit
// for a chunked body) once the header is admitted and before it reads a body byte, and gives it back when the
// response is written or the connection ends; a body that does not fit is answered 503 (+ Retry-After, the
// connection closes, the body is never read), so many slow or large bodies can never grow memory without
// bound. Invariant: the bytes held never exceed the limit, and large bodies (batches, above kMaxObserveBodyBytes)
// never hold more than half of it, so a flood of batches leaves room for the tills' single observations.
// Lock-free (one atomic word); any thread. Unit-tested in tests/server/http/body_budget_test.cc.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace scangate::server {

class BodyBudget {
 public:
  // `limit` bytes in flight at most; 0 = no limit (every Take succeeds, nothing is counted but the bytes).
  explicit BodyBudget(std::size_t limit) : limit_(limit) {}
  BodyBudget(const BodyBudget&) = delete;
  BodyBudget& operator=(const BodyBudget&) = delete;

  // Takes `bytes` if they fit: within the limit, and within half of it for a body above `small_body_bytes`.
  // false: nothing was taken (counted in refused()). Safe to call concurrently.
  bool Take(std::size_t bytes, std::size_t small_body_bytes);
  // Gives back bytes an earlier Take took. Safe to call concurrently.
  void Give(std::size_t bytes);

  std::size_t limit() const { return limit_; }
  // Bytes held now, and bodies refused so far. Safe to call concurrently (a scrape's reading).
  std::size_t in_flight() const { return in_flight_.load(std::memory_order_relaxed); }  // relaxed: a gauge
  std::uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }     // relaxed: a counter

  // The bytes one session holds: given back on destruction or Release (move-only).
  class Hold {
   public:
    Hold() = default;
    Hold(BodyBudget* budget, std::size_t bytes) : budget_(budget), bytes_(bytes) {}
    Hold(Hold&& o) noexcept : budget_(o.budget_), bytes_(o.bytes_) { o.budget_ = nullptr; }
    Hold& operator=(Hold&& o) noexcept {
      if (this != &o) {
        Release();
        budget_ = o.budget_;
        bytes_ = o.bytes_;
        o.budget_ = nullptr;
      }
      return *this;
    }
    ~Hold() { Release(); }
    void Release() {
      if (budget_ != nullptr) budget_->Give(bytes_);
      budget_ = nullptr;
    }

   private:
    BodyBudget* budget_ = nullptr;
    std::size_t bytes_ = 0;
  };

 private:
  const std::size_t limit_;
  // The admission decision itself is the CAS on in_flight_; no other memory is published through it, so
  // relaxed ordering suffices everywhere (the bytes are a count, not a guard of data).
  std::atomic<std::size_t> in_flight_{0};
  std::atomic<std::uint64_t> refused_{0};
};

}  // namespace scangate::server
