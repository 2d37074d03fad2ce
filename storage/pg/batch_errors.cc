#include "storage/pg/batch_errors.h"

namespace scangate::storage {

namespace {
constexpr const char* kTxidStatusSql = "SELECT txid_status($1)";
}  // namespace

bool IsDataError(const pqxx::sql_error& e) {
  const std::string& state = e.sqlstate();
  return state.size() == 5 && state[0] == '2' && (state[1] == '2' || state[1] == '3');
}

TxStatus QueryTxidStatus(pqxx::connection& conn, std::int64_t xid, std::string* why) {
  try {
    pqxx::nontransaction tx(conn);
    const pqxx::result r = tx.exec_params(kTxidStatusSql, xid);
    if (r.size() != 1 || r[0][0].is_null()) {
      if (why != nullptr) *why = "txid_status is NULL: the transaction is too old for PostgreSQL to tell";
      return TxStatus::kUnknown;
    }
    const std::string status = r[0][0].c_str();
    if (status == "committed") return TxStatus::kCommitted;
    if (status == "aborted") return TxStatus::kAborted;
    if (status == "in progress") return TxStatus::kInProgress;
    if (why != nullptr) *why = "txid_status returned '" + status + "'";
    return TxStatus::kUnknown;
  } catch (const pqxx::broken_connection&) {
    throw;
  } catch (const pqxx::sql_error& e) {
    if (why != nullptr) {
      std::string what = e.what();
      *why = "txid_status failed: " + what.substr(0, what.find('\n'));
    }
    return TxStatus::kUnknown;
  }
}

}  // namespace scangate::storage
