// Black-box tests of an instance whose clock is off PostgreSQL's (storage/clock/pg_clock.h): the instance's wall
// clock is shifted by tests/clock_shift (LD_PRELOAD of libscangate_clock_shift.so, SCANGATE_CLOCK_SHIFT_SECONDS),
// PostgreSQL's is not, with a short horizon (--retention = --window, the default pairing). The shift works under
// every build the test command runs (release, ASan+UBSan): libfaketime hung the ASan binary at start on some
// machines (clock_shift.c says why). Each test first checks the shift took effect, from the instance's own log
// timestamps, so a preload that silently does nothing fails instead of passing.
// - ack=filter, the instance's clock an hour ahead, horizon 2 s: a key answered `new` is sent again once the
//   filter has surely forgotten it (6.5 s later): `new` again, and that must be because PostgreSQL's horizon passed
//   too — its row taken over (a later first_seen), never a write-behind row that met the live first row
//   (scangate_write_behind_conflicts_total). On 87ad733 (first_seen from the instance's clock, an hour in
//   PostgreSQL's future) the filter forgot the key while PostgreSQL held it for an hour: a trusted second `new`
//   whose row conflicted, seen failing.
// - ack=commit, the instance's clock an hour behind, horizon 3 s: a key's repeat past the horizon is `new` again
//   (PostgreSQL takes its row over), not a recent-set `duplicate` that PostgreSQL would not give. On 87ad733 (the
//   recent set judged PostgreSQL's first_seen by the instance's clock) every repeat for an hour was a duplicate: a
//   lost event, seen failing.
#include <chrono>
#include <ctime>
#include <iomanip>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "harness.h"

namespace scangate::it {
namespace {

namespace json = boost::json;
using Clock = std::chrono::steady_clock;

// Starts `p` with its wall clock `offset_s` seconds off PostgreSQL's: only the child is affected. Then checks that
// the child's clock really is off: the "ts" of its log lines (system_clock) against this process's clock.
::testing::AssertionResult StartWithClockOffset(ScangateProcess& p, std::int64_t offset_s) {
  p.SetEnv("LD_PRELOAD", SCANGATE_CLOCK_SHIFT_LIBRARY);
  p.SetEnv("SCANGATE_CLOCK_SHIFT_SECONDS", std::to_string(offset_s));
  const auto before = std::chrono::system_clock::now();
  if (auto started = p.Start(); !started) return started;
  const auto after = std::chrono::system_clock::now();
  const auto events = p.LogEvents("listening");
  if (events.empty()) return ::testing::AssertionFailure() << "no `listening` log line to read the clock from";
  std::tm tm{};
  const std::string ts(events.front().at("ts").as_string());
  std::istringstream in(ts);
  in >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%S");
  if (in.fail()) return ::testing::AssertionFailure() << "unreadable log time " << ts;
  const auto logged = std::chrono::system_clock::from_time_t(::timegm(&tm));
  const auto shift = std::chrono::seconds(offset_s);
  // Whole seconds (the fraction is cut): the logged time lies in [before + shift - 1 s, after + shift].
  if (logged < before + shift - std::chrono::seconds(1) || logged > after + shift) {
    return ::testing::AssertionFailure() << "the instance's clock is not " << offset_s << " s off: it logged " << ts;
  }
  return ::testing::AssertionSuccess();
}

std::string TempDir(const char* tag) {
  std::string tmpl = "/tmp/scangate-";
  tmpl.append(tag).append(".XXXXXX");
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  return tmpl;
}

// The row's first_seen as µs since the epoch (PostgreSQL's), or -1 without a row.
std::int64_t RowFirstSeenUs(Pg& pg, const std::string& key) {
  pqxx::nontransaction tx(pg.conn());
  const auto r = tx.exec_params("SELECT (extract(epoch FROM first_seen) * 1000000)::int8 FROM scan_keys "
                                "WHERE digest = scangate_stored_digest(decode($1, 'hex'))",
                                Sha256Hex(key));
  return r.empty() ? -1 : r[0][0].as<std::int64_t>();
}

bool WaitDrained(HttpClient& c) {
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (Clock::now() < deadline) {
    const json::object stats = c.Get("/stats").json();
    if (stats.contains("journal") && stats.at("journal").at("backlog").to_number<std::uint64_t>() == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

TEST(ServiceClock, InstanceAheadOfPostgreSQLNeverAnswersNewForALiveRow) {
  std::string journal = "--journal-dir=";
  journal.append(TempDir("clock-ahead"));
  ScangateProcess a({"--ack=filter", "--capacity=100000", "--retention=2s", journal});
  ASSERT_TRUE(StartWithClockOffset(a, 3600));
  HttpClient c(a.port());
  Pg pg;
  const std::string key = UniqueKey("clock-ahead");
  const HttpResponse first = c.Post("/observe", ObserveBody(key));
  ASSERT_EQ(first.status, 201) << first;
  ASSERT_TRUE(WaitDrained(c));
  const std::int64_t first_row = RowFirstSeenUs(pg, key);
  ASSERT_GT(first_row, 0);
  // Not observed meanwhile (an observation sets the key's bits again): past the horizon and past the filter's
  // memory of it — two generations of --window (2 s) each, rotated by the 1 s maintenance tick: at most 6 s.
  std::this_thread::sleep_for(std::chrono::milliseconds(6500));
  const HttpResponse again = c.Post("/observe", ObserveBody(key));
  ASSERT_EQ(again.status, 201) << "past the horizon and the filter's memory: " << again;
  ASSERT_TRUE(WaitDrained(c));
  EXPECT_EQ(ScrapeMetric(c, "scangate_write_behind_conflicts_total"), 0.0)
      << "the second `new` was written behind into the row PostgreSQL still held: two `new`s inside its horizon";
  EXPECT_NE(RowFirstSeenUs(pg, key), first_row)
      << "the row was not taken over: PostgreSQL still held the first observation when the key was `new` again";
  EXPECT_EQ(a.Stop(), 0);
}

TEST(ServiceClock, InstanceBehindPostgreSQLDoesNotAnswerDuplicatePastTheHorizon) {
  ScangateProcess a({"--ack=commit", "--capacity=100000", "--retention=3s"});
  ASSERT_TRUE(StartWithClockOffset(a, -3600));
  HttpClient c(a.port());
  const std::string key = UniqueKey("clock-behind");
  const HttpResponse first = c.Post("/observe", ObserveBody(key));
  ASSERT_EQ(first.status, 201) << first;
  const HttpResponse repeat = c.Post("/observe", ObserveBody(key));
  EXPECT_EQ(repeat.status, 200) << repeat;  // inside the horizon: a duplicate (from the recent set)
  std::this_thread::sleep_for(std::chrono::seconds(4));  // past the 3 s horizon by PostgreSQL's clock
  const HttpResponse late = c.Post("/observe", ObserveBody(key));
  EXPECT_EQ(late.status, 201) << "a repeat past the horizon was answered duplicate from the recent set, where "
                                 "PostgreSQL takes the expired row over: " << late;
  EXPECT_EQ(a.Stop(), 0);
}

}  // namespace
}  // namespace scangate::it
