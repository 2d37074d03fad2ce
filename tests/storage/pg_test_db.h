// Test helpers for storage/ tests that talk to the throwaway PostgreSQL of CTest fixture "pg"
// (tests/pg_fixture.sh): its directory and URL, stopping/starting it, random digests (reruns against one
// cluster never collide), bytea literals, row counts, and a scratch database whose encoding rejects some
// sources.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <optional>
#include <string>
#include <vector>

#include <pqxx/pqxx>

#include "core/digest.h"
#include "storage/start/migrations.h"

namespace scangate::storage {

// The first line of `path` ("" when unreadable).
inline std::string ReadFileLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The fixture's directory (SCANGATE_TEST_PG_DIR: url, port, pgdata files).
inline std::string PgDir() {
  const char* dir = std::getenv("SCANGATE_TEST_PG_DIR");
  return dir != nullptr ? dir : "";
}

// The fixture's libpq URL; "" when the fixture did not run.
inline std::string PgTestUrl() { return ReadFileLine(PgDir() + "/url"); }

// Applies the migrations to the fixture's database once per test binary (as Store::Start does), for tests
// of units that read scan_keys without a Store of their own.
inline void MigrateOnce() {
  static const bool done = [] {
    pqxx::connection c(PgTestUrl());
    ApplyMigrations(c);
    return true;
  }();
  (void)done;
}

// A uniformly random digest. Thread-safe.
inline Digest RandomDigest() {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard lk(mu);
  Digest d;
  for (std::size_t i = 0; i < d.size(); i += 8) {
    const std::uint64_t v = rng();
    std::memcpy(d.data() + i, &v, 8);
  }
  return d;
}

inline std::vector<Digest> RandomDigests(std::size_t n) {
  std::vector<Digest> out(n);
  for (auto& d : out) d = RandomDigest();
  return out;
}

// `d` as a bytea hex literal body ("\\x..."), for SQL written by tests.
inline std::string HexBytea(const Digest& d) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s = "\\x";
  for (const auto b : d) {
    s += kHex[b >> 4];
    s += kHex[b & 15];
  }
  return s;
}

// The stored form of `d` (core/digest.h StoredDigest: what scan_keys holds of it) as HexBytea renders it, and the SQL
// that renders a row's digest the same way (sql/013's uuid, padded with zeros to 32 bytes).
inline std::string StoredHexBytea(const Digest& d) { return HexBytea(StoredDigest(d)); }
inline constexpr const char* kStoredHexByteaSql = "'\\x' || rpad(encode(uuid_send(digest), 'hex'), 64, '0')";

// A lot as scan_keys holds it and reads it back (sql/013: its stored form), for comparing what was sent with what
// a duplicate or a lookup reports.
inline std::optional<Digest> StoredLot(const std::optional<Digest>& lot) {
  if (!lot) return std::nullopt;
  return StoredDigest(*lot);
}

// How many of `ds` are rows of scan_keys.
inline std::int64_t CountRows(pqxx::connection& c, const std::vector<Digest>& ds) {
  pqxx::work tx(c);
  std::int64_t n = 0;
  for (const auto& d : ds) {
    n += tx.exec_params1("SELECT count(*) FROM scan_keys WHERE digest = scangate_stored_digest($1::bytea)", HexBytea(d))[0].as<std::int64_t>();
  }
  tx.commit();
  return n;
}

// Runs scripts/pg.sh CMD on the fixture's cluster (stop, start, kill); its exit status.
// On fixture "pg" the cluster is shared by tests running side by side (tests/CMakeLists.txt): refused there, so a
// test that stops it must be registered with scangate_pg_solo_test.
inline int PgCtl(const std::string& cmd) {
  if (const char* shared = std::getenv("SCANGATE_TEST_PG_SHARED"); shared != nullptr && std::string(shared) == "1") {
    std::fprintf(stderr, "refused: pg.sh %s of the shared PostgreSQL of fixture \"pg\"; register this test with "
                         "scangate_pg_solo_test (tests/CMakeLists.txt)\n", cmd.c_str());
    return 1;
  }
  const char* src = std::getenv("SCANGATE_SOURCE_DIR");
  std::string line = std::string(src != nullptr ? src : ".") + "/scripts/pg.sh " + cmd + " " +
                     ReadFileLine(PgDir() + "/pgdata");
  if (cmd == "start") line += " " + ReadFileLine(PgDir() + "/port");
  return std::system(line.c_str());
}

// Restarts the cluster when the test ends, even on failure, so later tests find it running.
struct RestartGuard {
  bool stopped = false;
  // Stops the cluster (pg_ctl stop); once that succeeded the destructor starts it again. pg_ctl's status.
  int Stop() {
    const int status = PgCtl("stop");
    if (status == 0) stopped = true;
    return status;
  }
  ~RestartGuard() {
    if (stopped) PgCtl("start");
  }
};

// A database whose encoding cannot hold every source (LATIN1): a source with "€" is a row PostgreSQL
// always rejects (SQLSTATE 22P05). Dropped when the object goes.
struct Latin1Db {
  std::string name = "scangate_latin1_" + std::to_string(std::random_device{}() % 1000000);
  std::string url;
  Latin1Db() {
    pqxx::connection c(PgTestUrl());
    pqxx::nontransaction tx(c);
    tx.exec("CREATE DATABASE " + name + " ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0");
    url = PgTestUrl();
    const auto slash = url.rfind('/'), query = url.find('?', slash);
    // No client_encoding here: the store itself must declare its sources UTF-8 (else "€" is stored as
    // three LATIN1 characters and nothing fails).
    url = url.substr(0, slash + 1) + name + (query == std::string::npos ? "" : url.substr(query));
  }
  ~Latin1Db() {
    try {
      pqxx::connection c(PgTestUrl());
      pqxx::nontransaction tx(c);
      tx.exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
    } catch (...) {
    }
  }
  Latin1Db(const Latin1Db&) = delete;
  Latin1Db& operator=(const Latin1Db&) = delete;
};

}  // namespace scangate::storage
