#include "storage/pg/pg_connection.h"

#include <poll.h>

namespace scangate::storage {
namespace {

// pqxx 6.4 does not expose a connection's PGconn except to large objects: largeobject's protected static
// raw_connection(const dbtransaction&) is the one supported route, through a throwaway transaction.
struct RawConnection : pqxx::largeobject {
  static PGconn* Of(const pqxx::dbtransaction& tx) { return raw_connection(tx); }
};

}  // namespace

PgConnection::PgConnection(const std::string& conninfo) : pqxx::connection(conninfo) {
  // pqxx 6 would otherwise reconnect silently inside the next transaction — with a new PGconn, behind raw().
  // The writer owns reconnection (backoff, up/down state), so a lost connection must surface as an exception.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  inhibit_reactivation(true);
#pragma GCC diagnostic pop
  pqxx::read_transaction tx(*this);
  raw_ = RawConnection::Of(tx);
}  // ~tx: ROLLBACK

bool PgConnection::IdleAlive() const {
  if (PQstatus(raw_) != CONNECTION_OK) return false;
  pollfd p{PQsocket(raw_), POLLIN, 0};
  if (p.fd < 0) return false;
  if (::poll(&p, 1, 0) <= 0) return true;  // nothing arrived (an interrupted poll counts as nothing): alive
  // Something arrived while idle: a server that ends the session sends a FATAL error, then EOF.
  // PQconsumeInput fails on EOF and marks the connection bad.
  return PQconsumeInput(raw_) == 1 && PQstatus(raw_) == CONNECTION_OK;
}

}  // namespace scangate::storage
