// Black-box tests of terminal identity and the per-terminal rate limit (docs/security.md "Terminals", "Rate limits"):
// two terminals (two tokens), one flooding past --rate-limit gets 429 + Retry-After while every request of
// the other succeeds; the recorded source is the token's terminal; a body source naming another terminal is
// 403; a token whose routes exclude /lookup gets 403 there; SIGHUP reloads the tokens file (a new token works,
// a removed one is 401, a broken file keeps the tokens in force); per client address with tokens off.
// No speed is asserted: the limit is small (5/s, burst 5) and the flood is of cheap duplicate answers.
#include <signal.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"

namespace scangate::it {
namespace {

constexpr int kFlood = 60;  // requests of the flooding terminal, far past its burst of 5

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

std::string TempPath(const std::string& tag) {
  return ::testing::TempDir() + "scangate-terminals-" + tag + "-" + RandomHex(6);
}

// POST with a bearer token ("" = none). A refusal decided before the body is read (401, 403 route, 429)
// closes the connection, as the server never reads that body: reconnect for the next request.
HttpResponse PostAs(HttpClient& c, const std::string& token, const std::string& target, const std::string& body) {
  std::vector<std::pair<std::string, std::string>> headers;
  if (!token.empty()) headers.emplace_back("Authorization", "Bearer " + token);
  HttpResponse r = c.Request("POST", target, body, "application/json", headers);
  if (!r.keep_alive) c.Reconnect();
  return r;
}

std::string SourcedBody(const std::string& key, const std::string& source) {
  return R"({"key":)" + JsonString(key) + R"(,"source":)" + JsonString(source) + "}";
}

// Waits (bounded) for the n-th "tokens_reload" log line; its "result".
std::string WaitForReload(const ScangateProcess& server, std::size_t n) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    const auto events = server.LogEvents("tokens_reload");
    if (events.size() >= n) return std::string(events[n - 1].at("result").as_string());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return "no tokens_reload log line within 20 s";
}

TEST(ServiceTerminals, OneTerminalFloodsTheOtherIsServed) {
  const std::string tokens = TempPath("flood");
  WriteFile(tokens, "# two tills\n" + Sha256Hex("token-a") + " till-a observe,batch,lookup\n" + Sha256Hex("token-b") +
                        " till-b observe,batch\n");
  ScangateProcess server({"--capacity=100000", "--tokens-file=" + tokens, "--rate-limit=5", "--rate-burst=5"});
  ASSERT_TRUE(server.Start());
  Pg pg;
  HttpClient a(server.port());
  HttpClient b(server.port());

  // Terminal A floods with one key: the first answer records it, then duplicates, then 429s.
  const std::string key_a = UniqueKey("till-a");
  int ok_a = 0, limited_a = 0;
  for (int i = 0; i < kFlood; ++i) {
    const HttpResponse r = PostAs(a, "token-a", "/observe", ObserveBody(key_a));
    if (r.status == 201 || r.status == 200) {
      ++ok_a;
      continue;
    }
    ASSERT_TRUE(IsProblem(r, 429, "rate-limited")) << r;
    ASSERT_TRUE(r.has_header("retry-after")) << r;
    const int retry = std::stoi(r.header("retry-after"));
    EXPECT_GE(retry, 1) << r;
    EXPECT_LE(retry, 1) << "5 per second: a token is back within 1 s; " << r;
    ++limited_a;
  }
  EXPECT_GE(ok_a, 5) << "the burst passes";
  EXPECT_GT(limited_a, 0) << kFlood << " requests of one terminal never hit --rate-limit=5";
  EXPECT_EQ(ok_a + limited_a, kFlood);
  EXPECT_EQ(pg.SourceOf(Sha256Hex(key_a)), std::optional<std::string>("till-a"));

  // Terminal B, while A is over its limit: every request is served (its own bucket is full).
  const std::string k1 = UniqueKey("till-b"), k2 = UniqueKey("till-b"), k3 = UniqueKey("till-b");
  const std::string k4 = UniqueKey("till-b"), k5 = UniqueKey("till-b");
  EXPECT_EQ(PostAs(b, "token-b", "/observe", ObserveBody(k1)).status, 201);          // no source: till-b
  EXPECT_EQ(PostAs(b, "token-b", "/observe", SourcedBody(k2, "till-b")).status, 201);  // its own name
  HttpResponse r = PostAs(b, "token-b", "/observe", SourcedBody(k3, "till-a"));       // another terminal's
  EXPECT_TRUE(IsProblem(r, 403, "source-not-allowed")) << r;
  r = PostAs(b, "token-b", "/lookup", ObserveBody(k1));  // its routes: observe,batch
  EXPECT_TRUE(IsProblem(r, 403, "route-not-allowed")) << r;
  r = PostAs(b, "token-b", "/observe/batch", BatchBody({k4, k5}));
  EXPECT_EQ(r.status, 200) << r;
  EXPECT_EQ(pg.SourceOf(Sha256Hex(k1)), std::optional<std::string>("till-b"));
  EXPECT_EQ(pg.SourceOf(Sha256Hex(k2)), std::optional<std::string>("till-b"));
  EXPECT_EQ(pg.CountDigest(Sha256Hex(k3)), 0) << "a refused source records nothing";
  EXPECT_EQ(pg.SourceOf(Sha256Hex(k4)), std::optional<std::string>("till-b"));
  EXPECT_EQ(pg.SourceOf(Sha256Hex(k5)), std::optional<std::string>("till-b"));

  // A's lookup is allowed (its routes name it) once its bucket has a token again; its own record names it.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  r = PostAs(a, "token-a", "/lookup", ObserveBody(key_a));
  ASSERT_EQ(r.status, 200) << r;
  EXPECT_EQ(r.json().at("source").as_string(), "till-a");

  // Metrics: 429s by terminal id (till-b has none); /stats shows them for the dashboard.
  HttpClient m(server.port());
  const std::string metrics = m.Get("/metrics").body;
  const std::string line = "scangate_rate_limited_total{terminal=\"till-a\"} " + std::to_string(limited_a) + "\n";
  EXPECT_NE(metrics.find(line), std::string::npos) << metrics.substr(0, 2000);
  EXPECT_EQ(metrics.find("terminal=\"till-b\""), std::string::npos);
  EXPECT_NE(metrics.find("scangate_http_requests_total{route=\"/observe\",code=\"429\"}"), std::string::npos);
  const auto stats = boost::json::parse(m.Get("/stats").body).as_object();
  EXPECT_EQ(stats.at("rate_limit").at("limited").at("till-a").to_number<int>(), limited_a);
  EXPECT_EQ(stats.at("rate_limit").at("per_second").to_number<int>(), 5);
  // Neither tokens nor their hashes reach the log.
  const std::string log = server.Log();
  for (const char* t : {"token-a", "token-b"}) {
    EXPECT_EQ(log.find(Sha256Hex(t)), std::string::npos);
    EXPECT_EQ(log.find(std::string("Bearer ") + t), std::string::npos);
  }
  std::remove(tokens.c_str());
}

TEST(ServiceTerminals, SighupReloadsTheTokensFile) {
  const std::string tokens = TempPath("reload");
  WriteFile(tokens, Sha256Hex("old-token") + " t-old\n");
  ScangateProcess server({"--capacity=100000", "--tokens-file=" + tokens});
  ASSERT_TRUE(server.Start());
  Pg pg;
  HttpClient c(server.port());
  const std::string k1 = UniqueKey("reload");
  ASSERT_EQ(PostAs(c, "old-token", "/observe", ObserveBody(k1)).status, 201);
  EXPECT_TRUE(IsProblem(PostAs(c, "new-token", "/observe", ObserveBody(UniqueKey("reload"))), 401, "unauthorized"));

  // Add a token, remove the old one, SIGHUP: no restart (same connection, same process).
  WriteFile(tokens, "# rotated\n" + Sha256Hex("new-token") + " t-new observe\n");
  ASSERT_EQ(::kill(server.pid(), SIGHUP), 0);
  ASSERT_EQ(WaitForReload(server, 1), "reloaded") << server.LogTail();
  const std::string k2 = UniqueKey("reload");
  EXPECT_EQ(PostAs(c, "new-token", "/observe", ObserveBody(k2)).status, 201);
  EXPECT_EQ(pg.SourceOf(Sha256Hex(k2)), std::optional<std::string>("t-new"));
  EXPECT_TRUE(IsProblem(PostAs(c, "old-token", "/observe", ObserveBody(UniqueKey("reload"))), 401, "unauthorized"));
  EXPECT_TRUE(IsProblem(PostAs(c, "new-token", "/lookup", ObserveBody(k2)), 403, "route-not-allowed"));

  // A broken file: the tokens in force stay, the log says so without quoting a hash.
  WriteFile(tokens, Sha256Hex("other-token") + " bad/terminal\n");
  ASSERT_EQ(::kill(server.pid(), SIGHUP), 0);
  ASSERT_EQ(WaitForReload(server, 2), "kept the previous tokens") << server.LogTail();
  EXPECT_EQ(PostAs(c, "new-token", "/observe", ObserveBody(UniqueKey("reload"))).status, 201);
  EXPECT_TRUE(IsProblem(PostAs(c, "other-token", "/observe", ObserveBody(UniqueKey("reload"))), 401, "unauthorized"));
  const std::string log = server.Log();
  for (const char* t : {"old-token", "new-token", "other-token"}) {
    EXPECT_EQ(log.find(Sha256Hex(t).substr(0, 16)), std::string::npos) << t;
  }
  EXPECT_NE(server.LogEvents("tokens_reload")[1].at("error").as_string().find("line 1"), std::string::npos);
  EXPECT_EQ(server.Stop(), 0);
  std::remove(tokens.c_str());
}

// Tokens off: one bucket per client address; its 429s are counted in one aggregate, never by address.
TEST(ServiceTerminals, PerAddressLimitWithoutTokens) {
  ScangateProcess server({"--capacity=100000", "--rate-limit=5"});
  ASSERT_TRUE(server.Start());
  HttpClient c(server.port());
  const std::string key = UniqueKey("by-address");
  int limited = 0;
  for (int i = 0; i < kFlood; ++i) {
    const HttpResponse r = PostAs(c, "", "/observe", ObserveBody(key));
    if (r.status == 429) {
      EXPECT_TRUE(IsProblem(r, 429, "rate-limited")) << r;
      EXPECT_GE(std::stoi(r.header("retry-after")), 1);
      ++limited;
    } else {
      EXPECT_TRUE(r.status == 201 || r.status == 200) << r;
    }
  }
  EXPECT_GT(limited, 0);
  // Operational routes are never limited.
  for (int i = 0; i < 10; ++i) EXPECT_EQ(c.Get("/healthz").status, 200);
  const std::string metrics = c.Get("/metrics").body;
  EXPECT_NE(metrics.find("scangate_rate_limited_total{terminal=\"(address)\"} " + std::to_string(limited) + "\n"),
            std::string::npos);
  EXPECT_EQ(metrics.find("127.0.0.1"), std::string::npos) << "an address must never be a label";
}

}  // namespace
}  // namespace scangate::it
