// Black-box tests of the recent set (--recent-keys, core/recent_set.h): a repeat of a key this instance knows
// is recorded is answered "duplicate" without a PostgreSQL round trip, with PostgreSQL's first_seen — in
// ack=commit after the commit, in ack=filter while its write-behind row is still pending — and
// --recent-keys=0 sends every repeat to PostgreSQL; an entry that does not know which request recorded its key
// leaves a request with an Idempotency-Key to PostgreSQL. (That a key refused during an outage is not in the set,
// and is "new" after recovery, is checked in service_outage_test.cc, which may stop the cluster.)
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "harness.h"

namespace scangate::it {
namespace {

namespace json = boost::json;
using Clock = std::chrono::steady_clock;

constexpr auto kRowTimeout = std::chrono::seconds(30);  // failure detection only: the write-behind flush
constexpr auto kPoll = std::chrono::milliseconds(50);

// first_seen of a digest as PostgreSQL holds it, in the answers' format; nullopt when absent.
std::optional<std::string> FirstSeenInPg(Pg& pg, const std::string& hex) {
  pqxx::nontransaction tx(pg.conn());
  const auto r = tx.exec_params(
      "SELECT to_char(first_seen AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') FROM scan_keys "
      "WHERE digest = scangate_stored_digest(decode($1, 'hex'))",
      hex);
  if (r.empty()) return std::nullopt;
  return r[0][0].as<std::string>();
}

struct RecentStats {
  std::uint64_t hits = 0, keys = 0, capacity = 0, pg_duplicates = 0;
};
RecentStats Stats(HttpClient& c) {
  const HttpResponse r = c.Get("/stats");
  EXPECT_EQ(r.status, 200) << r;
  const json::object o = r.json();
  RecentStats s;
  const auto& recent = o.at("recent").as_object();
  s.hits = recent.at("hits").to_number<std::uint64_t>();
  s.keys = recent.at("keys").to_number<std::uint64_t>();
  s.capacity = recent.at("capacity").to_number<std::uint64_t>();
  s.pg_duplicates = o.at("pg").at("duplicates").to_number<std::uint64_t>();
  return s;
}

std::string FirstSeenOf(const HttpResponse& r) {
  const json::object o = r.json();
  return o.contains("first_seen") && o.at("first_seen").is_string() ? std::string(o.at("first_seen").as_string())
                                                                    : std::string();
}

// ack=commit: the first observation commits the key; its repeats are answered from the recent set (hit
// counter moves, PostgreSQL is not asked: its duplicate outcomes stay 0) with PostgreSQL's first_seen.
TEST(ServiceRecent, CommitRepeatIsAnsweredFromTheSet) {
  ScangateProcess server({"--ack=commit", "--capacity=1000000"});
  ASSERT_TRUE(server.Start());
  HttpClient c(server.port());
  Pg pg;
  const std::string key = UniqueKey("recent-commit");
  const std::string hex = Sha256Hex(key);
  ASSERT_EQ(c.Post("/observe", ObserveBody(key)).status, 201);
  const std::optional<std::string> stored = FirstSeenInPg(pg, hex);
  ASSERT_TRUE(stored.has_value()) << "ack=commit answered 201 before the row was committed";

  for (int i = 1; i <= 3; ++i) {
    const HttpResponse again = c.Post("/observe", ObserveBody(key));
    ASSERT_EQ(again.status, 200) << again;
    EXPECT_EQ(again.json().at("verdict"), "duplicate");
    EXPECT_EQ(again.json().at("via"), "exact") << "the response contract: a duplicate is via exact";
    EXPECT_EQ(FirstSeenOf(again), *stored) << "the set answered another first_seen than PostgreSQL holds";
    const RecentStats s = Stats(c);
    EXPECT_EQ(s.hits, static_cast<std::uint64_t>(i));
    EXPECT_EQ(s.pg_duplicates, 0u) << "a repeat in the recent set went to PostgreSQL";
  }
  // The batch route too, beside a new key (which PostgreSQL decides).
  const std::string other = UniqueKey("recent-commit-batch");
  const HttpResponse b = c.Post("/observe/batch", "{\"keys\":[" + JsonString(key) + "," + JsonString(other) + "]}");
  ASSERT_EQ(b.status, 200) << b;
  const json::object body = b.json();
  const json::array& results = body.at("results").as_array();
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].at("verdict"), "duplicate");
  EXPECT_EQ(json::value_to<std::string>(results[0].at("first_seen")), *stored);
  EXPECT_EQ(results[1].at("verdict"), "new");
  const RecentStats s = Stats(c);
  EXPECT_EQ(s.hits, 4u);
  EXPECT_EQ(s.pg_duplicates, 0u);
  EXPECT_GE(s.keys, 2u);
  EXPECT_GT(s.capacity, 0u);
  EXPECT_EQ(MetricValue(c.Get("/metrics").body, "scangate_recent_hits_total").value_or(-1), 4.0);
  EXPECT_EQ(server.Stop(), 0);
}

// --recent-keys=0: no set; every repeat goes to PostgreSQL (its duplicate outcomes count them), hits stay 0.
TEST(ServiceRecent, ZeroDisables) {
  ScangateProcess server({"--ack=commit", "--capacity=1000000", "--recent-keys=0"});
  ASSERT_TRUE(server.Start());
  HttpClient c(server.port());
  const std::string key = UniqueKey("recent-off");
  ASSERT_EQ(c.Post("/observe", ObserveBody(key)).status, 201);
  for (int i = 1; i <= 2; ++i) {
    const HttpResponse again = c.Post("/observe", ObserveBody(key));
    ASSERT_EQ(again.status, 200) << again;
    const RecentStats s = Stats(c);
    EXPECT_EQ(s.hits, 0u);
    EXPECT_EQ(s.keys, 0u);
    EXPECT_EQ(s.capacity, 0u);
    EXPECT_EQ(s.pg_duplicates, static_cast<std::uint64_t>(i));
  }
  EXPECT_EQ(MetricValue(c.Get("/metrics").body, "scangate_recent_hits_total").value_or(-1), 0.0);
  EXPECT_EQ(server.Stop(), 0);
}

// ack=filter with the in-memory write-behind and a 10 s flush interval: a possible hit of a key whose row is
// still pending is answered "duplicate" at once, while PostgreSQL does not have the row yet (without the set
// it would be queued behind that row and the writer would flush both first). Once the row is written, its
// first_seen is the one the duplicate named. /observe and /observe/batch.
TEST(ServiceRecent, PendingWriteBehindIsAnsweredWithoutWaitingForTheFlush) {
  ScangateProcess server({"--ack=filter", "--journal=off", "--flush-interval=10s", "--capacity=1000000"});
  ASSERT_TRUE(server.Start());
  HttpClient c(server.port());
  Pg pg;
  const std::string key = UniqueKey("recent-pending");
  const std::string batch_key = UniqueKey("recent-pending-batch");
  const HttpResponse first = c.Post("/observe", ObserveBody(key));
  ASSERT_EQ(first.status, 201) << first;
  ASSERT_EQ(first.json().at("via"), "filter");
  const HttpResponse again = c.Post("/observe", ObserveBody(key));
  ASSERT_EQ(again.status, 200) << again;
  EXPECT_EQ(again.json().at("verdict"), "duplicate");
  const std::string answered = FirstSeenOf(again);
  ASSERT_FALSE(answered.empty()) << again;

  const std::string batch_body = "{\"keys\":[" + JsonString(batch_key) + "]}";
  const HttpResponse b1 = c.Post("/observe/batch", batch_body);
  ASSERT_EQ(b1.status, 200) << b1;
  ASSERT_EQ(b1.json().at("results").as_array().at(0).at("verdict"), "new") << b1;
  const HttpResponse b2 = c.Post("/observe/batch", batch_body);
  ASSERT_EQ(b2.status, 200) << b2;
  const json::object b2_body = b2.json();
  const json::value& r2 = b2_body.at("results").as_array().at(0);
  EXPECT_EQ(r2.at("verdict"), "duplicate") << b2;
  const std::string batch_answered = r2.as_object().contains("first_seen") ? std::string(r2.at("first_seen").as_string()) : "";

  // The duplicates were answered while both rows were still queued (10 s flush interval).
  EXPECT_FALSE(FirstSeenInPg(pg, Sha256Hex(key)).has_value()) << "the row was flushed before the repeat's answer";
  EXPECT_FALSE(FirstSeenInPg(pg, Sha256Hex(batch_key)).has_value());
  EXPECT_EQ(Stats(c).hits, 2u);

  // The rows arrive (a clean stop flushes the write-behind queue) with the first_seen the set answered.
  EXPECT_EQ(server.Stop(), 0);
  const std::optional<std::string> stored = FirstSeenInPg(pg, Sha256Hex(key));
  const std::optional<std::string> batch_stored = FirstSeenInPg(pg, Sha256Hex(batch_key));
  ASSERT_TRUE(stored.has_value() && batch_stored.has_value()) << "the write-behind rows were not written";
  EXPECT_EQ(*stored, answered);
  EXPECT_EQ(*batch_stored, batch_answered);
}

// ack=filter with the journal: once a record is durable its repeats are answered with its first_seen, first
// from the journal's pending set and, after PostgreSQL has the row, from the recent set (hit counted) —
// the same first_seen as PostgreSQL's.
TEST(ServiceRecent, JournalledKeyRepeatsKeepTheirFirstSeen) {
  char dir[] = "/tmp/scangate-recent-journal.XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  ScangateProcess server({"--ack=filter", "--capacity=1000000", std::string("--journal-dir=") + dir});
  ASSERT_TRUE(server.Start());
  HttpClient c(server.port());
  Pg pg;
  const std::string key = UniqueKey("recent-journal");
  ASSERT_EQ(c.Post("/observe", ObserveBody(key)).status, 201);
  std::optional<std::string> stored;
  for (const auto deadline = Clock::now() + kRowTimeout; !stored && Clock::now() < deadline;) {
    stored = FirstSeenInPg(pg, Sha256Hex(key));
    if (!stored) std::this_thread::sleep_for(kPoll);
  }
  ASSERT_TRUE(stored.has_value()) << "the journalled row never reached PostgreSQL";
  // The journal forgets the digest once PostgreSQL committed it (the commit callback may lag the row a little):
  // poll until the answer comes from the set.
  bool hit = false;
  for (const auto deadline = Clock::now() + kRowTimeout; !hit && Clock::now() < deadline;) {
    const HttpResponse again = c.Post("/observe", ObserveBody(key));
    ASSERT_EQ(again.status, 200) << again;
    EXPECT_EQ(FirstSeenOf(again), *stored);
    hit = Stats(c).hits > 0;
    if (!hit) std::this_thread::sleep_for(kPoll);
  }
  EXPECT_TRUE(hit) << "a repeat of a durable, committed key never came from the recent set";
  EXPECT_EQ(Stats(c).pg_duplicates, 0u);
  EXPECT_EQ(server.Stop(), 0);
  std::filesystem::remove_all(dir);
}

// Issue 44: an entry whose recorder is unknown answers no request with an Idempotency-Key. B records a key with a
// request's record; A meets the key without the header (a raw batch: PostgreSQL's duplicate, the row's record not
// read), so A's entry does not know who recorded it. A retry of B's request at A is then decided by PostgreSQL
// (replayed from the row: the record is B's), and A's entry learns the row's record from that answer, so the next
// retry and a second scan at A come from memory. ack=commit (every instance's rows are its repeats' answers).
TEST(ServiceRecent, UnknownRecorderAsksPostgreSQLOnceThenKnows) {
  ScangateProcess a({"--ack=commit", "--capacity=1000000"});
  ScangateProcess b({"--ack=commit", "--capacity=1000000"});
  ASSERT_TRUE(a.Start());
  ASSERT_TRUE(b.Start());
  HttpClient ca(a.port()), cb(b.port());
  const std::string key = UniqueKey("recent-unknown");
  const std::string id = RandomHex(12);
  const std::string body = "{\"key\":" + JsonString(key) + ",\"source\":\"till-6\"}";
  auto with_id = [&](HttpClient& c, const std::string& idem) {
    return c.Request("POST", "/observe", body, "application/json", {{"Idempotency-Key", idem}});
  };
  ASSERT_EQ(with_id(cb, id).status, 201);
  ASSERT_EQ(ca.Post("/observe", body).status, 200);  // A's entry: recorded, by an unknown request
  const DecidedWhere d0 = ReadDecidedWhere(ca);
  const HttpResponse retry = with_id(ca, id);
  EXPECT_EQ(retry.status, 201) << retry;
  EXPECT_EQ(retry.header("idempotent-replayed"), "true") << "B's request's retry at A: " << retry;
  const DecidedWhere d1 = ReadDecidedWhere(ca);
  EXPECT_EQ(d1.pg_duplicates - d0.pg_duplicates, 1u) << "an unknown recorder must leave the retry to PostgreSQL";
  EXPECT_EQ(d1.recent_replays, d0.recent_replays);
  const HttpResponse again = with_id(ca, id);
  EXPECT_EQ(again.header("idempotent-replayed"), "true") << again;
  const HttpResponse second = with_id(ca, RandomHex(12));
  EXPECT_EQ(second.status, 200) << second;
  const DecidedWhere d2 = ReadDecidedWhere(ca);
  EXPECT_EQ(d2.pg_duplicates, d1.pg_duplicates) << "the row's record, read once, was not kept";
  EXPECT_EQ(d2.recent_replays - d1.recent_replays, 1u);
  EXPECT_EQ(a.Stop(), 0);
  EXPECT_EQ(b.Stop(), 0);
}

}  // namespace
}  // namespace scangate::it
