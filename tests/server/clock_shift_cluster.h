// PostgreSQL's clock off this host's, for the black-box tests of a clock that steps (service_clock_step_test,
// service_clock_forward_test): fixture "pg_clock"'s cluster restarted under tests/clock_shift's LD_PRELOAD, its clock
// shifted from its start (a failover onto a host whose clock is off) and/or stepped while it runs (a shift file: an
// NTP step), and the write stall that outlives a restart (a PREPARED transaction). ClockShiftCluster is the cases'
// fixture: each case starts on the cluster's own clock, and the suite leaves it so. Needs the compile definition
// SCANGATE_CLOCK_SHIFT_LIBRARY (tests/server/CMakeLists.txt); fixture "pg_clock", one test at a time.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "harness.h"

namespace scangate::it {

constexpr const char* kStallName = "scangate-clock-step-stall";
constexpr auto kClockBound = std::chrono::seconds(30);  // failure detection only

inline std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (const char ch : s) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

// The preload, copied where PostgreSQL can read it: its postmaster runs as user postgres when the test runs as root,
// and the build folder of a private (mode 700) clone is not readable to it (ld.so then ignores the preload and the
// clock never steps). Copied once per run into a folder of its own under /tmp, mode 755/644; checked readable as
// postgres, failing at once with the file's name otherwise (issue 53: a program run as another user reads copies).
inline const std::string& PreloadForPostgres() {
  static const std::string path = [] {
    const std::string dir = TempDir("clock-shift-lib");
    ::chmod(dir.c_str(), 0755);
    const std::string to = dir + "/libscangate_clock_shift.so";
    std::filesystem::copy_file(SCANGATE_CLOCK_SHIFT_LIBRARY, to, std::filesystem::copy_options::overwrite_existing);
    ::chmod(to.c_str(), 0644);
    if (::geteuid() == 0 && std::system(("runuser -u postgres -- test -r " + ShellQuote(to)).c_str()) != 0) {
      throw std::runtime_error("user postgres cannot read the clock-shift preload " + to);
    }
    return to;
  }();
  return path;
}

// scripts/pg.sh start of the fixture's cluster, its postmaster's wall clock shifted by `shift_s` seconds (0: none),
// and by the seconds `shift_file` holds while it runs ("": none; tests/clock_shift re-reads it every 5 ms).
inline int StartCluster(std::int64_t shift_s, const std::string& shift_file = "") {
  const TestEnv& env = Env();
  std::string cmd;
  if (shift_s != 0 || !shift_file.empty()) {
    cmd = std::string("LD_PRELOAD=") + ShellQuote(PreloadForPostgres()) +
          " SCANGATE_CLOCK_SHIFT_SECONDS=" + std::to_string(shift_s) + " ";
    if (!shift_file.empty()) cmd += "SCANGATE_CLOCK_SHIFT_FILE=" + ShellQuote(shift_file) + " ";
  }
  cmd += ShellQuote(env.source_dir + "/scripts/pg.sh") + " start " + ShellQuote(env.pgdata) + " " +
         ShellQuote(env.pg_port);
  return std::system(cmd.c_str());
}

// Writes the running cluster's further clock offset (StartCluster's `shift_file`) and waits out the preload's 5 ms.
inline void StepRunningClock(const std::string& file, std::int64_t seconds) {
  std::ofstream(file, std::ios::trunc) << seconds << "\n";
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

// A shift file at 0 in a folder of its own that PostgreSQL (user postgres) can read; `dir` gets the folder (the
// case's journals go under it too).
inline std::string MakeShiftFile(const char* tag, std::string& dir) {
  dir = TempDir(tag);
  ::chmod(dir.c_str(), 0755);
  const std::string file = dir + "/shift";
  StepRunningClock(file, 0);
  ::chmod(file.c_str(), 0644);
  return file;
}

// An --ack=filter instance on its own journal, following the database (it learns what the others record) and
// publishing its watermark as a peer.
inline std::vector<std::string> InstanceFlags(const std::string& journal_dir) {
  return {"--ack=filter", "--capacity=1000000", "--follow=poll", "--follow-max-lag=200ms", "--peer-wait=300ms",
          "--journal-dir=" + journal_dir};
}

inline void Sql(const std::string& sql) {
  pqxx::connection c(Env().pg_url);
  pqxx::nontransaction tx(c);
  tx.exec0(sql);
}

// PostgreSQL's clock minus this host's, in seconds (the shift took effect, or not).
inline double ServerOffsetSeconds() {
  pqxx::connection c(Env().pg_url);
  pqxx::nontransaction tx(c);
  const double server = tx.exec1("SELECT extract(epoch FROM clock_timestamp())::float8")[0].as<double>();
  return server - std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

inline bool Ready(std::uint16_t port) {
  try {
    HttpClient c(port);
    return c.Get("/readyz").status == 200;
  } catch (const std::exception&) {
    return false;
  }
}

inline bool WaitReady(std::uint16_t port) {
  const auto deadline = std::chrono::steady_clock::now() + kClockBound;
  while (std::chrono::steady_clock::now() < deadline) {
    if (Ready(port)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// The cluster for the clock cases: prepared transactions allowed (the stall that outlives a restart); back to its own
// clock and settings at the end, whatever the case left (a prepared stall would hang every later test).
class ClockShiftCluster : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { Sql("ALTER SYSTEM SET max_prepared_transactions = 4"); }
  // Each case starts on the cluster's own clock (the previous case left it shifted), with the setting in effect, and
  // with no step of it recorded (sql/017: the previous cases' steps would delay the expiry of every later test's
  // rows by their forward total).
  void SetUp() override {
    ASSERT_EQ(PgClusterStop(), 0);
    ASSERT_EQ(StartCluster(0), 0);
    ASSERT_LT(std::abs(ServerOffsetSeconds()), 5) << "PostgreSQL's clock is still shifted";
    ForgetSteps();
  }
  static void TearDownTestSuite() {
    Sql("ALTER SYSTEM RESET max_prepared_transactions");
    EXPECT_EQ(PgClusterStop(), 0);
    EXPECT_EQ(StartCluster(0), 0);
    ForgetSteps();
  }
  static void ForgetSteps() {
    Sql("DO $$ BEGIN IF to_regclass('scangate_clock_steps') IS NOT NULL THEN DELETE FROM scangate_clock_steps; END IF; END $$");
  }
  void TearDown() override {
    try {
      pqxx::connection c(Env().pg_url);
      pqxx::nontransaction tx(c);
      if (!tx.exec_params("SELECT 1 FROM pg_prepared_xacts WHERE gid = $1", std::string(kStallName)).empty()) {
        tx.exec0(std::string("ROLLBACK PREPARED '") + kStallName + "'");
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << "the prepared stall was not rolled back: " << e.what();
    }
  }

  // The write stall that survives a restart: LOCK TABLE scan_keys IN SHARE ROW EXCLUSIVE MODE (inserts wait, reads
  // go on) in a prepared transaction.
  static void PrepareStall() {
    pqxx::connection c(Env().pg_url);
    pqxx::nontransaction tx(c);
    tx.exec0("BEGIN");
    tx.exec0("LOCK TABLE scan_keys IN SHARE ROW EXCLUSIVE MODE");
    tx.exec0(std::string("PREPARE TRANSACTION '") + kStallName + "'");
  }
  static void ReleaseStall() { Sql(std::string("ROLLBACK PREPARED '") + kStallName + "'"); }

  // PostgreSQL restarted with its clock `shift_s` seconds off this host's (checked).
  static ::testing::AssertionResult StepTheClock(std::int64_t shift_s) {
    if (PgClusterStop() != 0) return ::testing::AssertionFailure() << "pg.sh stop failed";
    if (StartCluster(shift_s) != 0) return ::testing::AssertionFailure() << "pg.sh start (shifted) failed";
    const double offset = ServerOffsetSeconds();
    if (std::abs(offset - static_cast<double>(shift_s)) > 5) {
      return ::testing::AssertionFailure() << "PostgreSQL's clock is " << offset << " s off, not " << shift_s;
    }
    return ::testing::AssertionSuccess();
  }
};

}  // namespace scangate::it
