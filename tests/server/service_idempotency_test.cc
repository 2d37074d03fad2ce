// Black-box tests of Idempotency-Key (issue 34): a terminal's retry of a scan whose answer it lost is answered as
// the first attempt was — 201 `new` with "replayed": true and Idempotent-Replayed: true — while a second scan of
// the same pack (no header, another idempotency key, another terminal's key) is still `duplicate`:
// - ack=commit: the retry after the answer, after a kill -9 and restart, at a second instance on the database;
// - ack=filter with the journal: the key observed with the header is `new` from the filter, journalled with its
//   request record; its retry is replayed from the journal's pending set and, once the row is committed, from
//   PostgreSQL; after a kill -9 the recovered record (restart, same journal) still replays it; a key the journal
//   recorded without the header is a duplicate for a request with one;
// - a retry sent while the first attempt is still in flight (held by a row lock) waits for it and is replayed,
//   at the same instance and at another;
// - /observe/batch: a per-entry "request_id", replayed per entry;
// - the record is in the key's own row (`request`, 16 bytes), NULL without the header; no header means exactly
//   today's answers; a malformed or repeated header is 400 invalid-idempotency-key.
#include <stdlib.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "harness.h"

namespace scangate::it {
namespace {

namespace json = boost::json;

HttpResponse ObserveWith(HttpClient& c, const std::string& body, const std::string& idempotency_key) {
  return c.Request("POST", "/observe", body, "application/json", {{"Idempotency-Key", idempotency_key}});
}

std::string BodyFrom(const std::string& key, const std::string& source) {
  return "{\"key\":" + JsonString(key) + ",\"source\":" + JsonString(source) + "}";
}

bool Replayed(const HttpResponse& r) {
  const json::object o = r.json();
  return r.status == 201 && o.contains("replayed") && o.at("replayed") == true &&
         r.header("idempotent-replayed") == "true";
}

// octet_length(request) of the key's row: -1 when NULL, -2 when there is no row.
int RequestBytes(Pg& pg, const std::string& key) {
  pqxx::nontransaction tx(pg.conn());
  const auto r = tx.exec_params("SELECT octet_length(request) FROM scan_keys WHERE digest = decode($1, 'hex')",
                                Sha256Hex(key));
  if (r.empty()) return -2;
  return r[0][0].is_null() ? -1 : r[0][0].as<int>();
}

// RequestBytes once it equals `want` (ack=filter writes the row behind), or its last value after 10 s.
int WaitRequestBytes(Pg& pg, const std::string& key, int want) {
  int got = RequestBytes(pg, key);
  for (int i = 0; i < 1000 && got != want; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    got = RequestBytes(pg, key);
  }
  return got;
}

// The first request with the header is `new`; its retry (same header, same source, same key) is `new` again,
// marked replayed; any other observation of the key is a duplicate; the scope is the source.
void RetryIsReplayedRepeatIsDuplicate(HttpClient& c, Pg& pg, const std::string& tag) {
  const std::string key = UniqueKey(tag);
  const std::string idem = "till-7-" + RandomHex(8);
  const HttpResponse first = ObserveWith(c, BodyFrom(key, "till-7"), idem);
  ASSERT_EQ(first.status, 201) << first;
  EXPECT_EQ(first.json().at("via"), "filter") << first;  // ack=commit: the filter said new, PostgreSQL confirmed
  EXPECT_FALSE(first.has_header("idempotent-replayed")) << first;
  EXPECT_FALSE(first.json().contains("replayed")) << first;
  // At once (ack=filter: the record is still pending in the journal, or just committed).
  const HttpResponse early = ObserveWith(c, BodyFrom(key, "till-7"), idem);
  EXPECT_TRUE(Replayed(early)) << early;
  EXPECT_EQ(WaitRequestBytes(pg, key, 16), 16) << "the idempotency record is not in the key's row";

  for (int i = 0; i < 2; ++i) {  // from the row
    const HttpResponse retry = ObserveWith(c, BodyFrom(key, "till-7"), idem);
    EXPECT_TRUE(Replayed(retry)) << retry;
    EXPECT_EQ(retry.json().at("verdict"), "new") << retry;
    EXPECT_EQ(retry.json().at("digest"), first.json().at("digest")) << retry;
  }
  // The quoted form of the IETF draft (sf-string) is the same key.
  EXPECT_TRUE(Replayed(ObserveWith(c, BodyFrom(key, "till-7"), "\"" + idem + "\"")));

  const HttpResponse other_scan = ObserveWith(c, BodyFrom(key, "till-7"), "till-7-" + RandomHex(8));
  EXPECT_EQ(other_scan.status, 200) << "a second scan (a fresh idempotency key) must be a duplicate: " << other_scan;
  EXPECT_EQ(other_scan.json().at("verdict"), "duplicate") << other_scan;
  const HttpResponse no_header = c.Post("/observe", BodyFrom(key, "till-7"));
  EXPECT_EQ(no_header.status, 200) << no_header;
  EXPECT_FALSE(no_header.has_header("idempotent-replayed")) << no_header;
  const HttpResponse other_terminal = ObserveWith(c, BodyFrom(key, "till-8"), idem);
  EXPECT_EQ(other_terminal.status, 200) << "another terminal's idempotency key is another key: " << other_terminal;
  const HttpResponse no_source = ObserveWith(c, ObserveBody(key), idem);
  EXPECT_EQ(no_source.status, 200) << "without a source the scope is the client address: " << no_source;

  // A key first recorded without the header (ack=filter: by the journal) is a duplicate for a request with one:
  // that request is not the recording one's retry.
  const std::string plain = UniqueKey(tag);
  EXPECT_EQ(c.Post("/observe", ObserveBody(plain)).status, 201);
  EXPECT_EQ(c.Post("/observe", ObserveBody(plain)).status, 200);
  const HttpResponse late = ObserveWith(c, ObserveBody(plain), "late-" + RandomHex(8));
  EXPECT_EQ(late.status, 200) << late;
}

TEST(ServiceIdempotency, CommitRetryIsReplayedASecondScanIsDuplicate) {
  ScangateProcess server({"--ack=commit", "--capacity=1000000"});
  ASSERT_TRUE(server.Start());
  HttpClient c(server.port());
  Pg pg;
  RetryIsReplayedRepeatIsDuplicate(c, pg, "idem-commit");
  // Without the header the row holds no record.
  const std::string plain = UniqueKey("idem-plain");
  EXPECT_EQ(c.Post("/observe", ObserveBody(plain)).status, 201);
  EXPECT_EQ(RequestBytes(pg, plain), -1);

  const HttpResponse metrics = c.Get("/metrics");
  EXPECT_NE(metrics.body.find("scangate_idempotent_replays_total 4"), std::string::npos) << metrics.body.substr(0, 3000);
  EXPECT_EQ(server.Stop(), 0);
}

TEST(ServiceIdempotency, FilterModeRetryIsReplayedThroughPostgreSQL) {
  const std::string dir = TempDir("idem-journal");
  ScangateProcess server({"--ack=filter", "--capacity=1000000", "--journal-dir=" + dir + "/j"});
  ASSERT_TRUE(server.Start());
  HttpClient c(server.port());
  Pg pg;
  RetryIsReplayedRepeatIsDuplicate(c, pg, "idem-filter");
  EXPECT_EQ(server.Stop(), 0);
}

// ack=filter, kill -9 right after the answers: each key's record is in the journal (durable before its 201) and
// maybe not yet in PostgreSQL; after a restart on the same journal every retry is replayed, a second scan is a
// duplicate, and every row holds its request's record.
TEST(ServiceIdempotency, FilterModeRetryAfterKillNineIsReplayedFromTheJournal) {
  const std::string dir = TempDir("idem-journal-kill");
  const std::vector<std::string> args = {"--ack=filter", "--capacity=1000000", "--journal-dir=" + dir + "/j",
                                         "--flush-interval=1s", "--max-commit-lag=0"};  // the rows wait in the journal
  std::vector<std::string> keys, idems;
  for (int i = 0; i < 50; ++i) {
    keys.push_back(UniqueKey("idem-jkill"));
    idems.push_back(RandomHex(12));
  }
  {
    ScangateProcess first(args);
    ASSERT_TRUE(first.Start());
    HttpClient c(first.port());
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const HttpResponse r = ObserveWith(c, BodyFrom(keys[i], "till-4"), idems[i]);
      ASSERT_EQ(r.status, 201) << r;
    }
    // Every one of them was journalled (the fast path), none decided in PostgreSQL.
    const HttpResponse metrics = c.Get("/metrics");
    EXPECT_NE(metrics.body.find("scangate_journal_records_total 50\n"), std::string::npos) << metrics.body.substr(0, 4000);
    first.Kill();
  }
  ScangateProcess again(args);
  ASSERT_TRUE(again.Start());
  HttpClient c(again.port());
  int replayed = 0;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (Replayed(ObserveWith(c, BodyFrom(keys[i], "till-4"), idems[i]))) ++replayed;
  }
  EXPECT_EQ(replayed, 50) << "a retry after the crash was not answered its first verdict";
  EXPECT_EQ(c.Post("/observe", BodyFrom(keys[0], "till-4")).status, 200) << "a second scan is a duplicate";
  Pg pg;
  for (const auto& k : keys) EXPECT_EQ(WaitRequestBytes(pg, k, 16), 16) << "the replayed row lost its record";
  EXPECT_EQ(again.Stop(), 0);
}

// The record is in PostgreSQL: a retry after a kill -9 and a restart, or at another instance, is replayed.
TEST(ServiceIdempotency, RetryAfterKillNineAndAtAnotherInstanceIsReplayed) {
  const std::string key = UniqueKey("idem-restart");
  const std::string idem = RandomHex(16);
  {
    ScangateProcess first({"--ack=commit", "--capacity=1000000"});
    ASSERT_TRUE(first.Start());
    HttpClient c(first.port());
    ASSERT_EQ(ObserveWith(c, BodyFrom(key, "till-9"), idem).status, 201);
    first.Kill();
  }
  ScangateProcess second({"--ack=commit", "--capacity=1000000"});
  ASSERT_TRUE(second.Start());
  ScangateProcess third({"--ack=commit", "--capacity=1000000"});
  ASSERT_TRUE(third.Start());
  HttpClient c2(second.port()), c3(third.port());
  EXPECT_TRUE(Replayed(ObserveWith(c2, BodyFrom(key, "till-9"), idem)));
  EXPECT_TRUE(Replayed(ObserveWith(c3, BodyFrom(key, "till-9"), idem)));
  EXPECT_EQ(c3.Post("/observe", BodyFrom(key, "till-9")).status, 200);
  EXPECT_EQ(second.Stop(), 0);
  EXPECT_EQ(third.Stop(), 0);
}

// The first attempt is held in PostgreSQL (another transaction holds the key's row lock); two retries — one at the
// same instance, one at another — are sent meanwhile. None is answered early; once the lock goes, all three are
// 201 and exactly one of them is the first (not replayed).
TEST(ServiceIdempotency, RetryWhileTheFirstIsInFlightWaitsForItsVerdict) {
  ScangateProcess a({"--ack=commit", "--capacity=1000000"});
  ASSERT_TRUE(a.Start());
  ScangateProcess b({"--ack=commit", "--capacity=1000000"});
  ASSERT_TRUE(b.Start());
  const std::string key = UniqueKey("idem-inflight");
  const std::string idem = RandomHex(8);
  Pg pg;
  RowBlocker blocker({key});
  std::vector<HttpResponse> answers(3);
  std::vector<std::thread> clients;
  const std::uint16_t ports[3] = {a.port(), a.port(), b.port()};
  for (int i = 0; i < 3; ++i) {
    clients.emplace_back([&, i] {
      HttpClient c(ports[i]);
      answers[i] = ObserveWith(c, BodyFrom(key, "till-5"), idem);
    });
    if (i == 0) {
      EXPECT_TRUE(pg.WaitForLockWaiter()) << "the first attempt never reached the locked row";
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the retries reach their queue / the lock
  blocker.Release();
  for (auto& t : clients) t.join();
  int first = 0;
  for (const HttpResponse& r : answers) {
    EXPECT_EQ(r.status, 201) << r;
    if (r.status == 201 && !r.has_header("idempotent-replayed")) ++first;
  }
  EXPECT_EQ(first, 1) << "exactly one answer is the first attempt's";
  EXPECT_EQ(a.Stop(), 0);
  EXPECT_EQ(b.Stop(), 0);
}

TEST(ServiceIdempotency, BatchEntriesCarryTheirOwnRequestIds) {
  ScangateProcess server({"--ack=commit", "--capacity=1000000"});
  ASSERT_TRUE(server.Start());
  HttpClient c(server.port());
  const std::string a = UniqueKey("idem-batch"), b = UniqueKey("idem-batch"), plain = UniqueKey("idem-batch");
  const std::string ra = RandomHex(8), rb = RandomHex(8);
  const std::string body = "{\"keys\":[{\"key\":" + JsonString(a) + ",\"source\":\"till-3\",\"request_id\":\"" + ra +
                           "\"},{\"key\":" + JsonString(b) + ",\"source\":\"till-3\",\"request_id\":\"" + rb +
                           "\"}," + JsonString(plain) + "]}";
  const HttpResponse first = c.Post("/observe/batch", body);
  ASSERT_EQ(first.status, 200) << first;
  const HttpResponse retry = c.Post("/observe/batch", body);
  ASSERT_EQ(retry.status, 200) << retry;
  const json::object answer = retry.json();
  const json::array& results = answer.at("results").as_array();
  ASSERT_EQ(results.size(), 3u) << retry;
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(results[i].at("verdict"), "new") << retry;
    EXPECT_EQ(results[i].at("replayed"), true) << retry;
  }
  EXPECT_EQ(results[2].at("verdict"), "duplicate") << "an entry without request_id is decided as today: " << retry;
  // A single /observe with the entry's request id as its header is the same request.
  EXPECT_TRUE(Replayed(ObserveWith(c, BodyFrom(a, "till-3"), ra)));
  EXPECT_EQ(server.Stop(), 0);
}

TEST(ServiceIdempotency, MalformedOrRepeatedHeaderIs400) {
  ScangateProcess server({"--ack=commit", "--capacity=1000000"});
  ASSERT_TRUE(server.Start());
  HttpClient c(server.port());
  const std::string key = UniqueKey("idem-bad");
  for (const std::string& bad : {std::string(256, 'x'), std::string("two words"), std::string("\"open")}) {
    const HttpResponse r = ObserveWith(c, ObserveBody(key), bad);
    EXPECT_EQ(r.status, 400) << bad << ": " << r;
    EXPECT_NE(r.body.find("invalid-idempotency-key"), std::string::npos) << r;
  }
  const std::string body = ObserveBody(key);
  c.SendRaw("POST /observe HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nIdempotency-Key: a\r\n"
            "Idempotency-Key: b\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
  const HttpResponse twice = c.ReadResponse();
  EXPECT_EQ(twice.status, 400) << twice;
  EXPECT_NE(twice.body.find("given twice"), std::string::npos) << twice;
  const HttpResponse batch = c.Post("/observe/batch", "{\"keys\":[{\"key\":" + JsonString(key) + ",\"request_id\":7}]}");
  EXPECT_EQ(batch.status, 400) << batch;
  EXPECT_NE(batch.body.find("invalid-idempotency-key"), std::string::npos) << batch;
  // Nothing of those was recorded: the key is new now.
  EXPECT_EQ(c.Post("/observe", ObserveBody(key)).status, 201);
  EXPECT_EQ(server.Stop(), 0);
}

}  // namespace
}  // namespace scangate::it
