#include "storage/start/migrations.h"

#include <pqxx/pqxx>
#include <set>
#include <string>

namespace scangate::storage {
namespace {

// Arbitrary but fixed: every scangate instance takes this lock before looking at schema_migrations.
constexpr long long kMigrationLockKey = 0x5ca9'6a7e'0001LL;

constexpr const char* kLockSql = "SELECT pg_advisory_xact_lock($1)";
constexpr const char* kCreateMigrationsTableSql =
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    " version int PRIMARY KEY,"
    " name text NOT NULL,"
    " applied_at timestamptz NOT NULL DEFAULT now())";
constexpr const char* kAppliedVersionsSql = "SELECT version FROM schema_migrations";
constexpr const char* kRecordMigrationSql =
    "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)";

}  // namespace

int ApplyMigrations(pqxx::connection_base& conn, int up_to) {
  pqxx::work tx(conn, "scangate_migrations");
  tx.exec_params(kLockSql, kMigrationLockKey);
  tx.exec0(kCreateMigrationsTableSql);
  std::set<int> applied;
  for (const auto& row : tx.exec(kAppliedVersionsSql)) applied.insert(row[0].as<int>());
  std::set<int> known;
  for (const Migration& m : EmbeddedMigrations()) known.insert(m.version);
  for (const int v : applied) {
    if (known.count(v) == 0) {
      throw SchemaTooNew("the database's schema holds migration " + std::to_string(v) +
                         ", which this scangate does not know (its newest is " +
                         std::to_string(known.empty() ? 0 : *known.rbegin()) +
                         "): it was written by a newer scangate, whose layout this one cannot write safely; "
                         "run that version (or a newer one)");
    }
  }
  int count = 0;
  for (const Migration& m : EmbeddedMigrations()) {
    if (applied.count(m.version) != 0 || m.version > up_to) continue;
    tx.exec(std::string(m.sql), "migration " + std::to_string(m.version));
    tx.exec_params0(kRecordMigrationSql, m.version, std::string(m.name));
    ++count;
  }
  tx.commit();
  return count;
}

}  // namespace scangate::storage
