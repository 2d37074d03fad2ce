// LeaveOneOpenEpoch: puts a test database's exact store back to one open epoch — every other epoch's table and
// catalog row and the prepared next epoch dropped — as the epochs' test cases (issue 54) start. The open epoch's
// rows are kept.
#pragma once

#include <pqxx/pqxx>
#include <string>

namespace scangate::storage {

inline void LeaveOneOpenEpoch(const std::string& url) {
  pqxx::connection c(url);
  pqxx::work tx(c);
  for (const auto& row : tx.exec("SELECT relation FROM scangate_epochs WHERE state <> 'open'")) {
    tx.exec("DROP TABLE IF EXISTS " + tx.quote_name(row[0].as<std::string>()));
  }
  tx.exec("DELETE FROM scangate_epochs WHERE state <> 'open'");
  tx.exec("DROP TABLE IF EXISTS scan_keys_upcoming");
  tx.commit();
}

}  // namespace scangate::storage
