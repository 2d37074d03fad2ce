// SqlStateOf: the SQLSTATE of a pqxx error, for code that decides by it (start-up classification, the BRIN
// summarizer's give-up). pqxx 6.4 passes the SQLSTATE only to a plain sql_error; its specialised classes
// (insufficient_privilege, undefined_table, ...) carry none, so for those the class stands for it: the most
// specific code the class implies. Internal to storage/.
#pragma once

#include <string>

namespace pqxx {
class sql_error;
}

namespace scangate::storage {

// The SQLSTATE of `e` ("" when neither the error nor its class tells one). Pure.
std::string SqlStateOf(const pqxx::sql_error& e);

}  // namespace scangate::storage
