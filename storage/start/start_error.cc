#include "storage/start/start_error.h"

#include <string>
#include <string_view>

#include <pqxx/pqxx>

#include "storage/pg/sql_state.h"

namespace scangate::storage {
namespace {

constexpr std::size_t kMaxCauseChars = 300;  // first line of the message, truncated

struct StartFailure {
  std::string sqlstate;  // "" when unknown
  bool permanent = false;
  std::string note;      // said in the log next to the cause
};

StartFailure ClassifyConnectError(std::string_view what) {
  const auto has = [what](std::string_view s) { return what.find(s) != std::string_view::npos; };
  if (has("password authentication failed")) return {"28P01", true, "authentication failed"};
  if (has("no password supplied")) return {"28P01", true, "the server wants a password and none was given"};
  if (has("authentication failed") || has("no pg_hba.conf entry") || has("is not permitted to log in") ||
      (has("role \"") && has("does not exist"))) {
    return {"28000", true, "authentication / authorization failed"};
  }
  if (has("permission denied")) return {"42501", true, "permission denied"};
  if (has("database \"") && has("does not exist")) {
    return {"3D000", false, "the database does not exist; create it — retrying until it does"};
  }
  return {"", false, ""};
}

StartFailure ClassifySqlError(const std::string& sqlstate) {
  // Class 28: invalid authorization; class 42: syntax error or access rule violation (42501 permission
  // denied, e.g. no CREATE on schema public — PostgreSQL 15's default for non-owners). Neither heals.
  const bool permanent = sqlstate.rfind("28", 0) == 0 || sqlstate.rfind("42", 0) == 0;
  return {sqlstate, permanent, permanent ? "retrying cannot help; fix the role or the database" : ""};
}

std::string StartCause(const StartFailure& f, std::string_view what) {
  std::string cause = f.sqlstate.empty() ? std::string("connection") : f.sqlstate;
  cause += ": ";
  what = what.substr(0, what.find('\n'));
  cause += what.substr(0, kMaxCauseChars);
  if (!f.note.empty()) cause += " (" + f.note + ")";
  return cause;
}

}  // namespace

StartError ClassifyStartError(const std::exception& e) {
  StartFailure f;
  if (const auto* sql = dynamic_cast<const pqxx::sql_error*>(&e)) {
    f = ClassifySqlError(SqlStateOf(*sql));
  } else if (dynamic_cast<const pqxx::broken_connection*>(&e) != nullptr) {
    f = ClassifyConnectError(e.what());
  }
  return StartError(StartCause(f, e.what()), f.sqlstate, f.permanent);
}

}  // namespace scangate::storage
