// StartError: why Store::Start() failed, and whether retrying can ever help; ClassifyStartError maps a
// pqxx / libpq failure to one. libpq reports connection-phase errors as text only (no SQLSTATE), so those are
// recognised by PostgreSQL's English message (with another lc_messages they count as transient and keep
// backing off); SQL errors carry their SQLSTATE. Invariant: the cause text never holds a password (libpq's
// and PostgreSQL's messages never quote it).
#pragma once

#include <exception>
#include <stdexcept>
#include <string>
#include <utility>

namespace scangate::storage {

// `permanent`: a misconfiguration retrying cannot heal (authentication failed, permission denied, a migration
// PostgreSQL rejects as invalid) — exit instead of retrying. `cause` is "<SQLSTATE or kind>: <first line of
// the message>" (never the password).
class StartError : public std::runtime_error {
 public:
  StartError(const std::string& cause, std::string sqlstate, bool permanent)
      : std::runtime_error(cause), sqlstate_(std::move(sqlstate)), permanent_(permanent) {}
  const std::string& sqlstate() const { return sqlstate_; }  // "" when libpq gave none (connection phase)
  bool permanent() const { return permanent_; }

 private:
  std::string sqlstate_;
  bool permanent_;
};

// Permanent: authentication failed / no pg_hba.conf entry / unknown role (28P01, 28000), permission denied
// (42501), any other class 28 or 42 SQL error. Transient, with a note: the database does not exist
// (3D000; it may be created). Anything else: transient. what() = "<SQLSTATE or connection>: <first line>".
StartError ClassifyStartError(const std::exception& e);

}  // namespace scangate::storage
