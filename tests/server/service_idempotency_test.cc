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
//   today's answers; a malformed or repeated header is 400 invalid-idempotency-key;
// - (issue 44) repeats with the header are answered from memory — the recent set keeps the recording request —
//   in every mode and for packs, PostgreSQL not asked; past the horizon a retry is a fresh scan.
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

// The byte length of the key's row's request record (a uuid: 16): -1 when NULL, -2 when there is no row.
int RequestBytes(Pg& pg, const std::string& key) {
  pqxx::nontransaction tx(pg.conn());
  const auto r = tx.exec_params("SELECT octet_length(uuid_send(request)) FROM scan_keys WHERE digest = scangate_stored_digest(decode($1, 'hex'))",
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

// Issue 44: a till that sends an Idempotency-Key with every scan pays nothing for it on a repeat. The recent set
// keeps the request that recorded each key, so the recording request's retry is replayed (201) and a second scan
// (another idempotency key, none) is a duplicate (200) from memory: PostgreSQL decides no repeat (its duplicate
// outcomes stay as they were). ack=commit; ack=filter with the journal (once the rows are committed and the
// journal has forgotten them, so the recent set answers, not the pending set); ack=filter with the write-behind
// and a 10 s flush (answered while PostgreSQL does not even have the rows yet).
TEST(ServiceIdempotency, RepeatsAreAnsweredFromMemoryInEveryMode) {
  const std::string dir = TempDir("idem-memory");
  const std::vector<std::vector<std::string>> modes = {
      {"--ack=commit"},
      {"--ack=filter", "--journal-dir=" + dir + "/j"},
      {"--ack=filter", "--journal=off", "--flush-interval=10s"}};
  for (const auto& mode : modes) {
    std::vector<std::string> flags = mode;
    flags.push_back("--capacity=1000000");
    SCOPED_TRACE(flags[0] + " " + flags[1]);
    ScangateProcess server(flags);
    ASSERT_TRUE(server.Start());
    HttpClient c(server.port());
    Pg pg;
    std::vector<std::string> keys, ids;
    for (int i = 0; i < 5; ++i) {
      keys.push_back(UniqueKey("idem-memory"));
      ids.push_back(RandomHex(12));
      const HttpResponse first = ObserveWith(c, BodyFrom(keys.back(), "till-7"), ids.back());
      ASSERT_EQ(first.status, 201) << first;
    }
    const bool journal = flags[1].rfind("--journal-dir", 0) == 0;
    for (int i = 0; journal && i < 600; ++i) {  // the journal's pending set empties as PostgreSQL commits the rows
      if (c.Get("/stats").json().at("journal").at("backlog").to_number<std::uint64_t>() == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    const DecidedWhere before = ReadDecidedWhere(c);
    for (std::size_t i = 0; i < keys.size(); ++i) {
      for (int n = 0; n < 2; ++n) {
        const HttpResponse retry = ObserveWith(c, BodyFrom(keys[i], "till-7"), ids[i]);
        EXPECT_TRUE(Replayed(retry)) << retry;
      }
      const HttpResponse second = ObserveWith(c, BodyFrom(keys[i], "till-7"), RandomHex(12));
      EXPECT_EQ(second.status, 200) << "a second scan: " << second;
      EXPECT_FALSE(second.has_header("idempotent-replayed")) << second;
      EXPECT_FALSE(ReadObserveAnswer(second).first_seen.empty()) << second;
      EXPECT_EQ(ObserveWith(c, BodyFrom(keys[i], "till-8"), ids[i]).status, 200) << "another terminal's scan";
      EXPECT_EQ(c.Post("/observe", BodyFrom(keys[i], "till-7")).status, 200) << "a scan without the header";
    }
    const DecidedWhere after = ReadDecidedWhere(c);
    EXPECT_EQ(after.pg_duplicates, before.pg_duplicates) << "a repeat with an Idempotency-Key asked PostgreSQL";
    EXPECT_EQ(after.recent_replays - before.recent_replays, 10u);
    EXPECT_EQ(after.replays - before.replays, 10u);
    EXPECT_EQ(after.recent_hits - before.recent_hits, 15u);
    if (flags[1] == "--journal=off") {
      EXPECT_EQ(pg.CountDigests({Sha256Hex(keys[0]), Sha256Hex(keys[4])}), 0) << "the rows were flushed already";
    }
    EXPECT_EQ(server.Stop(), 0);
    for (const auto& k : keys) EXPECT_EQ(WaitRequestBytes(pg, k, 16), 16) << "the row lost its request's record";
  }
}

// --keys=gs1 (both ack modes): a pack's retry is replayed and its second scan is a duplicate from the recent set
// (keyed by the pack's lot and expiry), PostgreSQL not asked; a second scan with another lot still reaches
// PostgreSQL, which reports the mismatch.
TEST(ServiceIdempotency, PackRepeatsAreAnsweredFromMemory) {
  for (const char* ack : {"--ack=commit", "--ack=filter"}) {
    SCOPED_TRACE(ack);
    ScangateProcess server({ack, "--keys=gs1", "--journal=off", "--capacity=1000000"});
    ASSERT_TRUE(server.Start());
    HttpClient c(server.port());
    const std::string serial = "S" + RandomHex(8);
    const std::string pack = "(01)00361414030008(17)291231(10)A(21)" + serial;
    const std::string id = RandomHex(12);
    ASSERT_EQ(ObserveWith(c, BodyFrom(pack, "till-3"), id).status, 201);
    const DecidedWhere before = ReadDecidedWhere(c);
    EXPECT_TRUE(Replayed(ObserveWith(c, BodyFrom(pack, "till-3"), id)));
    const HttpResponse second = ObserveWith(c, BodyFrom(pack, "till-3"), RandomHex(12));
    EXPECT_EQ(second.status, 200) << second;
    EXPECT_FALSE(second.json().contains("mismatch")) << second;
    const DecidedWhere after = ReadDecidedWhere(c);
    EXPECT_EQ(after.pg_duplicates, before.pg_duplicates) << "a pack's repeat asked PostgreSQL";
    EXPECT_EQ(after.recent_replays - before.recent_replays, 1u);
    const HttpResponse other_lot =
        ObserveWith(c, BodyFrom("(01)00361414030008(17)291231(10)B(21)" + serial, "till-3"), RandomHex(12));
    EXPECT_EQ(other_lot.status, 200) << other_lot;
    EXPECT_TRUE(other_lot.json().contains("mismatch")) << other_lot;
    EXPECT_EQ(ReadDecidedWhere(c).pg_duplicates, before.pg_duplicates + 1) << "a differing scan must reach the row";
    EXPECT_EQ(server.Stop(), 0);
  }
}

// --retention=2s (ack=commit): within the horizon the retry is replayed from memory; past it the entry answers
// nothing — the retry is decided in PostgreSQL as a fresh scan (the expired row taken over: `new`, not replayed),
// and from then on the set holds the new row and its record: the same request's next retry is replayed from
// memory again, a second scan is a duplicate.
TEST(ServiceIdempotency, PastTheHorizonARetryIsAFreshScan) {
  ScangateProcess server({"--ack=commit", "--capacity=1000000", "--retention=2s"});
  ASSERT_TRUE(server.Start());
  HttpClient c(server.port());
  const std::string key = UniqueKey("idem-horizon");
  const std::string id = RandomHex(12);
  ASSERT_EQ(ObserveWith(c, BodyFrom(key, "till-2"), id).status, 201);
  const DecidedWhere d0 = ReadDecidedWhere(c);
  EXPECT_TRUE(Replayed(ObserveWith(c, BodyFrom(key, "till-2"), id)));
  const DecidedWhere d1 = ReadDecidedWhere(c);
  EXPECT_EQ(d1.recent_replays - d0.recent_replays, 1u);
  EXPECT_EQ(d1.pg_duplicates, d0.pg_duplicates);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // the row's first_seen leaves the horizon
  const HttpResponse fresh = ObserveWith(c, BodyFrom(key, "till-2"), id);
  EXPECT_EQ(fresh.status, 201) << fresh;
  EXPECT_FALSE(fresh.has_header("idempotent-replayed")) << "an expired record replayed: " << fresh;
  const DecidedWhere d2 = ReadDecidedWhere(c);
  EXPECT_EQ(d2.pg_inserted - d1.pg_inserted, 1u) << "past the horizon PostgreSQL must take the row over";
  EXPECT_EQ(d2.recent_replays, d1.recent_replays);
  EXPECT_TRUE(Replayed(ObserveWith(c, BodyFrom(key, "till-2"), id)));
  EXPECT_EQ(ObserveWith(c, BodyFrom(key, "till-2"), RandomHex(12)).status, 200);
  const DecidedWhere d3 = ReadDecidedWhere(c);
  EXPECT_EQ(d3.recent_replays - d2.recent_replays, 1u) << "the taken-over row's record was not kept";
  EXPECT_EQ(d3.pg_duplicates, d2.pg_duplicates);
  EXPECT_EQ(server.Stop(), 0);
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
