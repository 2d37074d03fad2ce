#include "server/http/body_budget.h"

namespace scangate::server {

bool BodyBudget::Take(std::size_t bytes, std::size_t small_body_bytes) {
  if (limit_ == 0) {
    in_flight_.fetch_add(bytes, std::memory_order_relaxed);  // relaxed: a count (see the member's comment)
    return true;
  }
  const std::size_t cap = bytes > small_body_bytes ? limit_ / 2 : limit_;
  std::size_t held = in_flight_.load(std::memory_order_relaxed);  // relaxed: the CAS below decides
  do {
    if (bytes > cap || held > cap - bytes) {
      refused_.fetch_add(1, std::memory_order_relaxed);  // relaxed: a counter
      return false;
    }
    // relaxed: the count is the only state (no data is published by taking bytes)
  } while (!in_flight_.compare_exchange_weak(held, held + bytes, std::memory_order_relaxed));
  return true;
}

void BodyBudget::Give(std::size_t bytes) {
  in_flight_.fetch_sub(bytes, std::memory_order_relaxed);  // relaxed: a count (see the member's comment)
}

}  // namespace scangate::server
