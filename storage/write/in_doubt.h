// In-doubt settlement: a batch's COMMIT was sent and its answer lost (the connection broke during it). Never
// retried blindly — PostgreSQL is asked what became of the transaction, by the xid the batch noted before its
// COMMIT (txid_status() on a fresh writer connection). Invariant: only PostgreSQL's own answer settles it as
// committed or aborted; anything else is kUnknown; and the whole settlement — every connection attempt and
// query — ends within kInDoubtResolveFor (storage/store_options.h), so a writer that meets an outage there
// still reports it within a request deadline. Writer thread only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "storage/write/store_metrics.h"
#include "storage/write/writer_context.h"

namespace scangate::storage {

// What the batch established before its COMMIT.
struct InDoubtCommit {
  std::optional<std::int64_t> xid;  // txid_current_if_assigned(): empty = the transaction wrote nothing
  bool xid_trusted = false;         // false: no xid although rows were inserted (cannot settle: kUnknown)
};

// Settles `commit` on a fresh connection to w.target — the database that received the COMMIT, even when the
// store was retargeted meanwhile (the writer follows the new target afterwards) — left in w.conn when one was
// made (w.conn is reset first: the old one is broken). `why` says what kept it from being settled (kUnknown), or the last transient failure.
InDoubt SettleInDoubt(WriterState& w, const InDoubtCommit& commit, std::string& why);

}  // namespace scangate::storage
