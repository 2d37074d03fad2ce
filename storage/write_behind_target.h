// WriteBehindTarget: where the journal drain (storage/journal/journal_drain.h) hands its durable records — a
// group of write-behind rows whose outcomes come back to a WriteBehindSink. storage::Store (one database) and
// storage::PartitionedStore (one Store per partition) implement it, so the drain works over either.
// Invariant (every implementation): the accepted rows are a prefix of the group, in order; every accepted row
// reaches the sink exactly once, and a refused one never does.
#pragma once

#include <cstddef>
#include <span>

#include "storage/outcome.h"

namespace scangate::storage {

class WriteBehindTarget {
 public:
  // Hands `rows` over; returns how many were accepted (a prefix; 0 when full or stopping). `sink` must
  // outlive the target's Shutdown(). Safe to call concurrently; never blocks on I/O.
  virtual std::size_t SubmitWriteBehindGroup(std::span<const WriteBehindRow> rows, WriteBehindSink& sink) = 0;

 protected:
  ~WriteBehindTarget() = default;
};

}  // namespace scangate::storage
