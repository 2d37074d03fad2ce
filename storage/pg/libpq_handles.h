// libpq handles that close themselves: a connection (PQfinish) and a result (PQclear), for the units that speak
// libpq directly rather than through libpqxx — the follower (storage/follow/), the peers' threads (storage/peers/).
#pragma once

#include <memory>

#include <libpq-fe.h>

namespace scangate::storage {

struct PgConnCloser {
  void operator()(PGconn* c) const { PQfinish(c); }
};
using PgConnPtr = std::unique_ptr<PGconn, PgConnCloser>;
struct PgResultClearer {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgResultPtr = std::unique_ptr<PGresult, PgResultClearer>;

}  // namespace scangate::storage
