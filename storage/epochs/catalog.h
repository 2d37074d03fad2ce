// The epochs' catalog as a writer reads it (sql/018: scangate_epochs, scangate_epoch_catalog), and what a writer of
// this version accepts. Invariant: a writer writes only under the catalog generation it read, and checks every
// epoch that is not open which that catalog lists (core/closed_epochs.h, storage/pg/batch_closed.cc); it refuses a
// catalog without an open epoch or naming a relation it would have to quote. Every writing transaction names the
// generation it read in its first statement, scangate_write_order($1) (kWriteOrderSql): PostgreSQL orders it against
// a change of the catalog and fails it with SGE01 (IsEpochCatalogChange) when the catalog moved on, before it wrote
// anything. Use: at every writer connect (storage/write/writer_context.cc) and at start (storage/start).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/closed_epochs.h"

namespace pqxx {
class connection_base;
class sql_error;
}  // namespace pqxx

namespace scangate::storage {

struct EpochCatalog {
  std::int64_t generation = 0;  // random; a new one at every change of scangate_epochs
  std::int64_t open_id = 0;     // the open epoch's id (0: none)
  // The epochs that are not open (closing or closed), oldest first, each with its summary when it is closed and its
  // summary parses (none: every digest is looked up there), and relations[i] the table of closed[i].
  std::vector<ClosedEpoch> closed;
  std::vector<std::string> relations;
};

// A catalog this writer cannot write under. Permanent until the database or the scangate changes: at start,
// Store::Start exits with it; a writer's connect fails with it (logged, 503s).
class EpochsNotChecked : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What every writer's connection says of itself (its options: storage/pg/conninfo.h extra_options): it checks the
// closed epochs. sql/019's guard refuses the inserts of a scangate writer (a session with sql/014's
// scangate.digest_scheme) that does not say so — a version older than the epochs, which would call a key of a closed
// epoch new a second time.
inline constexpr const char* kEpochWriterOption = "-c scangate.epochs=checked";

// The writing transactions' first statement (a prepared statement's text, or a simple query's with the generation
// written in): $1 = the generation the writer read.
inline constexpr const char* kWriteOrderSql = "SELECT scangate_write_order($1)";

// Reads the catalog on `conn` (its own statements; autocommit); `summaries` false: none read (readers that look
// every closed epoch up). Throws pqxx errors (a database without sql/018: undefined_table), and EpochsNotChecked for
// a relation that is not a plain identifier (RequirePlainRelation). Any thread, one connection each.
EpochCatalog ReadEpochCatalog(pqxx::connection_base& conn, bool summaries = true);

// Throws EpochsNotChecked unless `c` has its open epoch. Pure.
void RequireWritableByThisVersion(const EpochCatalog& c);

// `relation` (a closed epoch's table, read from scangate_epochs), checked to be a plain identifier — it goes into SQL
// text unquoted — or EpochsNotChecked. Every reader of the catalog's relations calls it. Pure.
const std::string& RequirePlainRelation(const std::string& relation);

// The writer's generation is not the catalog's (scangate_write_order: SQLSTATE SGE01): nothing of the transaction was
// written; read the catalog again (a new connection) and run it again. Pure.
bool IsEpochCatalogChange(const pqxx::sql_error& e);

}  // namespace scangate::storage
