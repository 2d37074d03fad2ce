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

// libpq's default notice processor writes every notice to stderr: a line outside the JSON log (invariant 5's one
// stream), e.g. "FATAL:  terminating connection due to administrator command" when the server shuts down while
// the connection idles. These connections run scangate's own statements, whose failures reach the caller as
// errors (and become pg_state/follower/watermark/... log events): their notices are dropped. Call right after
// connecting; a null handle is left alone.
inline void DropNotices(PGconn* c) {
  if (c != nullptr) PQsetNoticeProcessor(c, [](void*, const char*) {}, nullptr);
}

}  // namespace scangate::storage
