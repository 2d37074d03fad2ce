#include "storage/pg/copy_out.h"

#include <memory>
#include <stdexcept>
#include <string_view>

#include "storage/pg/error_summary.h"
#include "storage/pg/libpq_handles.h"

namespace scangate::storage {

std::uint64_t CopyDigestsOut(PGconn* conn, const std::string& sql, const CopyDigestParser::Sink& sink,
                             const std::atomic<bool>* abort, const char* what) {
  const auto fail = [what](const std::string& message) {
    return std::runtime_error(std::string(what) + ": " + ErrorSummary(message));
  };
  {
    PgResultPtr r(PQexec(conn, sql.c_str()));
    if (PQresultStatus(r.get()) != PGRES_COPY_OUT) throw fail(PQerrorMessage(conn));
  }
  CopyDigestParser parser(sink);
  for (;;) {
    if (abort != nullptr && abort->load(std::memory_order_relaxed)) throw CopyOutAborted{};  // advisory flag only
    char* buf = nullptr;
    const int n = PQgetCopyData(conn, &buf, 0);
    if (n > 0) {
      std::unique_ptr<char, decltype(&PQfreemem)> owned(buf, &PQfreemem);
      parser.Feed(std::string_view(buf, static_cast<std::size_t>(n)));
      continue;
    }
    if (n == -2) throw fail(PQerrorMessage(conn));
    break;  // -1: COPY finished
  }
  bool ok = true;
  std::string error;
  while (PGresult* raw = PQgetResult(conn)) {
    PgResultPtr r(raw);
    if (PQresultStatus(r.get()) != PGRES_COMMAND_OK) {
      ok = false;
      error = PQresultErrorMessage(r.get());
    }
  }
  if (!ok) throw fail(error);
  return parser.Finish();
}

}  // namespace scangate::storage
