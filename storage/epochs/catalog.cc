#include "storage/epochs/catalog.h"

#include <memory>
#include <string>

#include <pqxx/pqxx>

#include "storage/epochs/summary_build.h"
#include "storage/pg/sql_state.h"

namespace scangate::storage {
namespace {

constexpr const char* kReadCatalogSql =
    "SELECT generation, coalesce((SELECT id FROM scangate_epochs WHERE state = 'open'), 0) FROM scangate_epoch_catalog";
// Oldest first; a summary only once the epoch is closed (one being closed is looked up for every digest).
constexpr const char* kReadNotOpenSql =
    "SELECT id, relation, CASE WHEN state = 'closed' THEN summary END FROM scangate_epochs WHERE state <> 'open'"
    " ORDER BY opened_at, id";
constexpr const char* kCatalogChangedState = "SGE01";

}  // namespace

EpochCatalog ReadEpochCatalog(pqxx::connection_base& conn, bool summaries) {
  pqxx::work tx(conn);  // one snapshot for both reads (REPEATABLE READ is not needed: the generation guards them)
  const pqxx::result r = tx.exec(kReadCatalogSql);
  if (r.size() != 1) throw std::runtime_error("scangate_epoch_catalog holds " + std::to_string(r.size()) + " rows, not 1");
  EpochCatalog c;
  c.generation = r[0][0].as<std::int64_t>();
  c.open_id = r[0][1].as<std::int64_t>();
  for (const auto& row : tx.exec(kReadNotOpenSql)) {
    ClosedEpoch e;
    e.id = row[0].as<std::int64_t>();
    if (summaries && !row[2].is_null()) {
      const pqxx::binarystring bytes(row[2]);
      // A summary that does not parse is not trusted: the epoch is looked up for every digest instead.
      if (auto s = EpochSummary::Parse(std::string_view(bytes.get(), bytes.size()))) e.summary = std::make_shared<const EpochSummary>(std::move(*s));
    }
    c.closed.push_back(std::move(e));
    c.relations.push_back(RequirePlainRelation(row[1].as<std::string>()));
  }
  tx.commit();
  return c;
}

void RequireWritableByThisVersion(const EpochCatalog& c) {
  if (c.open_id == 0) throw EpochsNotChecked("the database's epoch catalog (scangate_epochs) has no open epoch");
}

const std::string& RequirePlainRelation(const std::string& relation) {
  if (!IsPlainIdentifier(relation)) {
    throw EpochsNotChecked("scangate_epochs names a relation that is not plain: " + relation);
  }
  return relation;
}

bool IsEpochCatalogChange(const pqxx::sql_error& e) { return SqlStateOf(e) == kCatalogChangedState; }

}  // namespace scangate::storage
