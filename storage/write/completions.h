// Delivering outcomes: the one exit of every accepted item — committed, failed, dead-lettered or given up.
// Invariant: each item is delivered exactly once (its Completion, or its row to its group's WriteBehindSink),
// except a Submit item its submitter cancelled first (silent); its pending slot is released and a finished
// write-behind row no longer holds its digest's Submits behind it. Writer thread only.
#pragma once

#include <vector>

#include "storage/outcome.h"
#include "storage/write/writer_context.h"
#include "storage/write/writer_queue.h"

namespace scangate::storage {

// Delivers results[i] to items[i] (the sizes match). Completions and sinks that throw are survived.
void Deliver(StoreShared& shared, WriterState& w, std::vector<QueuedItem>& items, const std::vector<Result>& results);

// The same outcome to every item of `items`.
void DeliverAll(StoreShared& shared, WriterState& w, std::vector<QueuedItem>& items, Outcome outcome);

}  // namespace scangate::storage
