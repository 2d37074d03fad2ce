#include "storage/peers/peer_connection.h"

#include <algorithm>
#include <thread>

#include "storage/pg/error_summary.h"

namespace scangate::storage::peers_detail {

ConnPtr Open(const std::string& conninfo, const char* application_name, const char* what) {
  const char* keys[] = {"dbname", "application_name", nullptr};
  const char* values[] = {conninfo.c_str(), application_name, nullptr};
  ConnPtr c(PQconnectdbParams(keys, values, /*expand_dbname=*/1));
  DropNotices(c.get());
  if (!c || PQstatus(c.get()) != CONNECTION_OK) {
    throw PeerError(std::string(what) + ": " + ErrorSummary(c ? PQerrorMessage(c.get()) : "out of memory"));
  }
  return c;
}

ResultPtr Exec(PGconn* c, const char* sql, const std::vector<std::optional<std::string>>& params, const char* what) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
  ResultPtr r(PQexecParams(c, sql, static_cast<int>(values.size()), nullptr, values.data(), nullptr, nullptr, 0));
  const ExecStatusType st = PQresultStatus(r.get());
  if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
    throw PeerError(std::string(what) + ": " + ErrorSummary(PQerrorMessage(c)));
  }
  return r;
}

void SleepUnlessStopped(std::chrono::nanoseconds d, const std::atomic<bool>& stop) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (!stop.load()) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= until) return;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(until - now, std::chrono::milliseconds(10)));
  }
}

}  // namespace scangate::storage::peers_detail
