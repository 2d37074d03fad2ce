#include "storage/write/completions.h"

namespace scangate::storage {
namespace {

// The group rows among `items` go to their sinks: one call per run of rows with the same sink (in practice
// one sink, so one call per Deliver), instead of one closure per row.
void ReportToSinks(WriterState& w, const std::vector<QueuedItem>& items, const std::vector<Result>& results) {
  WriteBehindSink* sink = nullptr;
  auto flush = [&] {
    if (sink != nullptr && !w.sink_rows.empty()) {
      try {
        sink->Done(w.sink_rows);
      } catch (...) {
        // A sink must not throw; the writer must survive one that does.
      }
    }
    w.sink_rows.clear();
  };
  for (std::size_t i = 0; i < items.size(); ++i) {
    const QueuedItem& item = items[i];
    if (item.sink == nullptr) continue;
    if (item.sink != sink) {
      flush();
      sink = item.sink;
    }
    w.sink_rows.push_back(WriteBehindDone{item.digest, item.tag, item.flag, results[i].outcome});
  }
  flush();
}

}  // namespace

void Deliver(StoreShared& shared, WriterState& w, std::vector<QueuedItem>& items, const std::vector<Result>& results) {
  w.queue.ReleaseBehind(items);
  ReportToSinks(w, items, results);
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (!items[i].done) continue;  // write-behind items run theirs only when one was given
    // Queued items failed by an outage were never taken: the one that wins here completes, a cancelled
    // one stays silent (its submitter already answered).
    if (items[i].ticket && !items[i].ticket->Take()) {
      shared.cancelled.fetch_add(1);
      continue;
    }
    try {
      items[i].done(results[i]);
    } catch (...) {
      // A completion must not throw; the writer must survive one that does.
    }
  }
  shared.pending.Release(items.size());
}

void DeliverAll(StoreShared& shared, WriterState& w, std::vector<QueuedItem>& items, Outcome outcome) {
  Deliver(shared, w, items, std::vector<Result>(items.size(), Result{outcome, {}}));
}

}  // namespace scangate::storage
