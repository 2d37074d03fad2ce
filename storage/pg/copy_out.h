// CopyDigestsOut: one `COPY (query) TO STDOUT (FORMAT binary)` whose rows are exactly one digest, read over a plain
// libpq connection (pqxx 6.4 can neither COPY from a query nor read binary) and parsed by storage/pg/copy_parser.h.
// For the warm start (storage/read/warm_load.cc) and a closed epoch's summary (storage/epochs/summary_build.h).
// Invariant: the sink sees only whole digests, and the count is returned only when the server ended the COPY without
// an error; otherwise it throws (and the connection may be left mid-COPY: the caller discards it or its transaction).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include <libpq-fe.h>

#include "storage/pg/copy_parser.h"

namespace scangate::storage {

// Thrown when *abort was set between two CopyData messages: the caller's reason to stop, reported elsewhere.
struct CopyOutAborted {};

// Runs `sql` on `conn` (idle, or in the caller's transaction) and feeds every digest to `sink`; returns how many.
// `abort` (may be null) is polled between messages. Errors throw std::runtime_error "<what>: <first line>".
// Threading: one call per connection at a time.
std::uint64_t CopyDigestsOut(PGconn* conn, const std::string& sql, const CopyDigestParser::Sink& sink,
                             const std::atomic<bool>* abort, const char* what);

}  // namespace scangate::storage
