// Schema migrations: the numbered sql/NNN_name.sql files, embedded at build time (storage/start/embed_sql.cmake)
// and applied in order, each exactly once per database, recorded in schema_migrations.
// Invariant: concurrent starters serialise on a transaction-scoped advisory lock, so a migration never
// runs twice and a half-applied set is never committed; a database that holds a migration this binary does not have
// (a newer scangate's schema: its layout may hold what this one does not check, e.g. closed epochs) is refused,
// never written beside. Used by Store::Start(); tests call it directly.
#pragma once

#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace pqxx {
class connection_base;
}

namespace scangate::storage {

struct Migration {
  int version;              // NNN of the file name; applied in increasing order
  std::string_view name;    // the _name part
  std::string_view sql;     // file contents
};

// The migrations compiled into this binary, sorted by version. Thread-safe (immutable).
std::span<const Migration> EmbeddedMigrations();

// The database's schema is newer than this binary: it records a migration this binary does not embed. Permanent
// (Store::Start exits): run a scangate that knows it. what() names both versions.
class SchemaTooNew : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Applies every embedded migration not yet recorded, in one transaction guarded by
// pg_advisory_xact_lock. Idempotent. Returns how many were applied now. Throws pqxx errors, and SchemaTooNew
// (nothing applied) when the database records a migration this binary does not embed.
// `up_to`: only versions up to it (tests: a database as an older scangate left it, e.g. 10 = before sql/013).
int ApplyMigrations(pqxx::connection_base& conn, int up_to = std::numeric_limits<int>::max());

}  // namespace scangate::storage
