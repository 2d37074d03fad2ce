// BatchRunner: writes one taken batch to PostgreSQL and delivers its outcomes. Chooses the statement shape
// (binary COPY for a batch of Bloom negatives, with a back-off after COPYs a present row aborted; else INSERT ...
// ON CONFLICT), retries deadlocks, applies the test fault hook at COMMIT, bisects a batch around a row
// PostgreSQL rejects and dead-letters such a write-behind row, and hands an in-doubt COMMIT to
// storage/write/in_doubt.h. Invariant: an item is delivered kInserted/kDuplicate only once its transaction
// committed (or was settled committed); a batch part is run again only when nothing of it can have committed.
// Use: one per writer, on its thread (storage/write/writer.h); an outage is returned, not handled here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <absl/functional/function_ref.h>

#include "storage/write/writer_context.h"
#include "storage/write/writer_queue.h"

namespace scangate::storage {

class BatchRunner {
 public:
  BatchRunner(StoreShared& shared, WriterState& w) : shared_(shared), w_(w) {}

  // Runs `batch` (emptied). Returns false on an outage: the items not yet finished are then in `failed`
  // (to hand to the writer's MarkDown) and `error` says why.
  bool Run(std::vector<QueuedItem>& batch, std::vector<QueuedItem>& failed, std::string& error);

 private:
  enum class PartEnd : std::uint8_t;
  struct Attempt;
  PartEnd RunPart(std::vector<QueuedItem>& part, std::string& error);
  void WriteBatch(std::vector<QueuedItem>& batch, Attempt& att);
  void Commit(Attempt& att, absl::FunctionRef<void()> commit, absl::FunctionRef<void()> abandon);
  void RecordBatch(const std::vector<QueuedItem>& batch, const Attempt& att);
  PartEnd SettleAndFinish(std::vector<QueuedItem>& part, Attempt& att, std::string& error, int& aborted_retries);
  bool RejectRow(QueuedItem& item, const std::string& error);

  StoreShared& shared_;
  WriterState& w_;
};

}  // namespace scangate::storage
