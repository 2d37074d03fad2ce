// ExactStore: what the verdict logic (server/verdict/service.h) needs of the exact authority — insert-if-absent of
// a digest with a committed outcome, ack=filter write-behind, health, counters. storage::Store (PostgreSQL)
// implements it; tests substitute an in-memory fake so the verdict and routing logic run without a
// database. Invariant (every implementation): kInserted/kDuplicate only once the decision is durable, and
// exactly one kInserted per digest ever. One virtual call per item; no other cost.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/digest.h"
#include "storage/outcome.h"

namespace scangate::storage {

struct StoreStats;  // storage/write/store_metrics.h

class ExactStore {
 public:
  virtual ~ExactStore() = default;
  // Contracts as documented on storage::Store (storage/store.h): thread-safe, never block on I/O.
  // `ticket` (optional): see Ticket; an implementation that never queues may ignore it. `expect`: see Expect;
  // an implementation may ignore it. `attrs` (--keys=gs1): the pack's lot, expiry and own horizon, recorded
  // with a new row (or a taken-over expired one); empty for raw keys.
  virtual bool Submit(std::uint32_t route, const Digest& d, std::string source, Completion done,
                      std::shared_ptr<Ticket> ticket = nullptr, Expect expect = Expect::kUnknown,
                      PackAttrs attrs = {}) = 0;
  // `first_seen_us` (µs since the epoch; 0 = PostgreSQL's now() at insert): the time the caller already
  // answers with (the server's recent set), so the row's first_seen equals it. `request`: the observing
  // request's idempotency record (issue 34), written with the row; none = no header.
  virtual bool SubmitWriteBehind(std::uint32_t route, const Digest& d, std::string source, std::int64_t first_seen_us,
                                 const std::optional<RequestId>& request) = 0;
  virtual bool up() const = 0;
  // True while the accepted, unfinished items fill the queue bound: a refused Submit is then "full", not
  // "down", and may succeed once a writer finishes a batch (the server waits for room, --queue-wait).
  // A hint (it may change right after the call); an unbounded implementation keeps the default.
  virtual bool full() const { return false; }
  // True while SOME keys can be answered (Service::ready and /readyz): a partitioned store with one partition
  // down still serves the others, so it stays in the load balancer. One database: the same as up().
  virtual bool serving() const { return up(); }
  virtual StoreStats Stats() const = 0;
};

}  // namespace scangate::storage
