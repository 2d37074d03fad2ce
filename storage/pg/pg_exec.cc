#include "storage/pg/pg_exec.h"

#include <poll.h>

#include <cerrno>

#include "storage/pg/error_summary.h"

namespace scangate::storage {

PgResultPtr ExecWithin(PGconn* conn, const char* sql, std::span<const char* const> params, bool binary,
                       std::chrono::milliseconds within, const std::atomic<bool>& stop, std::string* error) {
  const int sent = params.empty() && !binary
                       ? PQsendQuery(conn, sql)
                       : PQsendQueryParams(conn, sql, static_cast<int>(params.size()), nullptr, params.data(), nullptr,
                                           nullptr, binary ? 1 : 0);
  if (sent != 1) {
    *error = ErrorSummary(PQerrorMessage(conn));
    return nullptr;
  }
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    // The statement is small: a blocking connection has sent all of it (PQsendQuery flushes), so only the answer is
    // waited for — on the socket, a slice at a time, so that `stop` and the bound are looked at in between.
    if (PQconsumeInput(conn) != 1) {
      *error = ErrorSummary(PQerrorMessage(conn));
      return nullptr;
    }
    if (PQisBusy(conn) == 0) break;
    if (stop.load()) {
      *error = "stopping";
      return nullptr;
    }
    if (within != kPgNoBound && std::chrono::steady_clock::now() - start >= within) {
      *error = "no answer within " + std::to_string(within.count()) +
               " ms (a network dropping packets, or a frozen server): the connection is given up";
      return nullptr;
    }
    pollfd pfd{PQsocket(conn), POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(kPgWaitSlice.count())) < 0 && errno != EINTR) {
      *error = "poll failed";
      return nullptr;
    }
  }
  PgResultPtr first(PQgetResult(conn));
  if (!first) {
    *error = ErrorSummary(PQerrorMessage(conn));
    return nullptr;
  }
  const ExecStatusType st = PQresultStatus(first.get());
  if (st == PGRES_COPY_BOTH || st == PGRES_COPY_OUT || st == PGRES_COPY_IN) return first;  // no end of results yet
  // The end of the results (one statement: one result). Complete already (PQisBusy said so): no wait.
  while (PGresult* more = PQgetResult(conn)) PQclear(more);
  return first;
}

}  // namespace scangate::storage
