#include "storage/write/writer_context.h"

#include <exception>
#include <utility>

#include <boost/json/object.hpp>

#include "storage/epochs/catalog.h"
#include "storage/pg/batch_statement.h"
#include "storage/pg/error_summary.h"

namespace scangate::storage {

bool FollowTarget(const StoreShared& shared, WriterState& w) {
  if (!shared.target.Changed(w.target_generation)) return false;
  w.target = shared.target.Get(&w.target_generation);
  w.conn.reset();
  return true;
}

// Every writer connection reads the table's layout and prepares the batch statements for it once.
bool ConnectWriter(WriterState& w, const std::string& conninfo, std::string* error) {
  try {
    auto conn = std::make_unique<PgConnection>(conninfo);  // reactivation inhibited: see there
    // Sources are validated UTF-8: say so, or a non-UTF-8 database would store them as mojibake (and one
    // it cannot convert is rejected per row: see BatchRunner).
    conn->set_client_encoding("UTF8");
    w.layout = BatchStatement::Prepare(*conn, w.retention);
    // Read on every connect: after a failover the new primary's catalog may not be the one read before.
    EpochCatalog catalog = ReadEpochCatalog(*conn);
    RequireWritableByThisVersion(catalog);
    BatchStatement::PrepareClosedProbe(*conn, catalog.relations, w.retention, w.layout);
    // With closed epochs, the statements are planned once (generic plans): the closed epochs' look-up has a branch
    // per epoch, and PostgreSQL would plan it at every execution (its custom plans, each costed for the batch's
    // arrays, looked cheaper than the generic one), ~27 µs of PostgreSQL's CPU per request at 8 epochs; the batch
    // INSERT's generic plan is no slower (bench/RESULTS.md "The closed epochs on the write path").
    if (!catalog.closed.empty()) conn->set_variable("plan_cache_mode", "force_generic_plan");
    w.epoch_generation = catalog.generation;
    w.closed_epochs = std::move(catalog.closed);
    w.conn = std::move(conn);
    return true;
  } catch (const std::exception& e) {
    if (error != nullptr) *error = ErrorSummary(e.what());
    return false;
  }
}

void LogPgState(LogSink& log, bool up, unsigned writer, const std::string& error) {
  boost::json::object fields{{"state", up ? "up" : "down"}, {"writer", writer}};
  if (!up) fields["error"] = error;
  log.Write(up ? LogSeverity::kInfo : LogSeverity::kWarn, "pg_state", std::move(fields));
}

}  // namespace scangate::storage
