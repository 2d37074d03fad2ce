// POST /lookup over real TCP against a real scangate + PostgreSQL: 200 with the recorded row, 404
// not-recorded for an unknown key, never a write (the row count does not move, a later observe says new),
// the same token/Origin/body-limit rules as /observe, and 503 + Retry-After while PostgreSQL is down,
// recovering by itself (stops the fixture's cluster; serialized with the other PostgreSQL tests).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <unistd.h>

#include "harness.h"

namespace scangate::it {
namespace {

using Clock = std::chrono::steady_clock;

HttpResponse LookupReconnecting(HttpClient& c, const std::string& body) {
  try {
    HttpResponse r = c.Post("/lookup", body);
    if (!r.keep_alive) c.Reconnect();
    return r;
  } catch (const std::exception&) {
    c.Reconnect();
    return c.Post("/lookup", body);
  }
}

TEST(ServiceLookup, FoundNotFoundNeverRecords) {
  ScangateProcess server({"--capacity=100000"});
  ASSERT_TRUE(server.Start());
  HttpClient c(server.port());
  Pg pg;
  const std::string seen = UniqueKey("lookup-seen");
  const std::string unseen = UniqueKey("lookup-unseen");
  HttpResponse r = c.Post("/observe", R"({"key":)" + JsonString(seen) + R"(,"source":"till 4"})");
  ASSERT_EQ(r.status, 201) << r;
  const std::string first_seen_body = c.Post("/observe", ObserveBody(seen)).json().at("first_seen").as_string().c_str();

  const auto rows = pg.TotalRows();
  r = c.Post("/lookup", ObserveBody(seen));
  ASSERT_EQ(r.status, 200) << r;
  EXPECT_EQ(r.header("content-type"), "application/json");
  const auto o = r.json();
  EXPECT_EQ(o.at("digest"), Sha256Hex(seen).c_str());
  EXPECT_EQ(o.at("source"), "till 4");
  EXPECT_EQ(o.at("first_seen"), first_seen_body.c_str());
  EXPECT_EQ(o.size(), 3u);

  r = c.Post("/lookup", "key=" + unseen, std::string("application/x-www-form-urlencoded"));
  EXPECT_TRUE(IsProblem(r, 404, "not-recorded")) << r;
  r = c.Post("/lookup", ObserveBody(unseen));
  EXPECT_TRUE(IsProblem(r, 404, "not-recorded")) << r;
  EXPECT_EQ(pg.TotalRows(), rows) << "a lookup wrote a row";
  EXPECT_EQ(pg.CountDigest(Sha256Hex(unseen)), 0);
  EXPECT_EQ(c.Post("/observe", ObserveBody(unseen)).status, 201) << "after lookups the key must still be new";

  // Validation and limits as /observe.
  EXPECT_TRUE(IsProblem(c.Post("/lookup", R"({"nokey":1})"), 400, "invalid-key"));
  EXPECT_EQ(c.Request("GET", "/lookup", "", std::nullopt).status, 405);
  HttpClient big(server.port());
  EXPECT_TRUE(IsProblem(big.Post("/lookup", ObserveBody(std::string(20000, 'k'))), 413, "body-too-large"));
  HttpClient foreign(server.port());
  EXPECT_TRUE(IsProblem(foreign.Request("POST", "/lookup", ObserveBody(seen), "application/json",
                                        {{"Origin", "http://evil.example"}}),
                        403, "origin-not-allowed"));
}

TEST(ServiceLookup, TokensRequired) {
  char tmpl[] = "/tmp/scangate-lookup-tokens.XXXXXX";
  const int fd = ::mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  const std::string line = Sha256Hex("lookup-token") + " till-l lookup\n";
  ASSERT_EQ(::write(fd, line.data(), line.size()), static_cast<ssize_t>(line.size()));
  ::close(fd);
  ScangateProcess server({"--capacity=100000", std::string("--tokens-file=") + tmpl});
  ASSERT_TRUE(server.Start());
  HttpClient c(server.port());
  EXPECT_TRUE(IsProblem(c.Post("/lookup", ObserveBody("k")), 401, "unauthorized"));
  HttpClient c2(server.port());
  HttpResponse r = c2.Request("POST", "/lookup", ObserveBody(UniqueKey("tok")), "application/json",
                              {{"Authorization", "Bearer lookup-token"}});
  EXPECT_TRUE(IsProblem(r, 404, "not-recorded")) << r;
  std::remove(tmpl);
}

struct ClusterGuard {
  bool stopped = false;
  ~ClusterGuard() {
    if (stopped) PgClusterStart();
  }
};

TEST(ServiceLookup, OutageIs503ThenRecovers) {
  ScangateProcess server({"--capacity=100000"});
  ASSERT_TRUE(server.Start());
  HttpClient c(server.port());
  const std::string seen = UniqueKey("lookup-outage");
  ASSERT_EQ(c.Post("/observe", ObserveBody(seen)).status, 201);
  ASSERT_EQ(c.Post("/lookup", ObserveBody(seen)).status, 200);

  ClusterGuard guard;
  ASSERT_EQ(PgClusterStop(), 0) << "scripts/pg.sh stop failed";
  guard.stopped = true;
  // Every answer during the outage is 503 + Retry-After (never 404: "not recorded" is not knowable now).
  for (int i = 0; i < 5; ++i) {
    HttpResponse r = LookupReconnecting(c, ObserveBody(i % 2 == 0 ? seen : UniqueKey("lookup-outage-x")));
    ASSERT_TRUE(IsProblem(r, 503, "unavailable")) << r;
    EXPECT_EQ(r.header("retry-after"), "1");
  }
  ASSERT_EQ(PgClusterStart(), 0) << "scripts/pg.sh start failed";
  guard.stopped = false;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  for (;;) {
    HttpResponse r = LookupReconnecting(c, ObserveBody(seen));
    if (r.status == 200) break;
    ASSERT_TRUE(IsProblem(r, 503, "unavailable")) << r;
    ASSERT_LT(Clock::now(), deadline) << "lookups did not recover within 30 s";
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

}  // namespace
}  // namespace scangate::it
