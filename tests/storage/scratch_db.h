// ScratchDb: a database of its own on the fixture's cluster (CTest fixture "pg"), created with a unique name
// and dropped (WITH (FORCE)) when the object goes — for tests that need several databases at once: the
// partitions of a partitioned store and the PL/Proxy proxy database. Its conninfo is the key=value form a
// PL/Proxy cluster option holds (no password: the fixture trusts local connections).
#pragma once

#include <random>
#include <string>

#include <pqxx/pqxx>

#include "tests/storage/pg_test_db.h"

namespace scangate::storage {

// The key=value connection string of database `name` on the fixture's cluster.
inline std::string FixtureConninfo(const std::string& name) {
  return "host=127.0.0.1 port=" + ReadFileLine(PgDir() + "/port") + " user=postgres dbname=" + name +
         " connect_timeout=3";
}

// Runs `sql` outside a transaction on the fixture's main database (CREATE/DROP/ALTER DATABASE).
inline void AdminExec(const std::string& sql) {
  pqxx::connection c(PgTestUrl());
  pqxx::nontransaction tx(c);
  tx.exec(sql);
}

struct ScratchDb {
  std::string name;
  std::string conninfo;
  explicit ScratchDb(const std::string& prefix)
      : name(prefix + "_" + std::to_string(std::random_device{}() % 100000000)), conninfo(FixtureConninfo(name)) {
    AdminExec("CREATE DATABASE " + name);
  }
  ~ScratchDb() {
    try {
      AdminExec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
    } catch (...) {
    }
  }
  ScratchDb(const ScratchDb&) = delete;
  ScratchDb& operator=(const ScratchDb&) = delete;
  // Runs `sql` in this database (autocommit).
  void Exec(const std::string& sql) const {
    pqxx::connection c(conninfo);
    pqxx::nontransaction tx(c);
    tx.exec(sql);
  }
};

}  // namespace scangate::storage
