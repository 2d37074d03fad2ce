// ExactStore: what the verdict logic (server/verdict/service.h) needs of the exact authority — insert-if-absent of
// a digest with a committed outcome, ack=filter write-behind, health, counters. storage::Store (PostgreSQL)
// implements it; tests substitute an in-memory fake so the verdict and routing logic run without a
// database. Invariant (every implementation): kInserted/kDuplicate only once the decision is durable, and
// exactly one kInserted per digest ever. One virtual call per item; no other cost.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/digest.h"

namespace scangate::storage {

struct Result;      // storage/store.h
struct StoreStats;  // storage/store.h
// Runs once per Submit with the outcome; must not block (see storage/store.h).
using Completion = std::function<void(const Result&)>;

// The cancellation handle of one Submit item: one atomic state, queued -> taken (a writer put the item
// into a transaction, or is completing it as kUnavailable) or queued -> cancelled (the submitter gave up:
// the item is never written and its completion never runs). Exactly one transition ever succeeds.
// The submitter owns it (a shared_ptr, so it can live inside the submitter's own request state).
class Ticket {
 public:
  // True when the item was still queued: it is now cancelled for good. False when a writer already took
  // it: the outcome will be delivered (possibly committed). Safe to call concurrently with the writer.
  bool Cancel() {
    std::uint8_t expected = kQueued;
    return state_.compare_exchange_strong(expected, kCancelled, std::memory_order_relaxed);  // see Take
  }

 private:
  friend class Store;
  static constexpr std::uint8_t kQueued = 0, kTaken = 1, kCancelled = 2;
  // True when the item may be written / completed. Relaxed: the state is the only datum the two sides
  // exchange (the item itself is published by the queue mutex), and the CAS alone decides the winner.
  bool Take() {
    std::uint8_t expected = kQueued;
    return state_.compare_exchange_strong(expected, kTaken, std::memory_order_relaxed) || expected == kTaken;
  }
  std::atomic<std::uint8_t> state_{kQueued};
};

// What the submitter knows of a Submit item's digest: kNew when a trusted Bloom filter answered "definitely
// new" (no row of it is expected). A hint for the write's shape, never for its outcome: storage::Store writes
// a batch made only of such items by binary COPY, which skips ON CONFLICT's per-row index probe, and a row
// that exists after all (another instance, a row older than the window) aborts the COPY and the batch runs
// again through ON CONFLICT — PostgreSQL decides either way.
enum class Expect : std::uint8_t { kUnknown, kNew };

class ExactStore {
 public:
  virtual ~ExactStore() = default;
  // Contracts as documented on storage::Store (store.h): thread-safe, never block on I/O.
  // `ticket` (optional): see Ticket; an implementation that never queues may ignore it. `expect`: see Expect;
  // an implementation may ignore it.
  virtual bool Submit(std::uint32_t route, const Digest& d, std::string source, Completion done,
                      std::shared_ptr<Ticket> ticket = nullptr, Expect expect = Expect::kUnknown) = 0;
  // `first_seen_us` (µs since the epoch; 0 = PostgreSQL's now() at insert): the time the caller already
  // answers with (the server's recent set), so the row's first_seen equals it.
  virtual bool SubmitWriteBehind(std::uint32_t route, const Digest& d, std::string source,
                                 std::int64_t first_seen_us) = 0;
  virtual bool up() const = 0;
  // True while the accepted, unfinished items fill the queue bound: a refused Submit is then "full", not
  // "down", and may succeed once a writer finishes a batch (the server waits for room, --queue-wait).
  // A hint (it may change right after the call); an unbounded implementation keeps the default.
  virtual bool full() const { return false; }
  virtual StoreStats Stats() const = 0;
};

}  // namespace scangate::storage
