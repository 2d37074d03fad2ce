// Schema migrations: the numbered sql/NNN_name.sql files, embedded at build time (storage/start/embed_sql.cmake)
// and applied in order, each exactly once per database, recorded in schema_migrations.
// Invariant: concurrent starters serialise on a transaction-scoped advisory lock, so a migration never
// runs twice and a half-applied set is never committed. Used by Store::Start(); tests call it directly.
#pragma once

#include <limits>
#include <span>
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

// Applies every embedded migration not yet recorded, in one transaction guarded by
// pg_advisory_xact_lock. Idempotent. Returns how many were applied now. Throws pqxx errors.
// `up_to`: only versions up to it (tests: a database as an older scangate left it, e.g. 10 = before sql/013).
int ApplyMigrations(pqxx::connection_base& conn, int up_to = std::numeric_limits<int>::max());

}  // namespace scangate::storage
