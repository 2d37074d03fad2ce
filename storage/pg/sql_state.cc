#include "storage/pg/sql_state.h"

#include <pqxx/pqxx>

namespace scangate::storage {

std::string SqlStateOf(const pqxx::sql_error& e) {
  if (!e.sqlstate().empty()) return e.sqlstate();
  if (dynamic_cast<const pqxx::insufficient_privilege*>(&e) != nullptr) return "42501";
  if (dynamic_cast<const pqxx::undefined_table*>(&e) != nullptr) return "42P01";
  if (dynamic_cast<const pqxx::undefined_column*>(&e) != nullptr) return "42703";
  if (dynamic_cast<const pqxx::undefined_function*>(&e) != nullptr) return "42883";
  if (dynamic_cast<const pqxx::syntax_error*>(&e) != nullptr) return "42601";
  if (dynamic_cast<const pqxx::feature_not_supported*>(&e) != nullptr) return "0A000";
  if (dynamic_cast<const pqxx::disk_full*>(&e) != nullptr) return "53100";
  if (dynamic_cast<const pqxx::out_of_memory*>(&e) != nullptr) return "53200";
  if (dynamic_cast<const pqxx::insufficient_resources*>(&e) != nullptr) return "53000";
  if (dynamic_cast<const pqxx::data_exception*>(&e) != nullptr) return "22000";
  if (dynamic_cast<const pqxx::integrity_constraint_violation*>(&e) != nullptr) return "23000";
  return "";
}

}  // namespace scangate::storage
