// PgConnection: a writer's pqxx connection that also hands out its libpq handle, for the statements pqxx 6.4
// cannot send (the binary COPY of storage/pg/batch_statement.h, whose BEGIN, COPY and COMMIT share round trips).
// Invariant: raw() is the handle of this very connection for its whole life — pqxx never swaps it, since
// reactivation (pqxx's silent reconnect) is inhibited before raw() can be read; a lost connection is replaced
// by a new PgConnection, never repaired. Use: one per writer thread; raw() only while no pqxx transaction is
// open on it, and hand it back idle (no open transaction, no pending result).
#pragma once

#include <libpq-fe.h>

#include <string>

#include <pqxx/pqxx>

namespace scangate::storage {

class PgConnection : public pqxx::connection {
 public:
  // Connects (throws what pqxx::connection throws), inhibits reactivation, and reads the handle (one
  // BEGIN / ROLLBACK round trip each, once per connection).
  explicit PgConnection(const std::string& conninfo);

  PGconn* raw() const { return raw_; }

  // For an idle connection (no transaction open, no result pending): false when the server has closed it —
  // e.g. a fast shutdown terminated its backend while the writer had nothing to write. Never blocks: reads
  // only what already arrived (a poll with zero timeout, then PQconsumeInput). Owner's thread.
  bool IdleAlive() const;

 private:
  PGconn* raw_ = nullptr;
};

}  // namespace scangate::storage
