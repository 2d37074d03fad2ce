// Browser clients over real TCP against a real scangate + PostgreSQL: --cors-origins preflights, the
// Origin policy (a foreign Origin gets 403 before its body is read and nothing is recorded), and clients
// that send no Origin (terminals, curl) served as before. The headless-Chromium view of the same policy is
// tests/server/cors_browser_test.py.
#include <string>

#include <gtest/gtest.h>

#include "harness.h"

namespace scangate::it {
namespace {

constexpr const char* kAllowed = "http://127.0.0.1:3000";
constexpr const char* kForm = "application/x-www-form-urlencoded";

class ServiceCors : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Appended, not `std::string("…") + kAllowed + "…"`: GCC 12 at -O1 reports a false -Warray-bounds inside
    // libstdc++ for `std::string&& + const char*` (the -Wrestrict family of GCC PR105329).
    std::string origins = "--cors-origins=";
    origins += kAllowed;
    origins += ", https://pos.example";
    server_ = new ScangateProcess({"--capacity=100000", origins});
    ASSERT_TRUE(server_->Start());
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static ScangateProcess* server_;
};
ScangateProcess* ServiceCors::server_ = nullptr;

TEST_F(ServiceCors, PreflightFromAllowedOrigin) {
  HttpClient c(server_->port());
  for (const char* target : {"/observe", "/observe/batch", "/lookup"}) {
    HttpResponse r = c.Request("OPTIONS", target, "", std::nullopt,
                               {{"Origin", kAllowed},
                                {"Access-Control-Request-Method", "POST"},
                                {"Access-Control-Request-Headers", "content-type,authorization"}});
    EXPECT_EQ(r.status, 204) << target << ": " << r;
    EXPECT_EQ(r.header("access-control-allow-origin"), kAllowed) << target;
    EXPECT_EQ(r.header("access-control-allow-methods"), "POST, OPTIONS");
    EXPECT_EQ(r.header("access-control-allow-headers"), "Content-Type, Authorization, Idempotency-Key");
    EXPECT_FALSE(r.header("access-control-max-age").empty());
    EXPECT_EQ(r.header("vary"), "Origin");
    EXPECT_TRUE(r.keep_alive) << "a bodiless preflight keeps the connection";
  }
}

TEST_F(ServiceCors, AllowedOriginObservesAndReadsCors) {
  HttpClient c(server_->port());
  const std::string key = UniqueKey("cors-allowed");
  HttpResponse r = c.Request("POST", "/observe", ObserveBody(key), "application/json", {{"Origin", kAllowed}});
  EXPECT_EQ(r.status, 201) << r;
  EXPECT_EQ(r.header("access-control-allow-origin"), kAllowed);
  EXPECT_EQ(r.header("vary"), "Origin");
  Pg pg;
  EXPECT_EQ(pg.CountDigest(Sha256Hex(key)), 1);
}

// The hole this closes: a page on any origin can POST a "simple" request (form or text type, no preflight,
// mode: "no-cors"). It must be refused before the body is read, and must record nothing.
TEST_F(ServiceCors, ForeignOriginRefusedAndNothingRecorded) {
  const std::string key = UniqueKey("cors-foreign");
  for (const char* ct : {kForm, "application/json", "text/plain;charset=UTF-8"}) {
    HttpClient c(server_->port());
    HttpResponse r = c.Request("POST", "/observe", ObserveBody(key), std::string(ct), {{"Origin", "http://evil.example"}});
    EXPECT_TRUE(IsProblem(r, 403, "origin-not-allowed")) << ct << ": " << r;
    EXPECT_FALSE(r.has_header("access-control-allow-origin"));
    EXPECT_FALSE(r.keep_alive) << "a refused request with a body closes the connection";
  }
  {  // form-encoded too, and the batch and lookup routes
    HttpClient c(server_->port());
    HttpResponse r = c.Request("POST", "/observe", "key=" + key, std::string(kForm), {{"Origin", "null"}});
    EXPECT_TRUE(IsProblem(r, 403, "origin-not-allowed")) << r;
    HttpClient c2(server_->port());
    r = c2.Request("POST", "/observe/batch", R"({"keys":[)" + JsonString(key) + "]}", "application/json",
                   {{"Origin", "http://127.0.0.1:3001"}});
    EXPECT_TRUE(IsProblem(r, 403, "origin-not-allowed")) << r;
  }
  Pg pg;
  EXPECT_EQ(pg.CountDigest(Sha256Hex(key)), 0) << "a refused request recorded the key";
  // A later observation (no Origin) still says new.
  HttpClient c(server_->port());
  HttpResponse r = c.Post("/observe", ObserveBody(key));
  EXPECT_EQ(r.status, 201) << r;
}

// The 403 comes before the body: with Expect: 100-continue the server never asks for it.
TEST_F(ServiceCors, ForeignOriginRefusedBeforeBody) {
  const std::string req =
      "POST /observe HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://evil.example\r\nContent-Type: "
      "application/json\r\nContent-Length: 20\r\nExpect: 100-continue\r\n\r\n";
  const std::string out = RawExchange(server_->port(), req);
  EXPECT_EQ(out.rfind("HTTP/1.1 403", 0), 0u) << out;
  EXPECT_EQ(out.find("100 Continue"), std::string::npos) << out;
}

TEST_F(ServiceCors, NoOriginAndOwnOriginServedAsToday) {
  HttpClient c(server_->port());
  const std::string key = UniqueKey("cors-none");
  HttpResponse r = c.Post("/observe", ObserveBody(key));
  EXPECT_EQ(r.status, 201) << r;
  EXPECT_FALSE(r.has_header("access-control-allow-origin"));
  // curl -d '{...}' (form type, JSON body) keeps working.
  r = c.Post("/observe", ObserveBody(key), std::string(kForm));
  EXPECT_EQ(r.status, 200) << r;
  // A page served by scangate's own origin (same scheme://host:port as Host) is not a cross-origin caller.
  r = c.Request("POST", "/observe", ObserveBody(key), "application/json",
                {{"Origin", "http://127.0.0.1:" + std::to_string(server_->port())}});
  EXPECT_EQ(r.status, 200) << r;
  // A preflight without a listed Origin is no preflight: 405 as before.
  r = c.Request("OPTIONS", "/observe", "", std::nullopt);
  EXPECT_EQ(r.status, 405) << r;
}

TEST_F(ServiceCors, FormBodyObserves) {
  HttpClient c(server_->port());
  const std::string key = UniqueKey("cors-form") + " with space&amp";
  std::string enc;
  for (char ch : key) {
    if (ch == ' ') enc += '+';
    else if (ch == '&') enc += "%26";
    else enc += ch;
  }
  HttpResponse r = c.Post("/observe", "key=" + enc + "&source=lane+9", std::string(kForm));
  EXPECT_EQ(r.status, 201) << r;
  EXPECT_EQ(r.json().at("digest"), Sha256Hex(key).c_str());
  Pg pg;
  EXPECT_EQ(pg.SourceOf(Sha256Hex(key)), std::optional<std::string>("lane 9"));
}

}  // namespace
}  // namespace scangate::it
