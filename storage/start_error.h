// Classification of Store::Start() failures (StartError, declared in store.h): which SQLSTATE, and whether
// retrying can ever help. libpq reports connection-phase errors as text only (no SQLSTATE), so those are
// recognised by PostgreSQL's English message (with another lc_messages they count as transient and keep
// backing off); SQL errors carry their SQLSTATE. The cause text never holds a password (libpq's and
// PostgreSQL's messages never quote it).
#pragma once

#include <exception>

#include "storage/store.h"

namespace scangate::storage {

// Permanent: authentication failed / no pg_hba.conf entry / unknown role (28P01, 28000), permission denied
// (42501), any other class 28 or 42 SQL error. Transient, with a note: the database does not exist
// (3D000; it may be created). Anything else: transient. what() = "<SQLSTATE or connection>: <first line>".
StartError ClassifyStartError(const std::exception& e);

}  // namespace scangate::storage
