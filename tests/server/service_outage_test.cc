// Black-box PostgreSQL outage test of scangate: while the shared cluster is stopped, requests get
// 503 + Retry-After (problem+json), never a wrong verdict; after it is started again the service
// recovers by itself and verdicts are right. Stops the fixture's cluster, so it runs as its own
// binary, ordered after the other service tests (RESOURCE_LOCK pg keeps other tests away).
#include <cstdio>
#include <regex>
#include <set>
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

constexpr auto kOutageProbeTime = std::chrono::seconds(3);     // how long requests are sent during the outage
constexpr auto kRecoveryTimeout = std::chrono::seconds(30);    // the service must recover within this
constexpr auto kProbeInterval = std::chrono::milliseconds(50);

// Restarts the cluster when a test ends early while it is stopped.
struct ClusterGuard {
  bool stopped = false;
  ~ClusterGuard() {
    if (stopped) PgClusterStart();
  }
};

HttpResponse PostReconnecting(HttpClient& c, const std::string& target, const std::string& body) {
  try {
    HttpResponse r = c.Post(target, body);
    if (!r.keep_alive) c.Reconnect();
    return r;
  } catch (const std::exception&) {
    c.Reconnect();
    return c.Post(target, body);
  }
}

HttpResponse GetReconnecting(HttpClient& c, const std::string& target) {
  try {
    HttpResponse r = c.Get(target);
    if (!r.keep_alive) c.Reconnect();
    return r;
  } catch (const std::exception&) {
    c.Reconnect();
    return c.Get(target);
  }
}

::testing::AssertionResult IsUnavailable(const HttpResponse& r) {
  auto problem = IsProblem(r, 503, "unavailable");
  if (!problem) return problem;
  if (r.header("retry-after").empty()) return ::testing::AssertionFailure() << "503 without Retry-After: " << r;
  return ::testing::AssertionSuccess();
}

TEST(ServiceOutage, PostgresStoppedThenRestarted) {
  ScangateProcess commit_server({"--ack=commit", "--capacity=1000000"});
  ScangateProcess filter_server({"--ack=filter", "--capacity=1000000"});
  ASSERT_TRUE(commit_server.Start());
  HttpClient cc(commit_server.port());
  const std::string seen = UniqueKey("outage-seen");
  ASSERT_EQ(cc.Post("/observe", ObserveBody(seen)).status, 201);
  // Started after `seen` is committed, so its warm start knows it (an ack=filter instance whose filter
  // missed a key written by another instance may answer it "new": the documented ack=filter trade-off).
  ASSERT_TRUE(filter_server.Start());
  HttpClient cf(filter_server.port());
  const HttpResponse seen_before = cf.Post("/observe", ObserveBody(seen));
  ASSERT_EQ(seen_before.status, 200) << seen_before;
  const json::value seen_first_seen = seen_before.json().at("first_seen");
  // A duplicate from the recent set during the outage: the same first_seen PostgreSQL gave.
  auto is_recent_duplicate = [&seen_first_seen](const HttpResponse& r) -> ::testing::AssertionResult {
    if (r.status != 200) return ::testing::AssertionFailure() << "not 200: " << r;
    const json::object o = r.json();
    if (o.at("verdict") != "duplicate" || o.at("first_seen") != seen_first_seen) {
      return ::testing::AssertionFailure() << "not the recorded duplicate: " << r;
    }
    return ::testing::AssertionSuccess();
  };

  ClusterGuard guard;
  ASSERT_EQ(PgClusterStop(), 0) << "scripts/pg.sh stop failed";
  guard.stopped = true;

  // During the outage. ack=commit: every fresh key is 503 (nothing can be committed). ack=filter: a fresh
  // key may be 201 via filter (journalled, kept until PostgreSQL is back). A seen key is answered from the
  // recent set (both instances learnt from PostgreSQL that it is recorded): 200 duplicate with PostgreSQL's
  // first_seen, never 201. Every other key needs PostgreSQL: 503.
  std::vector<std::string> commit_rejected;
  std::vector<std::string> filter_created;
  int commit_503 = 0;
  const auto probe_end = Clock::now() + kOutageProbeTime;
  for (int i = 0; Clock::now() < probe_end; ++i) {
    const std::string fresh = UniqueKey("outage-fresh");
    HttpResponse r = PostReconnecting(cc, "/observe", ObserveBody(i % 2 == 0 ? fresh : seen));
    if (i % 2 == 0) {
      EXPECT_TRUE(IsUnavailable(r)) << "ack=commit during outage, fresh key";
      commit_rejected.push_back(fresh);
    } else {
      EXPECT_TRUE(is_recent_duplicate(r)) << "ack=commit during outage, seen key";
    }
    if (r.status == 503) ++commit_503;

    const std::string fresh_f = UniqueKey("outage-fresh-filter");
    HttpResponse f = PostReconnecting(cf, "/observe", ObserveBody(fresh_f));
    if (f.status == 201) {
      EXPECT_EQ(f.json().at("via"), "filter") << "ack=filter answered new via exact during an outage: " << f;
      filter_created.push_back(Sha256Hex(fresh_f));
    } else {
      EXPECT_TRUE(IsUnavailable(f)) << "ack=filter during outage, fresh key";
    }
    HttpResponse fs = PostReconnecting(cf, "/observe", ObserveBody(seen));
    EXPECT_TRUE(is_recent_duplicate(fs)) << "ack=filter during outage, seen key";
    // A key refused earlier in the outage (its filter bits are set now: a possible hit) is not in the set.
    if (commit_rejected.size() > 1) {
      HttpResponse again = PostReconnecting(cc, "/observe", ObserveBody(commit_rejected.front()));
      EXPECT_TRUE(IsUnavailable(again)) << "ack=commit during outage, a refused key observed again";
    }

    HttpResponse b = PostReconnecting(cc, "/observe/batch",
                                      "{\"keys\":[" + JsonString(seen) + "," + JsonString(UniqueKey("outage-b")) + "]}");
    EXPECT_TRUE(IsUnavailable(b)) << "batch during outage";
    std::this_thread::sleep_for(kProbeInterval);
  }
  EXPECT_GT(commit_503, 0);
  std::printf("outage: ack=commit answered %d requests 503; ack=filter answered %zu fresh keys 201 via filter\n",
              commit_503, filter_created.size());

  // Readiness reports the outage (503 + Retry-After); liveness does not.
  for (ScangateProcess* s : {&commit_server, &filter_server}) {
    HttpClient c(s->port());
    HttpResponse ready = GetReconnecting(c, "/readyz");
    EXPECT_EQ(ready.status, 503) << "readyz during outage: " << ready;
    EXPECT_FALSE(ready.header("retry-after").empty()) << ready;
    EXPECT_EQ(GetReconnecting(c, "/healthz").status, 200);
  }

  ASSERT_EQ(PgClusterStart(), 0) << "scripts/pg.sh start failed";
  guard.stopped = false;

  // Recovery without help: poll the seen key until it is a duplicate again; meanwhile only 503 or 200 (it is
  // answered from the recent set at once; readiness and the fresh key below need PostgreSQL back).
  const auto deadline = Clock::now() + kRecoveryTimeout;
  HttpResponse last;
  while (true) {
    last = PostReconnecting(cc, "/observe", ObserveBody(seen));
    if (last.status == 200) break;
    ASSERT_TRUE(IsUnavailable(last)) << "while recovering, a seen key got a wrong verdict";
    ASSERT_LT(Clock::now(), deadline) << "scangate (ack=commit) did not recover within 30 s; last: " << last;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_EQ(last.json().at("verdict"), "duplicate") << last;
  // Readiness follows (it needs every writer reconnected, and may lag by its refresh period).
  while (true) {
    HttpResponse ready = GetReconnecting(cc, "/readyz");
    if (ready.status == 200) break;
    ASSERT_EQ(ready.status, 503) << ready;
    ASSERT_LT(Clock::now(), deadline) << "readyz did not return to 200 within 30 s: " << ready;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }

  Pg pg;
  const std::string after = UniqueKey("outage-after");
  HttpResponse r = PostReconnecting(cc, "/observe", ObserveBody(after));
  EXPECT_EQ(r.status, 201) << r;
  EXPECT_EQ(pg.CountDigest(Sha256Hex(after)), 1);
  EXPECT_EQ(PostReconnecting(cc, "/observe", ObserveBody(after)).status, 200);
  // Keys refused with 503 were not recorded: they are new now (possible hits of the filter, not in the recent
  // set: PostgreSQL inserts them).
  for (std::size_t i = 0; i < commit_rejected.size() && i < 10; ++i) {
    HttpResponse again = PostReconnecting(cc, "/observe", ObserveBody(commit_rejected[i]));
    EXPECT_EQ(again.status, 201) << "a key answered 503 during the outage was recorded: " << again;
  }
  EXPECT_GE(MetricValue(GetReconnecting(cc, "/metrics").body, "scangate_recent_hits_total").value_or(0), 1.0)
      << "the seen key was not answered from the recent set during the outage";

  // ack=filter recovers too; write-behind accepted during the outage reaches PostgreSQL.
  while (true) {
    HttpResponse f = PostReconnecting(cf, "/observe", ObserveBody(seen));
    if (f.status == 200) break;
    ASSERT_TRUE(IsUnavailable(f)) << "ack=filter while recovering, seen key";
    ASSERT_LT(Clock::now(), deadline) << "scangate (ack=filter) did not recover within 30 s";
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_EQ(filter_server.Stop(), 0);
  EXPECT_EQ(pg.CountDigests(filter_created), static_cast<std::int64_t>(filter_created.size()))
      << "ack=filter write-behind answered 201 during the outage was lost";

  EXPECT_EQ(commit_server.Stop(), 0);
  bool saw_down = false, saw_up_after_down = false;
  for (const auto& e : commit_server.LogEvents("pg_state")) {
    const std::string text = json::serialize(e);
    const bool down = text.find("\"down\"") != std::string::npos || text.find("\"up\":false") != std::string::npos;
    const bool up = text.find("\"up\"}") != std::string::npos || text.find("\"up\",") != std::string::npos ||
                    text.find("\"up\":true") != std::string::npos;
    if (down) saw_down = true;
    if (saw_down && up) saw_up_after_down = true;
  }
  EXPECT_TRUE(saw_down) << "no pg_state down log event";
  EXPECT_TRUE(saw_up_after_down) << "no pg_state up log event after the outage";
}

// Issue 9: PostgreSQL down at start and started a few seconds later. scangate backs off (one pg_state
// line per attempt, naming the cause; not one per millisecond) and becomes ready by itself.
TEST(ServiceOutage, DownAtStartBacksOffThenReady) {
  ClusterGuard guard;
  ASSERT_EQ(PgClusterStop(), 0) << "scripts/pg.sh stop failed";
  guard.stopped = true;
  ScangateProcess server;
  std::thread starter([&] {
    std::this_thread::sleep_for(std::chrono::seconds(3));
    EXPECT_EQ(PgClusterStart(), 0) << "scripts/pg.sh start failed";
  });
  const auto started = server.Start();  // waits up to 30 s for /readyz
  starter.join();
  guard.stopped = false;
  ASSERT_TRUE(started);
  std::size_t downs = 0;
  for (const auto& e : server.LogEvents("pg_state")) {
    if (e.at("state") != "down") continue;
    ++downs;
    const std::string text = json::serialize(e);
    EXPECT_NE(text.find("\"attempt\""), std::string::npos) << text;
    EXPECT_NE(text.find("\"retry_in_ms\""), std::string::npos) << text;
  }
  // 3 s + the cluster's start-up with backoff 250 ms doubling up to 8 s: a handful of lines.
  EXPECT_GE(downs, 1u);
  EXPECT_LE(downs, 8u) << server.Log();
  HttpClient c(server.port());
  EXPECT_EQ(c.Post("/observe", ObserveBody(UniqueKey("down-at-start"))).status, 201);
  EXPECT_EQ(server.Stop(), 0);
}

// A connection the restart broke while it idled (the lookup reader's) is noticed only by the next read on it. A
// read is safe to repeat, so it is read again on a new connection: the first /lookup after /readyz says 200 again
// is answered, not 503 — as is an --ack=filter instance's first `new` that needs a read to cover its peers (CI's
// run of EveryLogLineHasOneFormat below got that 503).
TEST(ServiceOutage, FirstLookupAfterARestartIsAnswered) {
  ClusterGuard guard;
  ScangateProcess server({"--ack=commit"});
  ASSERT_TRUE(server.Start());
  HttpClient c(server.port());
  const std::string key = UniqueKey("restart-lookup");
  ASSERT_EQ(c.Post("/observe", ObserveBody(key)).status, 201);
  const HttpResponse before = c.Post("/lookup", ObserveBody(key));  // the reader's connection is open and used
  ASSERT_EQ(before.status, 200) << before;
  ASSERT_EQ(PgClusterStop(), 0) << "scripts/pg.sh stop failed";
  guard.stopped = true;
  ASSERT_EQ(PgClusterStart(), 0) << "scripts/pg.sh start failed";
  guard.stopped = false;
  const auto ready_deadline = Clock::now() + kRecoveryTimeout;
  while (GetReconnecting(c, "/readyz").status != 200 && Clock::now() < ready_deadline) {
    std::this_thread::sleep_for(kProbeInterval);
  }
  const HttpResponse after = PostReconnecting(c, "/lookup", ObserveBody(key));
  EXPECT_EQ(after.status, 200) << "the first /lookup after the restart: " << after;
  EXPECT_EQ(after.json().at("first_seen"), before.json().at("first_seen")) << after;
  EXPECT_EQ(server.Stop(), 0);
}

// One log stream (issue 11): every line scangate writes during a run that crosses a PostgreSQL outage —
// server events, storage events (pg_state from the writers), the journal's, the access log — is one JSON
// object with the same shape: "ts" RFC 3339 UTC with microseconds, "level" info|warn|error, "event".
TEST(ServiceOutage, EveryLogLineHasOneFormat) {
  ClusterGuard guard;
  ScangateProcess server({"--access-log=on", "--ack=filter", "--writers=1"});
  ASSERT_TRUE(server.Start());
  HttpClient c(server.port());
  for (int i = 0; i < 5; ++i) ASSERT_EQ(c.Post("/observe", ObserveBody(UniqueKey("logfmt"))).status, 201);
  ASSERT_EQ(PgClusterStop(), 0) << "scripts/pg.sh stop failed";
  guard.stopped = true;
  // A possibly-seen key needs PostgreSQL: the writer notices the outage (storage logs pg_state down).
  const std::string seen = UniqueKey("logfmt-seen");
  (void)PostReconnecting(c, "/observe", ObserveBody(seen));
  const auto down_deadline = Clock::now() + kRecoveryTimeout;
  while (Clock::now() < down_deadline) {
    bool down = false;
    for (const auto& e : server.LogEvents("pg_state")) down = down || e.at("state") == "down";
    if (down) break;
    (void)PostReconnecting(c, "/observe", ObserveBody(seen));
    std::this_thread::sleep_for(kProbeInterval);
  }
  ASSERT_EQ(PgClusterStart(), 0) << "scripts/pg.sh start failed";
  guard.stopped = false;
  const auto ready_deadline = Clock::now() + kRecoveryTimeout;
  while (GetReconnecting(c, "/readyz").status != 200 && Clock::now() < ready_deadline) {
    std::this_thread::sleep_for(kProbeInterval);
  }
  const HttpResponse after = PostReconnecting(c, "/observe", ObserveBody(UniqueKey("logfmt-after")));
  EXPECT_EQ(after.status, 201) << "a fresh key once /readyz said 200 again: " << after.body;
  ASSERT_EQ(server.Stop(), 0);

  const std::regex ts(R"(^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$)");
  std::istringstream in(server.Log());
  std::string line;
  std::size_t lines = 0;
  std::set<std::string> events;
  bool storage_down = false;
  while (std::getline(in, line)) {
    if (line.rfind("# harness", 0) == 0) continue;  // the harness's own notes in the same file
    ++lines;
    boost::system::error_code ec;
    const json::value v = json::parse(line, ec);
    ASSERT_FALSE(ec) << "not JSON: " << line;
    ASSERT_TRUE(v.is_object()) << line;
    const json::object& o = v.as_object();
    ASSERT_TRUE(o.contains("ts") && o.at("ts").is_string()) << line;
    EXPECT_TRUE(std::regex_match(std::string(o.at("ts").as_string()), ts)) << "ts format: " << line;
    ASSERT_TRUE(o.contains("level") && o.at("level").is_string()) << line;
    const std::string level(o.at("level").as_string());
    EXPECT_TRUE(level == "info" || level == "warn" || level == "error") << line;
    ASSERT_TRUE(o.contains("event") && o.at("event").is_string()) << line;
    events.insert(std::string(o.at("event").as_string()));
    if (o.at("event") == "pg_state" && o.contains("writer") && o.at("state") == "down") storage_down = true;
  }
  EXPECT_GT(lines, 10u);
  for (const char* e : {"config", "listening", "warm_start", "pg_state", "access", "shutdown"}) {
    EXPECT_TRUE(events.count(e)) << "no " << e << " line in the run";
  }
  EXPECT_TRUE(storage_down) << "no pg_state line from a writer (storage/) in the run:\n" << server.Log();
}

}  // namespace
}  // namespace scangate::it
