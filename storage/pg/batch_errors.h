// Failure classification for the batch runner (storage/write/batch_runner.h, storage/write/in_doubt.h): which
// statement errors are data errors (one row PostgreSQL rejects — bisect, dead-letter) rather than outages
// (retry the batch forever), and how an in-doubt COMMIT is settled from the transaction id (txid_status()).
// Invariant: only PostgreSQL's own answer turns an in-doubt COMMIT into "committed" or "aborted";
// anything else is kUnknown. Use from a writer thread on its own connection.
#pragma once

#include <cstdint>
#include <string>

#include <pqxx/pqxx>

namespace scangate::storage {

// SQLSTATE class 22 (data exception: e.g. 22P05 a character the database encoding cannot hold, 22021)
// or 23 (integrity constraint violation). These reject rows, not connections: retrying the same row
// gives the same answer, so it must not stall the writer. Everything else (53 insufficient resources,
// 57 operator intervention, 58/XX system errors, 42 a broken statement) fails every row alike and is
// treated as an outage.
bool IsDataError(const pqxx::sql_error& e);

enum class TxStatus { kCommitted, kAborted, kInProgress, kUnknown };

// SELECT txid_status(xid) on `conn`: kUnknown when PostgreSQL returns NULL (xid older than the commit
// log it keeps) or raises an error for an xid it cannot know ("transaction ID ... is in the future",
// e.g. a replaced server); `why` then says which. Throws pqxx::broken_connection when `conn` breaks.
TxStatus QueryTxidStatus(pqxx::connection& conn, std::int64_t xid, std::string* why);

}  // namespace scangate::storage
