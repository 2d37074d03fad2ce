// Black-box tests of every route and every error status of the scangate HTTP contract
// (docs: notes/interfaces.md "server/"), over a real TCP connection to a real scangate process
// backed by the fixture's PostgreSQL. Also: keep-alive, pipelining, batch semantics, privacy of keys.
#include <cstdio>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

namespace scangate::it {
namespace {

namespace json = boost::json;

constexpr std::size_t kMaxKeyBytes = 512;
constexpr std::size_t kMaxSourceChars = 64;
constexpr std::size_t kMaxObserveBodyBytes = 16 * 1024;
constexpr std::size_t kMaxBatchBodyBytes = 1024 * 1024;
constexpr std::size_t kMaxBatchEntries = 1000;
constexpr std::size_t kHeaderLimitBytes = 8 * 1024;

bool IsRfc3339(const std::string& s) {
  static const std::regex re(R"(^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$)");
  return std::regex_match(s, re);
}

std::set<std::string> Keys(const json::object& o) {
  std::set<std::string> out;
  for (const auto& kv : o) out.insert(std::string(kv.key()));
  return out;
}

// A result object of a "new" verdict for `key`: exactly verdict, digest, via.
::testing::AssertionResult IsNewResult(const json::object& o, const std::string& key) {
  if (Keys(o) != std::set<std::string>{"verdict", "digest", "via"}) {
    return ::testing::AssertionFailure() << "fields of a new result are not {verdict,digest,via}: "
                                         << json::serialize(o);
  }
  if (o.at("verdict") != "new") return ::testing::AssertionFailure() << "verdict not new: " << json::serialize(o);
  if (o.at("digest") != Sha256Hex(key).c_str()) {
    return ::testing::AssertionFailure() << "digest is not SHA-256(key) = " << Sha256Hex(key) << ": "
                                         << json::serialize(o);
  }
  if (o.at("via") != "filter" && o.at("via") != "exact") {
    return ::testing::AssertionFailure() << "via is neither filter nor exact: " << json::serialize(o);
  }
  return ::testing::AssertionSuccess();
}

// A result object of a "duplicate" verdict: exactly verdict, digest, via = exact, first_seen RFC 3339.
::testing::AssertionResult IsDuplicateResult(const json::object& o, const std::string& key) {
  if (Keys(o) != std::set<std::string>{"verdict", "digest", "via", "first_seen"}) {
    return ::testing::AssertionFailure() << "fields of a duplicate result are not {verdict,digest,via,first_seen}: "
                                         << json::serialize(o);
  }
  if (o.at("verdict") != "duplicate") {
    return ::testing::AssertionFailure() << "verdict not duplicate: " << json::serialize(o);
  }
  if (o.at("digest") != Sha256Hex(key).c_str()) {
    return ::testing::AssertionFailure() << "digest is not SHA-256(key): " << json::serialize(o);
  }
  if (o.at("via") != "exact") return ::testing::AssertionFailure() << "via is not exact: " << json::serialize(o);
  if (!o.at("first_seen").is_string() || !IsRfc3339(std::string(o.at("first_seen").as_string()))) {
    return ::testing::AssertionFailure() << "first_seen is not RFC 3339: " << json::serialize(o);
  }
  return ::testing::AssertionSuccess();
}

bool IsJsonContentType(const HttpResponse& r) { return r.header("content-type").rfind("application/json", 0) == 0; }

::testing::AssertionResult IsNew(const HttpResponse& r, const std::string& key) {
  if (r.status != 201) return ::testing::AssertionFailure() << "expected 201, got " << r;
  if (!IsJsonContentType(r)) return ::testing::AssertionFailure() << "not application/json: " << r;
  return IsNewResult(r.json(), key);
}

::testing::AssertionResult IsDuplicate(const HttpResponse& r, const std::string& key) {
  if (r.status != 200) return ::testing::AssertionFailure() << "expected 200, got " << r;
  if (!IsJsonContentType(r)) return ::testing::AssertionFailure() << "not application/json: " << r;
  return IsDuplicateResult(r.json(), key);
}

class ServiceRoutes : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ScangateProcess({"--capacity=1000000"});
    start_result_ = new ::testing::AssertionResult(server_->Start());
  }
  static void TearDownTestSuite() {
    if (server_ != nullptr) {
      const int status = server_->Stop();
      EXPECT_EQ(status, 0) << "SIGTERM must end scangate with exit 0";
    }
    delete server_;
    delete start_result_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(*start_result_); }
  void TearDown() override {
    if (HasFailure() && server_ != nullptr) {
      std::fprintf(stderr, "---- scangate log tail (%s) ----\n%s\n", server_->log_path().c_str(),
                   server_->LogTail(4000).c_str());
    }
  }
  static std::uint16_t port() { return server_->port(); }

  // After a rejected request: the same connection (if the server kept it open) or a new one still
  // serves a fresh key correctly.
  static void ExpectStillServes(HttpClient& c, const HttpResponse& rejected) {
    if (!rejected.keep_alive) c.Reconnect();
    const std::string key = UniqueKey("after-error");
    try {
      EXPECT_TRUE(IsNew(c.Post("/observe", ObserveBody(key)), key));
    } catch (const std::exception& e) {
      ADD_FAILURE() << "connection kept open (no Connection: close) after " << rejected.status
                    << " but the next request failed: " << e.what();
      c.Reconnect();
    }
  }

  static ScangateProcess* server_;
  static ::testing::AssertionResult* start_result_;
};
ScangateProcess* ServiceRoutes::server_ = nullptr;
::testing::AssertionResult* ServiceRoutes::start_result_ = nullptr;

// A new key is 201 "new"; the same key again is 200 "duplicate" with a stable first_seen; one row.
TEST_F(ServiceRoutes, ObserveNewThenDuplicate) {
  HttpClient c(port());
  Pg pg;
  const std::string key = UniqueKey("new-dup");
  EXPECT_EQ(pg.CountDigest(Sha256Hex(key)), 0);
  EXPECT_TRUE(IsNew(c.Post("/observe", ObserveBody(key)), key));
  EXPECT_EQ(pg.CountDigest(Sha256Hex(key)), 1);

  HttpResponse d1 = c.Post("/observe", ObserveBody(key));
  ASSERT_TRUE(IsDuplicate(d1, key));
  HttpResponse d2 = c.Post("/observe", ObserveBody(key));
  ASSERT_TRUE(IsDuplicate(d2, key));
  EXPECT_EQ(d1.json().at("first_seen"), d2.json().at("first_seen"));
  EXPECT_EQ(pg.CountDigest(Sha256Hex(key)), 1);
}

// The optional source is stored with the row; up to 64 characters accepted, 65 rejected.
TEST_F(ServiceRoutes, ObserveStoresSource) {
  HttpClient c(port());
  Pg pg;
  const std::string key = UniqueKey("source");
  EXPECT_TRUE(IsNew(c.Post("/observe", "{\"key\":" + JsonString(key) + ",\"source\":\"t9\"}"), key));
  EXPECT_EQ(pg.SourceOf(Sha256Hex(key)), std::optional<std::string>("t9"));

  const std::string key64 = UniqueKey("source64");
  const std::string source64(kMaxSourceChars, 's');
  EXPECT_TRUE(IsNew(c.Post("/observe", "{\"key\":" + JsonString(key64) + ",\"source\":\"" + source64 + "\"}"), key64));
  EXPECT_EQ(pg.SourceOf(Sha256Hex(key64)), std::optional<std::string>(source64));
}

// Key length limits are in bytes: 512 accepted (ASCII and multi-byte UTF-8), 513 rejected.
TEST_F(ServiceRoutes, KeyLengthBoundaries) {
  HttpClient c(port());
  Pg pg;
  std::string k512 = UniqueKey("len512");
  k512 += std::string(kMaxKeyBytes - k512.size(), 'x');
  ASSERT_EQ(k512.size(), kMaxKeyBytes);
  EXPECT_TRUE(IsNew(c.Post("/observe", ObserveBody(k512)), k512));

  std::string utf8 = UniqueKey("utf8");
  while (utf8.size() + 2 <= kMaxKeyBytes) utf8 += "\xc3\xa9";  // U+00E9, 2 bytes
  EXPECT_TRUE(IsNew(c.Post("/observe", ObserveBody(utf8)), utf8));
  EXPECT_EQ(pg.CountDigest(Sha256Hex(utf8)), 1);

  std::string k513 = UniqueKey("len513");
  k513 += std::string(kMaxKeyBytes + 1 - k513.size(), 'x');
  HttpResponse r = c.Post("/observe", ObserveBody(k513));
  EXPECT_TRUE(IsProblem(r, 400, "invalid-key"));
  EXPECT_EQ(pg.CountDigest(Sha256Hex(k513)), 0);
  ExpectStillServes(c, r);
}

struct BadBody {
  const char* name;
  std::string body;
  std::set<std::string> slugs;   // acceptable problem slugs (more than one where the contract allows)
  std::string key;               // a key in the body that must not be recorded ("" = none)
};

// Every malformed or invalid /observe body is a 400 problem+json, records nothing, and the
// connection (or a new one) keeps working.
TEST_F(ServiceRoutes, ObserveRejectsInvalidBodies) {
  const std::set<std::string> json_or_key{"malformed-json", "invalid-key"};
  std::vector<BadBody> cases;
  cases.push_back({"truncated json", "{\"key\":", {"malformed-json"}, ""});
  cases.push_back({"not json", "hello there", {"malformed-json"}, ""});
  cases.push_back({"trailing garbage", "{\"key\":\"a\"} x", {"malformed-json"}, ""});
  cases.push_back({"empty body", "", json_or_key, ""});
  cases.push_back({"missing key", "{}", {"invalid-key"}, ""});
  cases.push_back({"other field only", "{\"source\":\"t1\"}", {"invalid-key"}, ""});
  cases.push_back({"empty key", "{\"key\":\"\"}", {"invalid-key"}, ""});
  cases.push_back({"key number", "{\"key\":5}", {"invalid-key"}, ""});
  cases.push_back({"key null", "{\"key\":null}", {"invalid-key"}, ""});
  cases.push_back({"key array", "{\"key\":[\"a\"]}", {"invalid-key"}, ""});
  cases.push_back({"key object", "{\"key\":{\"k\":\"a\"}}", {"invalid-key"}, ""});
  cases.push_back({"top-level array", "[\"a\"]", json_or_key, ""});
  cases.push_back({"top-level string", "\"a\"", json_or_key, ""});
  {
    const std::string k = UniqueKey("bad-source-type");
    cases.push_back({"source number", "{\"key\":" + JsonString(k) + ",\"source\":5}", {"invalid-source"}, k});
  }
  {
    const std::string k = UniqueKey("bad-source-len");
    cases.push_back({"source 65 chars",
                     "{\"key\":" + JsonString(k) + ",\"source\":\"" + std::string(kMaxSourceChars + 1, 's') + "\"}",
                     {"invalid-source"}, k});
  }
  {
    const std::string k = UniqueKey("nul-escaped");
    cases.push_back({"escaped NUL in key", "{\"key\":" + JsonString(k + std::string(1, '\0') + "x") + "}",
                     {"invalid-key"}, k + std::string(1, '\0') + "x"});
  }
  {
    const std::string k = UniqueKey("nul-raw");
    cases.push_back({"raw NUL byte in key", "{\"key\":\"" + k + std::string(1, '\0') + "x\"}", json_or_key,
                     k + std::string(1, '\0') + "x"});
  }
  {
    const std::string k = UniqueKey("bad-utf8") + "\xff\xfe";
    cases.push_back({"invalid UTF-8 in key", "{\"key\":\"" + k + "\"}", json_or_key, k});
  }
  {
    const std::string k = UniqueKey("overlong-utf8") + "\xc0\xaf";
    cases.push_back({"overlong UTF-8 in key", "{\"key\":\"" + k + "\"}", json_or_key, k});
  }
  {
    const std::string k = UniqueKey("lone-surrogate");
    cases.push_back({"lone surrogate escape", "{\"key\":\"" + k + "\\ud800\"}", json_or_key, ""});
  }
  {
    const std::string k = UniqueKey("deep");
    std::string deep = "{\"key\":" + JsonString(k) + ",\"x\":";
    for (int i = 0; i < 20; ++i) deep += "[";
    for (int i = 0; i < 20; ++i) deep += "]";
    deep += "}";
    cases.push_back({"nesting deeper than 8", deep, {"malformed-json", "invalid-key"}, k});
  }

  HttpClient c(port());
  Pg pg;
  for (const auto& bad : cases) {
    SCOPED_TRACE(bad.name);
    HttpResponse r = c.Post("/observe", bad.body);
    EXPECT_EQ(r.status, 400) << r;
    bool slug_ok = false;
    for (const auto& slug : bad.slugs) slug_ok = slug_ok || IsProblem(r, 400, slug);
    EXPECT_TRUE(slug_ok) << "not a problem+json 400 with one of the expected slugs: " << r;
    if (!bad.key.empty()) {
      EXPECT_EQ(pg.CountDigest(Sha256Hex(bad.key)), 0) << "a rejected key was recorded";
    }
    ExpectStillServes(c, r);
  }
}

// Unknown paths are 404 not-found.
TEST_F(ServiceRoutes, UnknownPathIs404) {
  HttpClient c(port());
  for (const char* path : {"/", "/nope", "/observe/", "/observe/nope", "/healthz/x", "/metricsx"}) {
    SCOPED_TRACE(path);
    HttpResponse r = c.Get(path);
    EXPECT_TRUE(IsProblem(r, 404, "not-found"));
    ExpectStillServes(c, r);
  }
  HttpResponse r = c.Post("/nope", ObserveBody(UniqueKey("404")));
  EXPECT_TRUE(IsProblem(r, 404, "not-found"));
  ExpectStillServes(c, r);
}

// A known path with a wrong method is 405 method-not-allowed with an Allow header naming the right one.
TEST_F(ServiceRoutes, WrongMethodIs405WithAllow) {
  HttpClient c(port());
  struct Case {
    std::string method, path, allowed;
  };
  const std::vector<Case> cases{{"GET", "/observe", "POST"},     {"PUT", "/observe", "POST"},
                                {"GET", "/observe/batch", "POST"}, {"POST", "/healthz", "GET"},
                                {"POST", "/readyz", "GET"},        {"DELETE", "/metrics", "GET"},
                                {"POST", "/stats", "GET"}};
  for (const auto& tc : cases) {
    SCOPED_TRACE(tc.method + " " + tc.path);
    HttpResponse r = c.Request(tc.method, tc.path, tc.method == "GET" ? "" : "{}",
                               tc.method == "GET" ? std::nullopt : std::optional<std::string>("application/json"));
    EXPECT_TRUE(IsProblem(r, 405, "method-not-allowed"));
    ASSERT_TRUE(r.has_header("allow")) << r;
    EXPECT_NE(r.header("allow").find(tc.allowed), std::string::npos) << r;
    EXPECT_EQ(r.header("allow").find(tc.allowed == "GET" ? "POST" : "GET"), std::string::npos) << r;
    ExpectStillServes(c, r);
  }
}

// /observe bodies up to 16 KiB are read; one byte more is 413 body-too-large (nothing recorded).
TEST_F(ServiceRoutes, ObserveBodyLimitIs16KiB) {
  HttpClient c(port());
  Pg pg;
  auto padded = [](const std::string& key, std::size_t total) {
    std::string head = "{\"key\":" + JsonString(key);
    return head + std::string(total - head.size() - 1, ' ') + "}";
  };
  const std::string fits = UniqueKey("16k");
  const std::string body_fits = padded(fits, kMaxObserveBodyBytes);
  ASSERT_EQ(body_fits.size(), kMaxObserveBodyBytes);
  EXPECT_TRUE(IsNew(c.Post("/observe", body_fits), fits));

  const std::string over = UniqueKey("16k+1");
  HttpResponse r = c.Post("/observe", padded(over, kMaxObserveBodyBytes + 1));
  EXPECT_TRUE(IsProblem(r, 413, "body-too-large"));
  EXPECT_EQ(pg.CountDigest(Sha256Hex(over)), 0);
  ExpectStillServes(c, r);

  // Far over the limit (the server must not wait for or buffer all of it).
  const std::string huge = UniqueKey("huge");
  r = c.Post("/observe", padded(huge, 4 * kMaxObserveBodyBytes));
  EXPECT_TRUE(IsProblem(r, 413, "body-too-large"));
  ExpectStillServes(c, r);
}

// /observe/batch bodies over 1 MiB are 413.
TEST_F(ServiceRoutes, BatchBodyLimitIs1MiB) {
  HttpClient c(port());
  std::string body = "{\"keys\":[\"" + UniqueKey("batch-1m") + "\"]";
  body += std::string(kMaxBatchBodyBytes + 1 - body.size() - 1, ' ');
  body += "}";
  ASSERT_EQ(body.size(), kMaxBatchBodyBytes + 1);
  HttpResponse r = c.Post("/observe/batch", body);
  EXPECT_TRUE(IsProblem(r, 413, "body-too-large"));
  ExpectStillServes(c, r);
}

// Content types read as JSON: application/json (+params), application/*+json, curl's default
// application/x-www-form-urlencoded, and none. Anything else is 415 and records nothing.
TEST_F(ServiceRoutes, ContentTypes) {
  HttpClient c(port());
  Pg pg;
  const std::vector<std::optional<std::string>> accepted{
      std::string("application/json"), std::string("application/json; charset=utf-8"),
      std::string("application/vnd.scangate+json"), std::string("application/x-www-form-urlencoded"),
      std::nullopt, std::string("Application/JSON")};
  for (const auto& ct : accepted) {
    SCOPED_TRACE(ct.value_or("<none>"));
    const std::string key = UniqueKey("ct-ok");
    EXPECT_TRUE(IsNew(c.Post("/observe", ObserveBody(key), ct), key));
  }
  for (const std::string ct : {"text/plain", "multipart/form-data; boundary=x", "application/xml", "text/json"}) {
    SCOPED_TRACE(ct);
    const std::string key = UniqueKey("ct-bad");
    HttpResponse r = c.Post("/observe", ObserveBody(key), ct);
    EXPECT_TRUE(IsProblem(r, 415, "unsupported-media-type"));
    EXPECT_EQ(pg.CountDigest(Sha256Hex(key)), 0);
    ExpectStillServes(c, r);
  }
  const std::string key = UniqueKey("ct-bad-batch");
  HttpResponse r = c.Post("/observe/batch", "{\"keys\":[" + JsonString(key) + "]}", "text/plain");
  EXPECT_TRUE(IsProblem(r, 415, "unsupported-media-type"));
  EXPECT_EQ(pg.CountDigest(Sha256Hex(key)), 0);
}

// A request header block over 8 KiB is 431 header-too-large; the server keeps serving.
TEST_F(ServiceRoutes, HeaderTooLargeIs431) {
  const std::string raw = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(kHeaderLimitBytes + 1024, 'a') +
                          "\r\n\r\n";
  const std::string reply = RawExchange(port(), raw);
  EXPECT_EQ(reply.rfind("HTTP/1.1 431", 0), 0u) << reply.substr(0, 300);
  EXPECT_NE(reply.find("urn:scangate:problem:header-too-large"), std::string::npos) << reply.substr(0, 600);
  HttpClient c(port());
  EXPECT_EQ(c.Get("/healthz").status, 200);
}

// Bytes that are not HTTP get a 400 or a closed connection, never a hang or a crash.
TEST_F(ServiceRoutes, GarbageRequestLine) {
  const std::string reply = RawExchange(port(), "THIS IS NOT HTTP\r\n\r\n");
  EXPECT_TRUE(reply.empty() || reply.rfind("HTTP/1.1 400", 0) == 0) << reply.substr(0, 300);
  HttpClient c(port());
  EXPECT_EQ(c.Get("/healthz").status, 200);
}

// Liveness, readiness, metrics and stats.
TEST_F(ServiceRoutes, HealthReadyMetricsStats) {
  HttpClient c(port());
  HttpResponse h = c.Get("/healthz");
  ASSERT_EQ(h.status, 200) << h;
  EXPECT_TRUE(IsJsonContentType(h)) << h;
  EXPECT_EQ(json::serialize(h.json()), R"({"status":"ok"})");

  HttpResponse ready = c.Get("/readyz");
  ASSERT_EQ(ready.status, 200) << ready;
  EXPECT_TRUE(IsJsonContentType(ready)) << ready;
  EXPECT_EQ(json::serialize(ready.json()), R"({"status":"ready"})");

  // Make the counters move, then read them.
  const std::string key = UniqueKey("metrics");
  ASSERT_TRUE(IsNew(c.Post("/observe", ObserveBody(key)), key));
  ASSERT_TRUE(IsDuplicate(c.Post("/observe", ObserveBody(key)), key));

  HttpResponse m = c.Get("/metrics");
  ASSERT_EQ(m.status, 200) << m;
  EXPECT_EQ(m.header("content-type").rfind("text/plain", 0), 0u) << m;
  EXPECT_NE(m.header("content-type").find("version=0.0.4"), std::string::npos) << m;
  for (const char* name : {"scangate_http_requests_total", "scangate_verdicts_total",
                           "scangate_filter_false_positives_total", "scangate_filter_stale_total",
                           "scangate_filter_memory_bytes", "scangate_filter_fill_ratio", "scangate_filter_estimated_fp",
                           "scangate_pg_up", "scangate_pg_queue_depth", "scangate_pg_batch_size_count",
                           "scangate_pg_commit_seconds_count", "scangate_write_behind_conflicts_total"}) {
    EXPECT_TRUE(MetricValue(m.body, name).has_value()) << "metric " << name << " missing in\n" << m.body;
  }
  EXPECT_EQ(MetricValue(m.body, "scangate_pg_up"), std::optional<double>(1.0));
  // Prometheus text format: every sample line is "name[{labels}] value", every name has a TYPE line.
  std::istringstream in(m.body);
  std::string line;
  std::set<std::string> typed, sampled;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream f(line.substr(7));
      std::string name;
      f >> name;
      typed.insert(name);
      continue;
    }
    if (line[0] == '#') continue;
    static const std::regex sample(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? [-+0-9.eEInfNa]+( -?[0-9]+)?$)");
    std::smatch mm;
    ASSERT_TRUE(std::regex_match(line, mm, sample)) << "not a Prometheus sample line: " << line;
    sampled.insert(mm[1].str());
    EXPECT_EQ(mm[1].str().rfind("scangate_", 0), 0u) << "metric without scangate_ prefix: " << line;
  }
  EXPECT_FALSE(sampled.empty());
  for (const auto& name : sampled) {
    bool has_type = typed.count(name) != 0;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string s(suffix);
      if (!has_type && name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
        has_type = typed.count(name.substr(0, name.size() - s.size())) != 0;
      }
    }
    EXPECT_TRUE(has_type) << "no # TYPE line for " << name;
  }

  HttpResponse s = c.Get("/stats");
  ASSERT_EQ(s.status, 200) << s;
  EXPECT_TRUE(IsJsonContentType(s)) << s;
  EXPECT_FALSE(s.json().empty());
}

// Many requests on one connection use one TCP connection (keep-alive).
TEST_F(ServiceRoutes, KeepAlive) {
  HttpClient c(port());
  const std::uint16_t local = c.local_port();
  for (int i = 0; i < 20; ++i) {
    const std::string key = UniqueKey("keepalive");
    HttpResponse r = c.Post("/observe", ObserveBody(key));
    ASSERT_TRUE(IsNew(r, key));
    ASSERT_TRUE(r.keep_alive) << r;
    ASSERT_EQ(c.Get("/healthz").status, 200);
  }
  EXPECT_EQ(c.connects(), 1);
  EXPECT_EQ(c.local_port(), local);
}

// Three requests in one write get three responses, in order.
TEST_F(ServiceRoutes, Pipelining) {
  HttpClient c(port());
  const std::string key = UniqueKey("pipeline");
  const std::string body = ObserveBody(key);
  const std::string post = "POST /observe HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                           std::to_string(body.size()) + "\r\n\r\n" + body;
  c.SendRaw(post + post + "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_TRUE(IsNew(c.ReadResponse(), key));
  EXPECT_TRUE(IsDuplicate(c.ReadResponse(), key));
  HttpResponse h = c.ReadResponse();
  EXPECT_EQ(h.status, 200) << h;
  EXPECT_NE(h.body.find("ok"), std::string::npos) << h;
  // And the connection is still usable afterwards.
  const std::string key2 = UniqueKey("pipeline-after");
  EXPECT_TRUE(IsNew(c.Post("/observe", ObserveBody(key2)), key2));
  EXPECT_EQ(c.connects(), 1);
}

// Issue 33, request smuggling at the socket: a POST whose Transfer-Encoding is not exactly "chunked" carries a
// second, complete request as its "body". Beast reads such a request as body-less; before the fix the bytes
// behind it were left on the open connection. Now: exactly one response, 400 bad-request, the connection
// closes, and the smuggled request is never parsed (its key is not recorded).
TEST_F(ServiceRoutes, TransferEncodingNotChunkedIs400AndCloses) {
  Pg pg;
  for (const char* te : {"gzip", "chunked, gzip", "identity"}) {
    SCOPED_TRACE(te);
    const std::string smuggled = UniqueKey("smuggled");
    const std::string inner_body = ObserveBody(smuggled);
    const std::string inner = "POST /observe HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                              "Content-Length: " + std::to_string(inner_body.size()) + "\r\n\r\n" + inner_body;
    const std::string outer = std::string("POST /observe HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                          "Transfer-Encoding: ") + te + "\r\n\r\n" + inner;
    const std::string reply = RawExchange(port(), outer);
    EXPECT_EQ(reply.rfind("HTTP/1.1 400", 0), 0u) << reply.substr(0, 400);
    EXPECT_NE(reply.find("urn:scangate:problem:bad-request"), std::string::npos) << reply.substr(0, 600);
    EXPECT_NE(reply.find("Connection: close"), std::string::npos) << reply.substr(0, 400);
    std::size_t responses = 0;
    for (std::size_t at = reply.find("HTTP/1."); at != std::string::npos; at = reply.find("HTTP/1.", at + 1)) ++responses;
    EXPECT_EQ(responses, 1u) << "the smuggled request was answered: " << reply;
    EXPECT_EQ(pg.CountDigest(Sha256Hex(smuggled)), 0) << "the smuggled request was decided";
  }
  // Chunked is still read as chunked.
  const std::string key = UniqueKey("chunked-ok");
  const std::string body = ObserveBody(key);
  char size[16];
  std::snprintf(size, sizeof size, "%zx", body.size());
  const std::string reply = RawExchange(port(), "POST /observe HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                                "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" +
                                                    std::string(size) + "\r\n" + body + "\r\n0\r\n\r\n");
  EXPECT_EQ(reply.rfind("HTTP/1.1 201", 0), 0u) << reply.substr(0, 400);
}

// Issue 33: {"key":"A","key":"B"} would be routed by HAProxy on A (json_query keeps the first) and decided here
// on B (Boost.JSON keeps the last): 400 duplicate-member, neither key recorded, the connection keeps serving.
TEST_F(ServiceRoutes, DuplicateMembersAre400) {
  HttpClient c(port());
  Pg pg;
  const std::string a = UniqueKey("dup-a"), b = UniqueKey("dup-b");
  HttpResponse r = c.Post("/observe", "{\"key\":" + JsonString(a) + ",\"key\":" + JsonString(b) + "}");
  EXPECT_TRUE(IsProblem(r, 400, "duplicate-member")) << r;
  r = c.Post("/observe/batch", "{\"keys\":[{\"key\":" + JsonString(a) + ",\"key\":" + JsonString(b) + "}]}");
  EXPECT_TRUE(IsProblem(r, 400, "duplicate-member")) << r;
  EXPECT_EQ(pg.CountDigest(Sha256Hex(a)) + pg.CountDigest(Sha256Hex(b)), 0);
  ExpectStillServes(c, r);
}

// Issue 33: a keyboard-wedge scanner's trailing Enter is not part of the key: "K\r\n" and "K" are one key (the
// digest is SHA-256 of "K"); a source with a terminal escape sequence is 400 invalid-source.
TEST_F(ServiceRoutes, ScannerNewlineIsTrimmedAndControlSourceRefused) {
  HttpClient c(port());
  const std::string key = UniqueKey("wedge");
  EXPECT_TRUE(IsNew(c.Post("/observe", ObserveBody(key + "\r\n")), key));
  EXPECT_TRUE(IsDuplicate(c.Post("/observe", ObserveBody(key)), key));
  EXPECT_TRUE(IsDuplicate(c.Post("/observe", "key=" + key + "%0A", "application/x-www-form-urlencoded"), key));
  const HttpResponse r =
      c.Post("/observe", "{\"key\":" + JsonString(UniqueKey("esc")) + ",\"source\":" + JsonString("lane\x1b[2J3") + "}");
  EXPECT_TRUE(IsProblem(r, 400, "invalid-source")) << r;
}

json::array BatchResults(const HttpResponse& r) {
  json::object o = r.json();
  if (Keys(o) != std::set<std::string>{"results"} || !o.at("results").is_array()) {
    ADD_FAILURE() << "batch response is not {\"results\":[...]}: " << r;
    return {};
  }
  return o.at("results").as_array();
}

// Results come back in request order; a key repeated within one batch is new once, then duplicate;
// strings and objects with a source mix; the source is stored.
TEST_F(ServiceRoutes, BatchOrderRepeatsAndMixedEntries) {
  HttpClient c(port());
  Pg pg;
  const std::string seen = UniqueKey("batch-seen");
  ASSERT_TRUE(IsNew(c.Post("/observe", ObserveBody(seen)), seen));
  const std::string a = UniqueKey("batch-a"), b = UniqueKey("batch-b"), d = UniqueKey("batch-d");
  const std::string body = "{\"keys\":[" + JsonString(a) + ",{\"key\":" + JsonString(b) + ",\"source\":\"t9\"}," +
                           JsonString(seen) + "," + JsonString(a) + ",{\"key\":" + JsonString(d) + "}," +
                           JsonString(b) + "]}";
  HttpResponse r = c.Post("/observe/batch", body);
  ASSERT_EQ(r.status, 200) << r;
  EXPECT_TRUE(IsJsonContentType(r)) << r;
  json::array results = BatchResults(r);
  ASSERT_EQ(results.size(), 6u) << r;
  EXPECT_TRUE(IsNewResult(results[0].as_object(), a));
  EXPECT_TRUE(IsNewResult(results[1].as_object(), b));
  EXPECT_TRUE(IsDuplicateResult(results[2].as_object(), seen));
  EXPECT_TRUE(IsDuplicateResult(results[3].as_object(), a));
  EXPECT_TRUE(IsNewResult(results[4].as_object(), d));
  EXPECT_TRUE(IsDuplicateResult(results[5].as_object(), b));
  EXPECT_EQ(pg.SourceOf(Sha256Hex(b)), std::optional<std::string>("t9"));
  for (const auto& k : {a, b, d, seen}) EXPECT_EQ(pg.CountDigest(Sha256Hex(k)), 1);
  // The single-key route agrees afterwards.
  EXPECT_TRUE(IsDuplicate(c.Post("/observe", ObserveBody(d)), d));
}

// A key written behind scangate's back (psql, its own first_seen) and then observed in a batch of fresh keys
// (ack=commit): every key is one the filter calls "definitely new", so the batch goes to PostgreSQL by COPY,
// which the existing row aborts; the batch is re-run through ON CONFLICT. That key is answered duplicate with
// PostgreSQL's first_seen, every other key new, one row each. Its own server: each writer's COPY back-off
// starts clear. --retention=off: the row's first_seen (2021) is far past any horizon, and with one the key
// would rightly be new again (tests/server/service_retention_test.cc).
TEST(ServiceExactPath, KeyWrittenBehindTheBackIsDuplicateTheRestNew) {
  ScangateProcess server({"--ack=commit", "--retention=off"});
  ASSERT_TRUE(server.Start());
  HttpClient c(server.port());
  Pg pg;
  const std::string behind = UniqueKey("behind");
  {
    pqxx::work tx(pg.conn());
    tx.exec_params0(
        "INSERT INTO scan_keys (digest, seen_by, first_seen) "
        "VALUES (scangate_stored_digest(decode($1, 'hex')), 'psql', '2021-03-04 05:06:07.891011+00')",
        Sha256Hex(behind));
    tx.commit();
  }
  const auto fallbacks = [&] {
    return MetricValue(c.Get("/metrics").body, "scangate_copy_fallbacks_total").value_or(-1);
  };
  EXPECT_EQ(fallbacks(), 0);
  std::vector<std::string> keys;
  for (int i = 0; i < 40; ++i) keys.push_back(UniqueKey("beside-behind"));
  keys.insert(keys.begin() + 20, behind);
  HttpResponse r = c.Post("/observe/batch", BatchBody(keys));
  ASSERT_EQ(r.status, 200) << r;
  json::array results = BatchResults(r);
  ASSERT_EQ(results.size(), keys.size()) << r;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (keys[i] == behind) {
      EXPECT_TRUE(IsDuplicateResult(results[i].as_object(), behind));
      EXPECT_EQ(results[i].as_object().at("first_seen"), "2021-03-04T05:06:07.891011Z");
    } else {
      EXPECT_TRUE(IsNewResult(results[i].as_object(), keys[i])) << i;
    }
  }
  std::vector<std::string> hexes;
  for (const auto& k : keys) hexes.push_back(Sha256Hex(k));
  EXPECT_EQ(pg.CountDigests(hexes), static_cast<std::int64_t>(keys.size()));
  EXPECT_EQ(pg.SourceOf(Sha256Hex(behind)), std::optional<std::string>("psql"));
  EXPECT_EQ(fallbacks(), 1) << "the batch holding the key was not tried by COPY first";
  EXPECT_EQ(server.Stop(), 0);
}

// 1000 entries are accepted and answered in order; every key is recorded.
TEST_F(ServiceRoutes, Batch1000Entries) {
  HttpClient c(port());
  Pg pg;
  std::vector<std::string> keys;
  for (std::size_t i = 0; i < kMaxBatchEntries; ++i) keys.push_back(UniqueKey("batch1000"));
  HttpResponse r = c.Post("/observe/batch", BatchBody(keys));
  ASSERT_EQ(r.status, 200) << r;
  json::array results = BatchResults(r);
  ASSERT_EQ(results.size(), kMaxBatchEntries);
  std::vector<std::string> hexes;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    EXPECT_TRUE(IsNewResult(results[i].as_object(), keys[i])) << "entry " << i;
    hexes.push_back(Sha256Hex(keys[i]));
  }
  EXPECT_EQ(pg.CountDigests(hexes), static_cast<std::int64_t>(kMaxBatchEntries));
}

// Invalid batches are 400 invalid-batch (or the entry's own slug) for the whole batch; nothing recorded.
TEST_F(ServiceRoutes, BatchRejects) {
  HttpClient c(port());
  Pg pg;
  {
    SCOPED_TRACE("1001 entries");
    std::vector<std::string> hexes;
    std::string body = "{\"keys\":[";
    for (std::size_t i = 0; i < kMaxBatchEntries + 1; ++i) {
      const std::string k = UniqueKey("batch1001");
      hexes.push_back(Sha256Hex(k));
      // Piece by piece: `"," + std::string&&` trips GCC 12's false -Wrestrict at -O3
      // (GCC PR105329, https://gcc.gnu.org/bugzilla/show_bug.cgi?id=105329).
      if (i > 0) body += ',';
      body += JsonString(k);
    }
    body += "]}";
    HttpResponse r = c.Post("/observe/batch", body);
    EXPECT_TRUE(IsProblem(r, 400, "invalid-batch"));
    EXPECT_EQ(pg.CountDigests(hexes), 0);
    ExpectStillServes(c, r);
  }
  for (const std::string& body : {std::string("{\"keys\":[]}"), std::string("{}"), std::string("{\"keys\":\"a\"}"),
                                 std::string("{\"keys\":{\"key\":\"a\"}}"), std::string("[\"a\"]")}) {
    SCOPED_TRACE(body);
    HttpResponse r = c.Post("/observe/batch", body);
    EXPECT_TRUE(IsProblem(r, 400, "invalid-batch") || IsProblem(r, 400, "malformed-json")) << r;
    ExpectStillServes(c, r);
  }
  {
    SCOPED_TRACE("malformed json");
    HttpResponse r = c.Post("/observe/batch", "{\"keys\":[\"a\",");
    EXPECT_TRUE(IsProblem(r, 400, "malformed-json"));
    ExpectStillServes(c, r);
  }
  // One invalid entry (index 2, of several kinds) rejects the whole batch; detail names the index.
  const std::vector<std::string> bad_entries{"\"\"", "5", "null", "{\"source\":\"t1\"}",
                                             "{\"key\":\"" + std::string(kMaxKeyBytes + 1, 'x') + "\"}",
                                             "{\"key\":\"ok\",\"source\":7}", "[\"a\"]"};
  for (const auto& bad : bad_entries) {
    SCOPED_TRACE(bad.substr(0, 40));
    const std::string k0 = UniqueKey("batch-bad0"), k1 = UniqueKey("batch-bad1");
    const std::string body = "{\"keys\":[" + JsonString(k0) + "," + JsonString(k1) + "," + bad + "]}";
    HttpResponse r = c.Post("/observe/batch", body);
    EXPECT_EQ(r.status, 400) << r;
    EXPECT_TRUE(IsProblem(r, 400, "invalid-batch") || IsProblem(r, 400, "invalid-key") ||
                IsProblem(r, 400, "invalid-source"))
        << r;
    json::object o = r.json();
    if (o.contains("detail") && o.at("detail").is_string()) {
      EXPECT_NE(std::string(o.at("detail").as_string()).find('2'), std::string::npos)
          << "detail does not name the index 2: " << r;
    }
    EXPECT_EQ(pg.CountDigest(Sha256Hex(k0)), 0) << "a rejected batch recorded its valid entries";
    EXPECT_EQ(pg.CountDigest(Sha256Hex(k1)), 0) << "a rejected batch recorded its valid entries";
    ExpectStillServes(c, r);
  }
}

// Runs `cmd` under /bin/sh; its wait status (pclose) and everything it wrote to stdout. A failed popen is a
// test failure and status -1.
std::pair<int, std::string> RunShell(const std::string& cmd) {
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) {
    ADD_FAILURE() << "popen failed: " << cmd;
    return {-1, ""};
  }
  std::string out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  return {::pclose(p), out};
}

// `scangate --help` lists the flags of the contract and exits 0.
TEST(ServiceCommandLine, HelpListsFlags) {
  const auto [status, out] = RunShell("'" + Env().server_binary + "' --help 2>&1");
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  for (const char* flag : {"--listen", "--port", "--port-file", "--threads", "--database-url", "--capacity",
                           "--fp-target", "--window", "--retention", "--shards", "--ack", "--writers", "--batch-limit",
                           "--flush-interval", "--queue-limit", "--digest-secret-file", "--filter", "--access-log"}) {
    EXPECT_NE(out.find(flag), std::string::npos) << "--help does not mention " << flag << ":\n" << out;
  }
}

// Protected mode (issue 33), at process level: without --tokens-file and --digest-secret-file an explicit
// non-loopback --listen stops start-up (exit 2, naming both flags and --insecure); --listen=auto serves on
// 127.0.0.1 and logs protected_mode; --insecure lifts it.
TEST(ServiceCommandLine, ProtectedModeRefusesTheNetworkWithoutTokensAndSecret) {
  {
    const auto [status, out] =
        RunShell("'" + Env().server_binary + "' --database-url='" + Env().pg_url + "' --listen=0.0.0.0 2>&1");
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << out;
    EXPECT_NE(out.find("--tokens-file (or --tls-client-ca) and --digest-secret-file"), std::string::npos) << out;
    EXPECT_NE(out.find("--insecure"), std::string::npos) << out;
  }
  {
    ScangateProcess server({"--listen=auto", "--capacity=100000"});
    ASSERT_TRUE(server.Start());
    const auto listening = server.LogEvents("listening");
    ASSERT_EQ(listening.size(), 1u) << server.LogTail();
    EXPECT_EQ(listening[0].at("address"), "127.0.0.1");
    EXPECT_EQ(server.LogEvents("protected_mode").size(), 1u) << server.LogTail();
    HttpClient c(server.port());
    EXPECT_EQ(c.Get("/healthz").status, 200);
    EXPECT_EQ(server.Stop(), 0);
  }
  {
    ScangateProcess server({"--listen=0.0.0.0", "--insecure", "--capacity=100000"});
    ASSERT_TRUE(server.Start()) << "--insecure did not lift protected mode";
    EXPECT_TRUE(server.LogEvents("protected_mode").empty());
    HttpClient c(server.port());  // 0.0.0.0 includes loopback
    EXPECT_EQ(c.Get("/healthz").status, 200);
    EXPECT_EQ(server.Stop(), 0);
  }
}

// Issue 33: --max-connections-per-address. A client address holding its limit of open connections gets its next
// one closed at accept, unanswered; a slot frees when a connection closes; the admin listener has its own cap
// and answers throughout.
TEST(ServiceConnections, PerAddressCapClosesTheExtraConnection) {
  ScangateProcess server({"--max-connections-per-address=4", "--admin-listen=127.0.0.1:0", "--capacity=100000"});
  ASSERT_TRUE(server.Start());
  const auto listening = server.LogEvents("listening");
  ASSERT_EQ(listening.size(), 1u) << server.LogTail();
  const auto admin_port = static_cast<std::uint16_t>(listening[0].at("admin_port").to_number<int>());
  std::vector<std::unique_ptr<HttpClient>> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(std::make_unique<HttpClient>(server.port()));
    ASSERT_EQ(held.back()->Post("/observe", ObserveBody(UniqueKey("cap"))).status, 201) << i;  // open, kept alive
  }
  const std::string refused = RawExchange(server.port(), "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(refused, "") << "a 5th connection from one address was served";
  HttpClient admin(admin_port);
  EXPECT_EQ(admin.Get("/readyz").status, 200) << "the admin listener shares the main port's cap";
  EXPECT_EQ(held[0]->Get("/healthz").status, 404) << "a held connection stopped working";  // admin split: 404
  held.pop_back();  // closes one connection: its slot frees once the server sees the close
  std::string reply;
  for (int i = 0; i < 100 && reply.empty(); ++i) {
    reply = RawExchange(server.port(), "POST /observe HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                       "Content-Length: 11\r\nConnection: close\r\n\r\n{\"key\":\"x\"}");
    if (reply.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(reply.rfind("HTTP/1.1 20", 0), 0u) << "the freed slot was not reusable: " << reply;
  EXPECT_EQ(server.Stop(), 0);
}

// Issue 33: --max-body-bytes-in-flight over real sockets. A body that never finishes holds its declared bytes
// from its header on; a second body that does not fit beside it is answered 503 unavailable (+ Retry-After) and
// the connection closes, unread; /readyz answers throughout; when the first connection ends, its bytes come
// back and the same request is recorded.
TEST(ServiceConnections, BodyBudgetRefusesWhatDoesNotFit) {
  ScangateProcess server({"--max-body-bytes-in-flight=4096", "--capacity=100000"});
  ASSERT_TRUE(server.Start());
  HttpClient probe(server.port());
  auto in_flight = [&] { return ScrapeMetric(probe, "scangate_body_bytes_in_flight"); };
  auto slow = std::make_unique<HttpClient>(server.port());
  slow->SendRaw("POST /observe HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 3000\r\n\r\n"
                "{\"key\":\"");
  for (int i = 0; i < 200 && in_flight() != 3000; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(in_flight(), 3000) << "the unfinished body's declared bytes are not held";
  const std::string key = UniqueKey("budget");
  const std::string big = "{\"key\":" + JsonString(key) + std::string(2000, ' ') + "}";  // ~2 KiB: 5 KiB > 4 KiB
  HttpClient c(server.port());
  HttpResponse r = c.Post("/observe", big);
  EXPECT_TRUE(IsProblem(r, 503, "unavailable")) << r;
  EXPECT_EQ(r.header("retry-after"), "1") << r;
  EXPECT_FALSE(r.keep_alive) << "the refused body was left unread: the connection must close";
  EXPECT_EQ(probe.Get("/readyz").status, 200);
  EXPECT_EQ(ScrapeMetric(probe, "scangate_body_budget_refused_total"), 1);
  slow.reset();  // the unfinished request's connection ends: its bytes come back
  for (int i = 0; i < 200 && in_flight() != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(in_flight(), 0);
  c.Reconnect();
  EXPECT_TRUE(IsNew(c.Post("/observe", big), key));
  // Given back once the answer's write completes (on the server's thread, a moment after the client read it).
  for (int i = 0; i < 200 && in_flight() != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(in_flight(), 0) << "an answered request gives its bytes back";
  EXPECT_EQ(server.Stop(), 0);
}

// A PROXY protocol v2 header (HAProxy send-proxy-v2) for TCP over IPv4 from `client`, or LOCAL (health check).
std::string ProxyV2(const std::string& client) {
  std::string h("\r\n\r\n\0\r\nQUIT\n", 12);
  if (client.empty()) return h + std::string("\x20\x00\x00\x00", 4);
  h += std::string("\x21\x11\x00\x0c", 4);
  unsigned char a[4] = {};
  EXPECT_EQ(inet_pton(AF_INET, client.c_str(), a), 1) << client;
  h.append(reinterpret_cast<const char*>(a), sizeof a);
  return h + std::string("\x7f\x00\x00\x01\xc3\x50\x1f\x90", 8);  // to 127.0.0.1, ports 50000 -> 8080
}

// Issue 33: --proxy-protocol-from. Behind a listed proxy the per-address limits key by the client the PROXY v2
// header names: with tokens off and --rate-limit 1/s (burst 1), the same client through two connections is
// limited, another client is not; a LOCAL header (the proxy's health check) is served; a connection from the
// listed peer without a header is closed unanswered and logged; an unlisted peer (127.0.0.1) cannot claim an
// address: its header is bad HTTP.
TEST(ServiceConnections, ProxyProtocolGivesTheClientsAddress) {
  ScangateProcess server({"--proxy-protocol-from=127.0.0.2", "--rate-limit=1", "--rate-burst=1", "--capacity=100000"});
  ASSERT_TRUE(server.Start());
  auto observe = [](const std::string& key) {
    return "POST /observe HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n"
           "Content-Length: " + std::to_string(ObserveBody(key).size()) + "\r\n\r\n" + ObserveBody(key);
  };
  // From the proxy's address (127.0.0.2): the harness's own probes come from 127.0.0.1.
  auto from_proxy = [&](const std::string& bytes) {
    return RawExchange(server.port(), bytes, std::chrono::milliseconds(3000), "127.0.0.2");
  };
  std::string r = from_proxy(ProxyV2("192.0.2.10") + observe(UniqueKey("pp")));
  EXPECT_EQ(r.rfind("HTTP/1.1 201", 0), 0u) << r;
  r = from_proxy(ProxyV2("192.0.2.10") + observe(UniqueKey("pp")));
  EXPECT_EQ(r.rfind("HTTP/1.1 429", 0), 0u) << "the same client on another connection shares its bucket: " << r;
  r = from_proxy(ProxyV2("192.0.2.11") + observe(UniqueKey("pp")));
  EXPECT_EQ(r.rfind("HTTP/1.1 201", 0), 0u) << "another client behind the same proxy was limited: " << r;
  r = from_proxy(ProxyV2("") + "GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(r.rfind("HTTP/1.1 200", 0), 0u) << "LOCAL (health check): " << r;
  r = from_proxy("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(r, "") << "a listed peer without a PROXY header was served as itself";
  EXPECT_FALSE(server.LogEvents("proxy_protocol_refused").empty()) << server.LogTail();
  r = RawExchange(server.port(), ProxyV2("192.0.2.12") + observe(UniqueKey("pp")));
  EXPECT_EQ(r.rfind("HTTP/1.1 400", 0), 0u) << "an unlisted peer claimed an address: " << r;
  EXPECT_EQ(server.Stop(), 0);
}

// Raw keys never appear in the server's log (access log on) nor in /metrics or /stats, whatever the
// request: new, duplicate, batch, and rejected ones.
TEST(ServicePrivacy, RawKeysNeverInLogsOrMetrics) {
  ScangateProcess server({"--access-log=on", "--capacity=100000"});
  ASSERT_TRUE(server.Start());
  HttpClient c(server.port());
  std::vector<std::string> raw;
  for (int i = 0; i < 5; ++i) {
    const std::string k = UniqueKey("privacy");
    raw.push_back(k);
    EXPECT_TRUE(IsNew(c.Post("/observe", "{\"key\":" + JsonString(k) + ",\"source\":\"p1\"}"), k));
    EXPECT_TRUE(IsDuplicate(c.Post("/observe", ObserveBody(k)), k));
  }
  const std::string b1 = UniqueKey("privacy-batch"), b2 = UniqueKey("privacy-batch");
  raw.push_back(b1);
  raw.push_back(b2);
  EXPECT_EQ(c.Post("/observe/batch", "{\"keys\":[" + JsonString(b1) + ",{\"key\":" + JsonString(b2) + "}]}").status, 200);
  // Rejected requests that carry keys.
  const std::string bad_source = UniqueKey("privacy-badsource");
  raw.push_back(bad_source);
  EXPECT_EQ(c.Post("/observe", "{\"key\":" + JsonString(bad_source) + ",\"source\":5}").status, 400);
  std::string long_key = UniqueKey("privacy-long");
  raw.push_back(long_key);
  long_key += std::string(kMaxKeyBytes + 1 - long_key.size(), 'z');
  EXPECT_EQ(c.Post("/observe", ObserveBody(long_key)).status, 400);
  const std::string bad_json = UniqueKey("privacy-badjson");
  raw.push_back(bad_json);
  HttpResponse r = c.Post("/observe", "{\"key\":\"" + bad_json + "\"");
  EXPECT_EQ(r.status, 400);
  if (!r.keep_alive) c.Reconnect();
  const std::string bad_ct = UniqueKey("privacy-badct");
  raw.push_back(bad_ct);
  r = c.Post("/observe", ObserveBody(bad_ct), "text/plain");
  EXPECT_EQ(r.status, 415);
  if (!r.keep_alive) c.Reconnect();
  const std::string batch_bad = UniqueKey("privacy-batchbad");
  raw.push_back(batch_bad);
  EXPECT_EQ(c.Post("/observe/batch", "{\"keys\":[" + JsonString(batch_bad) + ",5]}").status, 400);

  const std::string metrics = c.Get("/metrics").body;
  const std::string stats = c.Get("/stats").body;
  ASSERT_EQ(server.Stop(), 0);
  const std::string log = server.Log();
  EXPECT_FALSE(log.empty());
  // The run id alone (64 random hex chars, part of every raw key) must not appear either.
  const std::string run_id = raw.front().substr(3, 64);
  for (const auto& k : raw) {
    EXPECT_EQ(log.find(k), std::string::npos) << "raw key in the log: " << k;
    EXPECT_EQ(metrics.find(k), std::string::npos) << "raw key in /metrics: " << k;
    EXPECT_EQ(stats.find(k), std::string::npos) << "raw key in /stats: " << k;
  }
  EXPECT_EQ(log.find(run_id), std::string::npos) << "part of a raw key in the log";
  EXPECT_EQ(metrics.find(run_id), std::string::npos);

  // Every log line is a JSON object with ts, level, event (harness lines start with '#').
  std::istringstream in(log);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    ++lines;
    boost::system::error_code ec;
    json::value v = json::parse(line, ec);
    ASSERT_TRUE(!ec && v.is_object()) << "log line is not a JSON object: " << line;
    for (const char* f : {"ts", "level", "event"}) EXPECT_TRUE(v.as_object().contains(f)) << f << " missing: " << line;
  }
  EXPECT_GT(lines, 0);
  // The access log is really on (else the check above proves little): it names the paths.
  int observe_lines = 0;
  std::istringstream again(log);
  while (std::getline(again, line)) observe_lines += line.find("/observe") != std::string::npos ? 1 : 0;
  EXPECT_GE(observe_lines, 10) << "--access-log=on wrote no per-request lines";
  EXPECT_FALSE(server.LogEvents("listening").empty());
  EXPECT_FALSE(server.LogEvents("config").empty());
  EXPECT_FALSE(server.LogEvents("shutdown").empty());
}

std::string HmacSha256Hex(std::string_view secret, std::string_view key) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(key.data()), key.size(), md, &len);
  std::string out;
  char buf[3];
  for (unsigned i = 0; i < len; ++i) {
    std::snprintf(buf, sizeof buf, "%02x", md[i]);
    out += buf;
  }
  return out;
}

// --digest-secret-file: digests are HMAC-SHA256(secret, key) (trailing newline of the file stripped),
// the secret never appears in the log, and duplicates are still detected.
TEST(ServicePrivacy, DigestSecretGivesHmac) {
  const std::string secret = "it-secret-" + RandomHex(16);
  char path[] = "/tmp/scangate-it-secret.XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string content = secret + "\n";
  ASSERT_EQ(::write(fd, content.data(), content.size()), static_cast<ssize_t>(content.size()));
  ::close(fd);
  ScangateProcess server({std::string("--digest-secret-file=") + path, "--capacity=100000"});
  ASSERT_TRUE(server.Start());
  HttpClient c(server.port());
  Pg pg;
  const std::string key = UniqueKey("hmac");
  const std::string want = HmacSha256Hex(secret, key);
  HttpResponse r = c.Post("/observe", ObserveBody(key));
  ASSERT_EQ(r.status, 201) << r;
  EXPECT_EQ(r.json().at("digest"), want.c_str()) << "digest is not HMAC-SHA256(secret without newline, key)";
  EXPECT_NE(want, Sha256Hex(key));
  EXPECT_EQ(pg.CountDigest(want), 1);
  EXPECT_EQ(pg.CountDigest(Sha256Hex(key)), 0);
  HttpResponse d = c.Post("/observe", ObserveBody(key));
  EXPECT_EQ(d.status, 200) << d;
  EXPECT_EQ(server.Stop(), 0);
  EXPECT_EQ(server.Log().find(secret), std::string::npos) << "the digest secret appears in the log";
  std::remove(path);
}

// A password in --database-url never reaches the log (the fixture trusts local connections, so the
// password is accepted and ignored by PostgreSQL).
TEST(ServicePrivacy, DatabasePasswordNotLogged) {
  const std::string password = "itpw" + RandomHex(12);
  std::string url = Env().pg_url;
  const auto at = url.find("postgres@");
  ASSERT_NE(at, std::string::npos) << url;
  url.replace(at, std::string("postgres@").size(), "postgres:" + password + "@");
  ScangateProcess server({"--database-url=" + url, "--capacity=100000", "--access-log=on"});
  ASSERT_TRUE(server.Start());
  HttpClient c(server.port());
  EXPECT_EQ(c.Post("/observe", ObserveBody(UniqueKey("pw"))).status, 201);
  const std::string stats = c.Get("/stats").body;
  const std::string metrics = c.Get("/metrics").body;
  EXPECT_EQ(server.Stop(), 0);
  // The server's lines only: the harness's own "# harness: exec ..." line shows the command line.
  std::string server_lines;
  std::istringstream in(server.Log());
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# harness", 0) != 0) server_lines += line + "\n";
  }
  EXPECT_FALSE(server_lines.empty());
  EXPECT_EQ(server_lines.find(password), std::string::npos) << "database password in the log";
  EXPECT_EQ(stats.find(password), std::string::npos) << "database password in /stats";
  EXPECT_EQ(metrics.find(password), std::string::npos) << "database password in /metrics";
  EXPECT_FALSE(server.LogEvents("config").empty());
}

}  // namespace
}  // namespace scangate::it
