// HandClosedEpoch: a closed epoch made by hand for the epochs' tests (issue 54; nothing in the product closes one
// yet): a table like scan_keys holding chosen rows, listed in scangate_epochs as closed with or without a summary
// of its rows; table and catalog row dropped when it goes. Unique(): a table name no other case uses.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <utility>

#include <pqxx/pqxx>

#include "storage/epochs/summary_build.h"
#include "storage/pg/pg_connection.h"
#include "tests/storage/pg_test_db.h"

namespace scangate::storage {

// A closed epoch made by hand: table `name` like scan_keys and its catalog row; both dropped when it goes.
class HandClosedEpoch {
 public:
  explicit HandClosedEpoch(std::string name) : name_(std::move(name)), c_(PgTestUrl()) {
    pqxx::work tx(c_);
    tx.exec("CREATE TABLE " + name_ + " (LIKE scan_keys INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING INDEXES)");
    tx.commit();
  }
  ~HandClosedEpoch() {
    try {
      pqxx::work tx(c_);
      tx.exec("DELETE FROM scangate_epochs WHERE relation = " + tx.quote(name_));
      tx.exec("DROP TABLE IF EXISTS " + name_);
      tx.commit();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "dropping " << name_ << ": " << e.what();
    }
  }
  // A row of `d` first seen `age` ago (and pinned until `pin` from now when given).
  void Add(const Digest& d, std::chrono::seconds age, std::optional<std::chrono::seconds> pin = std::nullopt) {
    pqxx::work tx(c_);
    tx.exec_params("INSERT INTO " + name_ +
                       " (digest, first_seen, keep_until) VALUES (scangate_stored_digest($1::bytea), now() - $2 * "
                       "interval '1 second', now() + $3 * interval '1 second')",
                   HexBytea(d), age.count(), pin ? std::optional<std::int64_t>(pin->count()) : std::nullopt);
    tx.commit();
  }
  // Lists it in the catalog as closed, with a summary of its rows or none.
  void Close(bool with_summary) {
    std::optional<std::string> bytes;
    if (with_summary) bytes = BuildEpochSummary(c_.raw(), name_).Serialize();
    pqxx::work tx(c_);
    if (bytes) {
      tx.exec_params("INSERT INTO scangate_epochs (relation, state, summary) VALUES ($1, 'closed', $2)", name_,
                     pqxx::binarystring(bytes->data(), bytes->size()));
    } else {
      tx.exec_params("INSERT INTO scangate_epochs (relation, state) VALUES ($1, 'closed')", name_);
    }
    tx.commit();
  }
  const std::string& name() const { return name_; }
  // The first_seen of `d`'s row here, µs since the epoch.
  std::int64_t FirstSeenUs(const Digest& d) {
    pqxx::work tx(c_);
    return tx.exec_params1("SELECT (extract(epoch FROM first_seen) * 1000000)::int8 FROM " + name_ +
                               " WHERE digest = scangate_stored_digest($1::bytea)",
                           HexBytea(d))[0]
        .as<std::int64_t>();
  }

 private:
  std::string name_;
  PgConnection c_;  // raw(): BuildEpochSummary
};

// `base` with a random suffix (tables of several cases never meet).
inline std::string Unique(const char* base) { return std::string(base) + "_" + std::to_string(std::random_device{}()); }

}  // namespace scangate::storage
