// Tests storage/horizon/brin_summarizer.h against the throwaway PostgreSQL of fixture "pg": migration 003 turns
// autosummarize off, a pass summarizes every range left (a second summarize then finds nothing), the thread
// runs passes by itself, and a role that does not own the index stops it for good (one failure, no retries).
#include "storage/horizon/brin_summarizer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <utility>

#include <pqxx/pqxx>

#include "tests/storage/pg_test_db.h"

namespace scangate::storage {
namespace {

std::string Url() { return PgTestUrl(); }

BrinSummarizerOptions Options(std::string url) {
  BrinSummarizerOptions o;
  o.conninfo = std::move(url);
  return o;
}

// `n` rows of fresh digests, straight into the table (as another instance or psql would).
void InsertRows(int n) {
  pqxx::connection c(Url());
  pqxx::work tx(c);
  tx.exec("INSERT INTO scan_keys (digest, seen_by) SELECT scangate_stored_digest(sha256(convert_to(gen_random_uuid()::text || i, 'UTF8'))), "
          "'brin test' FROM generate_series(1, " + std::to_string(n) + ") i");
  tx.commit();
}

// What a summarize pass would do now (and does: it summarizes what it counts).
int SummarizeNow() {
  pqxx::connection c(Url());
  pqxx::nontransaction tx(c);
  return tx.exec1("SELECT brin_summarize_new_values('scan_keys_first_seen_brin'::regclass)")[0].as<int>();
}

TEST(BrinSummarizer, MigrationTurnsAutosummarizeOff) {
  MigrateOnce();
  pqxx::connection c(Url());
  pqxx::nontransaction tx(c);
  const auto r = tx.exec1("SELECT array_to_string(reloptions, ',') FROM pg_class WHERE relname = "
                          "'scan_keys_first_seen_brin'");
  const std::string options = r[0].c_str();
  EXPECT_NE(options.find("autosummarize=off"), std::string::npos) << options;
  EXPECT_NE(options.find("pages_per_range=32"), std::string::npos) << options;
}

TEST(BrinSummarizer, PassSummarizesEveryRangeLeft) {
  MigrateOnce();
  BrinSummarizer s(Options(Url()));
  s.RunOnce();  // whatever earlier tests left
  // 20 000 rows of ~90 B: ~230 heap pages, i.e. ~7 ranges of 32 pages.
  InsertRows(20000);
  const int ranges = s.RunOnce();
  EXPECT_GE(ranges, 5);
  EXPECT_EQ(SummarizeNow(), 0) << "the pass left ranges unsummarized";
  const BrinSummarizerStats st = s.Stats();
  EXPECT_EQ(st.passes, 2u);
  EXPECT_GE(st.ranges, static_cast<std::uint64_t>(ranges));
  EXPECT_EQ(st.failures, 0u);
}

TEST(BrinSummarizer, ThreadRunsPassesByItself) {
  MigrateOnce();
  SummarizeNow();
  InsertRows(10000);
  BrinSummarizerOptions o = Options(Url());
  o.interval = std::chrono::milliseconds(50);
  BrinSummarizer s(o);
  s.Start();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (s.Stats().ranges == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  s.Shutdown();
  EXPECT_GT(s.Stats().ranges, 0u);
  EXPECT_EQ(SummarizeNow(), 0);
  s.Shutdown();  // idempotent
}

TEST(BrinSummarizer, NotTheIndexOwnerStopsForGood) {
  MigrateOnce();
  {
    pqxx::connection c(Url());
    pqxx::nontransaction tx(c);
    tx.exec("DO $$ BEGIN CREATE ROLE scangate_brin_test_other; EXCEPTION WHEN duplicate_object THEN NULL; END $$");
  }
  InsertRows(5000);
  // The same server, as a role that does not own the index (superuser connection, role switched at start).
  const std::string url = Url();
  BrinSummarizerOptions o = Options(url + (url.find('?') == std::string::npos ? "?" : "&") +
                                    "options=-c%20role%3Dscangate_brin_test_other");
  o.interval = std::chrono::milliseconds(20);
  BrinSummarizer s(o);
  s.Start();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!s.Stats().stopped && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // ten more intervals: no more attempts
  const BrinSummarizerStats st = s.Stats();
  s.Shutdown();
  EXPECT_TRUE(st.stopped);
  EXPECT_EQ(st.failures, 1u);
  EXPECT_EQ(st.passes, 0u);
  EXPECT_GT(SummarizeNow(), 0) << "the other role's passes must not have summarized anything";
}

}  // namespace
}  // namespace scangate::storage
