// Black-box tests of issue 9's request deadline and start-up behaviour (real scangate, real PostgreSQL):
// - --request-timeout: a request waiting for PostgreSQL is answered 503 + Retry-After in time, never hangs;
//   `unavailable` when its key was still queued (withdrawn: never written), `outcome-unknown` when a
//   transaction already held it (its late completion is dropped without disturbing the connection);
// - writer backends SIGSTOPped (neither statement_timeout nor keepalives fire): every request still answers
//   within the deadline, /healthz keeps answering, SIGCONT recovers by itself, nothing is "new" twice;
// - start-up: a role that may not CREATE in schema public exits 1 quickly naming the cause; a missing
//   database backs off with one log line per attempt and becomes ready once it exists.
#include <signal.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "harness.h"

namespace scangate::it {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr auto kRequestTimeout = 1s;
// Slack on top of the deadline for scheduling on a shared, loaded 2-core box: a bound on the contract
// (no hang), not a performance figure.
constexpr auto kAnswerMargin = 4s;
constexpr auto kEventually = 60s;

std::string Slug(const HttpResponse& r) {
  boost::system::error_code ec;
  const auto v = boost::json::parse(r.body, ec);
  if (ec || !v.is_object()) return "";
  const auto* t = v.as_object().if_contains("type");
  if (t == nullptr || !t->is_string()) return "";
  std::string s(t->as_string());
  const std::string prefix = "urn:scangate:problem:";
  return s.rfind(prefix, 0) == 0 ? s.substr(prefix.size()) : s;
}

bool WaitForRows(Pg& pg, const std::vector<std::string>& hexes, std::int64_t want) {
  const auto deadline = Clock::now() + kEventually;
  while (Clock::now() < deadline) {
    if (pg.CountDigests(hexes) == want) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

struct Timed {
  HttpResponse response;
  Clock::duration took{};
};
Timed TimedPost(HttpClient& c, const std::string& target, const std::string& body) {
  const auto t0 = Clock::now();
  Timed t;
  t.response = c.Post(target, body);
  t.took = Clock::now() - t0;
  return t;
}

// The deadline distinguishes a key still queued (withdrawn, 503 unavailable, never written) from one whose
// transaction is in flight (503 outcome-unknown; the late commit lands and a retry says duplicate), and the
// late completion does not disturb the connection that got the 503.
TEST(Deadline, QueuedIsWithdrawnInFlightIsOutcomeUnknown) {
  ScangateProcess server({"--writers=1", "--request-timeout=1s"});
  ASSERT_TRUE(server.Start());
  Pg pg;
  const std::string in_flight = UniqueKey("dl-inflight"), queued = UniqueKey("dl-queued");
  RowBlocker blocker({in_flight});
  HttpClient c1(server.port());
  Timed first;
  std::thread t([&] { first = TimedPost(c1, "/observe", ObserveBody(in_flight)); });
  ASSERT_TRUE(pg.WaitForLockWaiter()) << "the writer never blocked on the test's row";
  HttpClient c2(server.port());
  const Timed second = TimedPost(c2, "/observe", ObserveBody(queued));  // queued behind the blocked batch
  t.join();

  EXPECT_TRUE(IsProblem(first.response, 503, "outcome-unknown")) << first.response;
  EXPECT_EQ(first.response.header("retry-after"), "1");
  EXPECT_TRUE(IsProblem(second.response, 503, "unavailable")) << second.response;
  EXPECT_EQ(second.response.header("retry-after"), "1");
  EXPECT_GE(first.took, kRequestTimeout - 50ms);
  EXPECT_LT(first.took, kRequestTimeout + kAnswerMargin);
  EXPECT_LT(second.took, kRequestTimeout + kAnswerMargin);
  EXPECT_EQ(HttpClient(server.port()).Get("/healthz").status, 200);

  blocker.Release();
  // The late batch commits the in-flight key; the withdrawn one is never written.
  ASSERT_TRUE(WaitForRows(pg, {Sha256Hex(in_flight)}, 1)) << "the in-flight key was not recorded after release";
  const std::string after = UniqueKey("dl-after");
  // Same connections: no stray late response arrives on them; the next answers are the right ones.
  HttpResponse next = c1.Post("/observe", ObserveBody(after));
  EXPECT_EQ(next.status, 201) << next;
  EXPECT_EQ(next.json().at("digest").as_string(), Sha256Hex(after)) << next;
  HttpResponse retry_in_flight = c1.Post("/observe", ObserveBody(in_flight));
  EXPECT_EQ(retry_in_flight.status, 200) << retry_in_flight;
  EXPECT_EQ(retry_in_flight.json().at("verdict"), "duplicate") << retry_in_flight;
  EXPECT_EQ(pg.CountDigest(Sha256Hex(queued)), 0) << "a key answered 'unavailable' was written";
  // The writer skipped the withdrawn item; /metrics counts it.
  const auto cancelled = MetricValue(c1.Get("/metrics").body, "scangate_pg_cancelled_total");
  ASSERT_TRUE(cancelled.has_value());
  EXPECT_EQ(*cancelled, 1.0);
  HttpResponse retry_queued = c2.Post("/observe", ObserveBody(queued));
  EXPECT_EQ(retry_queued.status, 201) << retry_queued;
  EXPECT_EQ(retry_queued.json().at("digest").as_string(), Sha256Hex(queued)) << retry_queued;
}

// The same per batch: a batch whose entries are in a blocked transaction is outcome-unknown; a batch
// whose entries all wait in the queue is unavailable and none of them is written.
TEST(Deadline, BatchDeadline) {
  ScangateProcess server({"--writers=1", "--request-timeout=1s"});
  ASSERT_TRUE(server.Start());
  Pg pg;
  const std::vector<std::string> held = {UniqueKey("dlb-held-0"), UniqueKey("dlb-held-1")};
  const std::vector<std::string> waiting = {UniqueKey("dlb-wait-0"), UniqueKey("dlb-wait-1")};
  RowBlocker blocker({held[0]});
  HttpClient c1(server.port());
  Timed first;
  std::thread t([&] { first = TimedPost(c1, "/observe/batch", BatchBody(held)); });
  ASSERT_TRUE(pg.WaitForLockWaiter());
  HttpClient c2(server.port());
  const Timed second = TimedPost(c2, "/observe/batch", BatchBody(waiting));
  t.join();
  EXPECT_TRUE(IsProblem(first.response, 503, "outcome-unknown")) << first.response;
  EXPECT_TRUE(IsProblem(second.response, 503, "unavailable")) << second.response;
  EXPECT_LT(first.took, kRequestTimeout + kAnswerMargin);
  EXPECT_LT(second.took, kRequestTimeout + kAnswerMargin);
  blocker.Release();
  // held[0] was in the blocked transaction and commits late; held[1] was in it too or still queued
  // (then withdrawn): either is fine, and the retry must agree with the table. One transaction holds
  // both if it holds held[1], so once held[0] is visible held[1] is too, or never will be.
  ASSERT_TRUE(WaitForRows(pg, {Sha256Hex(held[0])}, 1));
  const bool held1_recorded = pg.CountDigest(Sha256Hex(held[1])) == 1;
  EXPECT_EQ(pg.CountDigests({Sha256Hex(waiting[0]), Sha256Hex(waiting[1])}), 0);
  HttpResponse again = c2.Post("/observe/batch", BatchBody({held[0], waiting[0], held[1], waiting[1]}));
  ASSERT_EQ(again.status, 200) << again;
  const boost::json::object body = again.json();
  const auto& results = body.at("results").as_array();
  ASSERT_EQ(results.size(), 4u);
  EXPECT_EQ(results[0].as_object().at("verdict"), "duplicate");
  EXPECT_EQ(results[1].as_object().at("verdict"), "new");
  EXPECT_EQ(results[2].as_object().at("verdict"), held1_recorded ? "duplicate" : "new");
  EXPECT_EQ(results[3].as_object().at("verdict"), "new");
}

// SIGSTOPs the given backends; SIGCONT on Resume() or destruction (never leaves them stopped).
class StoppedBackends {
 public:
  explicit StoppedBackends(std::vector<int> pids) : pids_(std::move(pids)) {
    for (const int p : pids_) ::kill(p, SIGSTOP);
  }
  ~StoppedBackends() { Resume(); }
  void Resume() {
    for (const int p : pids_) ::kill(p, SIGCONT);
    pids_.clear();
  }

 private:
  std::vector<int> pids_;
};

// Writer backends frozen (SIGSTOP: the backend runs no statement_timeout and the kernel still answers
// keepalives, so only the request deadline bounds the wait): every request answers 503 in time,
// /healthz keeps answering; after SIGCONT the service recovers by itself, keys answered `unavailable`
// were never written, and no key is ever answered "new" twice.
TEST(Deadline, WriterBackendsStopped) {
  ScangateProcess server({"--writers=2", "--request-timeout=1s"});
  ASSERT_TRUE(server.Start());
  Pg pg;
  std::vector<int> pids;
  {
    pqxx::nontransaction tx(pg.conn());
    for (const auto& row : tx.exec(
             "SELECT pid FROM pg_stat_activity WHERE application_name = 'scangate' AND datname = current_database()")) {
      pids.push_back(row[0].as<int>());
    }
  }
  ASSERT_EQ(pids.size(), 2u) << "expected the 2 writer connections with application_name=scangate";

  struct Answer {
    std::string key;
    HttpResponse response;
    Clock::duration took;
  };
  std::mutex mu;
  std::vector<Answer> answers;
  {
    StoppedBackends stopped(pids);
    std::vector<std::thread> clients;
    for (int c = 0; c < 4; ++c) {
      clients.emplace_back([&, c] {
        try {  // an exception must not end the process with the backends stopped
          HttpClient client(server.port());
          for (int i = 0; i < 3; ++i) {
            const std::string key = UniqueKey("dl-stop-" + std::to_string(c));
            Timed t = TimedPost(client, "/observe", ObserveBody(key));
            std::lock_guard lk(mu);
            answers.push_back({key, t.response, t.took});
          }
        } catch (const std::exception& e) {
          ADD_FAILURE() << "client " << c << ": " << e.what();
        }
      });
    }
    // While they wait: liveness stays green.
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(HttpClient(server.port()).Get("/healthz").status, 200);
      std::this_thread::sleep_for(300ms);
    }
    for (auto& t : clients) t.join();
    stopped.Resume();
  }
  ASSERT_EQ(answers.size(), 12u);
  int unknown = 0, withdrawn = 0;
  for (const auto& a : answers) {
    EXPECT_EQ(a.response.status, 503) << a.response;
    const std::string slug = Slug(a.response);
    EXPECT_TRUE(slug == "unavailable" || slug == "outcome-unknown") << a.response;
    EXPECT_EQ(a.response.header("retry-after"), "1");
    EXPECT_LT(a.took, kRequestTimeout + kAnswerMargin) << "a request waited past the deadline";
    (slug == "outcome-unknown" ? unknown : withdrawn) += 1;
  }
  EXPECT_GE(unknown, 1) << "the first request of a frozen writer is in flight: outcome-unknown expected";
  EXPECT_GE(withdrawn, 1);

  // Recovery by itself: a fresh key is eventually answered new.
  HttpClient c(server.port());
  const std::string probe = UniqueKey("dl-stop-probe");
  const auto deadline = Clock::now() + kEventually;
  for (;;) {
    HttpResponse r = c.Post("/observe", ObserveBody(probe));
    if (r.status == 201) break;
    ASSERT_EQ(r.status, 503) << r;
    ASSERT_LT(Clock::now(), deadline) << "no recovery after SIGCONT; last: " << r;
    std::this_thread::sleep_for(100ms);
  }
  // Every key: withdrawn ones were never written; a retry resolves each key exactly once.
  std::map<std::string, int> news;
  for (const auto& a : answers) {
    if (Slug(a.response) == "unavailable") {
      EXPECT_EQ(pg.CountDigest(Sha256Hex(a.key)), 0) << "a key answered 'unavailable' was written";
    }
    HttpResponse r = c.Post("/observe", ObserveBody(a.key));
    ASSERT_TRUE(r.status == 201 || r.status == 200) << r;
    if (r.status == 201) ++news[a.key];
    if (r.status == 200) {
      EXPECT_EQ(Slug(a.response), "outcome-unknown") << "only an outcome-unknown key may already be recorded";
    }
    HttpResponse again = c.Post("/observe", ObserveBody(a.key));
    EXPECT_EQ(again.status, 200) << again;
    EXPECT_EQ(pg.CountDigest(Sha256Hex(a.key)), 1);
  }
  for (const auto& [key, n] : news) EXPECT_EQ(n, 1) << "a key answered new twice";
}

std::string Suffix() { return std::to_string(std::random_device{}() % 1000000); }

// The fixture's URL with another role and/or database.
std::string UrlAs(const std::string& role, const std::string& db) {
  std::string u = Env().pg_url;
  u.replace(u.find("postgres@"), 9, role + "@");
  const auto slash = u.find('/', u.find('@'));
  u.replace(slash + 1, u.find('?') - slash - 1, db);
  return u;
}

// A role without CREATE on schema public (PostgreSQL 15's default for non-owners) cannot ever migrate:
// scangate exits 1 at once with one line naming the cause, instead of retrying forever.
TEST(Startup, PermissionDeniedExits) {
  const std::string role = "sg_it_nocreate_" + Suffix();
  Pg pg;
  {
    pqxx::nontransaction tx(pg.conn());
    tx.exec0("CREATE ROLE " + role + " LOGIN");
  }
  ScangateProcess server({"--database-url=" + UrlAs(role, "scangate")});
  const auto t0 = Clock::now();
  const auto started = server.Start();
  const auto took = Clock::now() - t0;
  {
    pqxx::nontransaction tx(pg.conn());
    tx.exec0("DROP ROLE " + role);
  }
  ASSERT_FALSE(started) << "scangate started with a role that may not create its table";
  EXPECT_NE(std::string(started.message()).find("exited with status 1"), std::string::npos) << started.message();
  EXPECT_LT(took, 20s);
  const auto failed = server.LogEvents("startup_failed");
  ASSERT_EQ(failed.size(), 1u) << server.Log();
  const std::string line = boost::json::serialize(failed[0]);
  EXPECT_NE(line.find("permission denied"), std::string::npos) << line;
  EXPECT_NE(line.find("42501"), std::string::npos) << line;
  EXPECT_LE(server.LogEvents("pg_state").size(), 1u) << server.Log();
}

// A transient cause (the database does not exist yet): backs off with one log line per attempt naming
// the cause, and becomes ready by itself once the database is created.
TEST(Startup, MissingDatabaseBacksOffThenReady) {
  const std::string db = "sg_it_late_" + Suffix();
  Pg pg;
  ScangateProcess server({"--database-url=" + UrlAs("postgres", db)});
  std::thread creator([&] {
    std::this_thread::sleep_for(3s);
    pqxx::connection admin(Env().pg_url);
    pqxx::nontransaction tx(admin);
    tx.exec0("CREATE DATABASE " + db);
  });
  const auto started = server.Start();
  creator.join();
  ASSERT_TRUE(started);
  const auto downs = server.LogEvents("pg_state");
  std::size_t attempts = 0;
  for (const auto& e : downs) {
    if (e.at("state") != "down") continue;
    ++attempts;
    const std::string line = boost::json::serialize(e);
    EXPECT_NE(line.find("3D000"), std::string::npos) << line;
    EXPECT_NE(line.find("does not exist"), std::string::npos) << line;
  }
  // 3 s with backoff 250 ms, 500 ms, 1 s, 2 s, ...: a handful of attempts, not hundreds.
  EXPECT_GE(attempts, 1u);
  EXPECT_LE(attempts, 8u) << server.Log();
  HttpClient c(server.port());
  EXPECT_EQ(c.Post("/observe", ObserveBody(UniqueKey("late-db"))).status, 201);
  EXPECT_EQ(server.Stop(), 0);
  pqxx::nontransaction tx(pg.conn());
  tx.exec0("DROP DATABASE " + db + " WITH (FORCE)");
}

}  // namespace
}  // namespace scangate::it
