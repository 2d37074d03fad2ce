// Unit tests of server/http/router.h with no sockets and no PostgreSQL: requests are built in memory, answered on
// an io_context run by the test, against an in-memory ExactStore (the verdict logic of server/verdict/service.h runs
// for real) and an in-memory DigestReader (POST /lookup).
#include "server/http/router.h"

#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>

#include <boost/asio/io_context.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <gtest/gtest.h>

#include "core/filter.h"
#include "storage/store.h"
#include "tests/server/fake_store.h"

namespace scangate::server {
namespace {

namespace http = boost::beast::http;
namespace json = boost::json;

using test_support::FakeStore;

// Lookups answered from a FakeStore's rows (inline), or refused / unavailable on demand.
class FakeReader final : public storage::DigestReader {
 public:
  explicit FakeReader(FakeStore& s) : store_(s) {}
  bool Find(const Digest& d, storage::LookupDone done) override {
    ++finds;
    if (refuse || (refuse_after >= 0 && finds > refuse_after)) return false;
    storage::RecordLookup r;
    if (unavailable) {
      r.status = storage::RecordLookup::Status::kUnavailable;
    } else if (auto it = store_.rows.find(ToHex(d)); it != store_.rows.end()) {
      r.status = storage::RecordLookup::Status::kFound;
      r.first_seen = FakeStore::kFirstSeen;
      if (!it->second.empty()) r.source = it->second;
    } else {
      r.status = storage::RecordLookup::Status::kNotFound;
    }
    done(r);
    return true;
  }
  int finds = 0;
  bool refuse = false;
  int refuse_after = -1;  // >= 0: every Find after that many is refused
  bool unavailable = false;

 private:
  FakeStore& store_;
};

FilterOptions SmallFilter() {
  FilterOptions o;
  o.capacity = 10'000;
  o.shards = 1;
  return o;
}

class RouterTest : public ::testing::Test {
 protected:
  explicit RouterTest(Config c = Config{}) : config_(std::move(c)) {}

  void SetUp() override {
    config_.cors_origins = cors_;
    filter_ = std::make_unique<ShardedFilter>(SmallFilter());
    service_ = std::make_unique<Service>(config_, Digester::Sha256(), *filter_, store_, metrics_);
    service_->MarkWarm();
    router_ = std::make_unique<Router>(config_, *service_, &reader_);
  }

  static Router::Request Make(http::verb method, std::string target, std::string body = "",
                              std::string content_type = "application/json",
                              std::vector<std::pair<http::field, std::string>> headers = {}) {
    Router::Request req(method, target, 11);
    req.set(http::field::host, "scangate.test:8080");
    if (!content_type.empty()) req.set(http::field::content_type, content_type);
    for (auto& [f, v] : headers) req.set(f, v);
    req.body() = std::move(body);
    req.prepare_payload();
    return req;
  }

  // Admit, then (when admitted) Handle on the test's io_context; the one answer.
  Router::Answer Exchange(const Router::Request& req, Listener listener = Listener::kMain) {
    Router::Admission ad = router_->Admit(req.base(), listener, false);
    if (ad.answer) return std::move(*ad.answer);
    std::optional<Router::Answer> out;
    int calls = 0;
    router_->Handle(
        ad.route, req, ioc_.get_executor(), metrics_.ForThread(0),
        [&](Router::Answer a) {
          ++calls;
          out = std::move(a);
        },
        ad.terminal.get());
    ioc_.restart();
    ioc_.run();
    EXPECT_EQ(calls, 1) << "exactly one answer per request";
    if (!out) return Router::Answer{};
    return std::move(*out);
  }

  static std::string Slug(const Router::Answer& a) {
    const json::object o = json::parse(a.res.body()).as_object();
    return std::string(o.at("type").as_string());
  }

  Config config_;
  std::vector<std::string> cors_;
  boost::asio::io_context ioc_;
  Metrics metrics_{1};
  FakeStore store_;
  FakeReader reader_{store_};
  std::unique_ptr<ShardedFilter> filter_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<Router> router_;
};

constexpr const char* kAllowed = "http://127.0.0.1:3000";

class CorsRouterTest : public RouterTest {
 protected:
  CorsRouterTest() { cors_ = {kAllowed}; }
};

TEST_F(RouterTest, ObserveNewThenDuplicate) {
  auto a = Exchange(Make(http::verb::post, "/observe", R"({"key":"k1"})"));
  EXPECT_EQ(a.res.result_int(), 201u) << a.res.body();
  EXPECT_EQ(json::parse(a.res.body()).at("verdict"), "new");
  a = Exchange(Make(http::verb::post, "/observe", R"({"key":"k1"})"));
  EXPECT_EQ(a.res.result_int(), 200u) << a.res.body();
  EXPECT_EQ(json::parse(a.res.body()).at("verdict"), "duplicate");
  EXPECT_EQ(store_.rows.size(), 1u);
}

// ack=commit tells the Store which keys the filter called new (Expect::kNew: COPY-eligible) and which it
// did not (a possible hit, or a filter not warm yet); the verdict is the Store's either way.
TEST_F(RouterTest, StoreIsToldWhichKeysTheFilterCalledNew) {
  const Digester digest = Digester::Sha256();
  auto a = Exchange(Make(http::verb::post, "/observe", R"({"key":"fresh"})"));
  EXPECT_EQ(a.res.result_int(), 201u) << a.res.body();
  EXPECT_EQ(store_.expects.at(ToHex(digest("fresh"))), storage::Expect::kNew);

  filter_->ObserveConcurrently(digest("seen-bits"));  // its bits set: a possible hit the Store never saw
  a = Exchange(Make(http::verb::post, "/observe", R"({"key":"seen-bits"})"));
  EXPECT_EQ(a.res.result_int(), 201u) << a.res.body();  // PostgreSQL (the fake) decides: new
  EXPECT_EQ(store_.expects.at(ToHex(digest("seen-bits"))), storage::Expect::kUnknown);

  filter_->ObserveConcurrently(digest("b-seen-bits"));
  a = Exchange(Make(http::verb::post, "/observe/batch", R"({"keys":["b-fresh","b-seen-bits"]})"));
  ASSERT_EQ(a.res.result_int(), 200u) << a.res.body();
  EXPECT_EQ(store_.expects.at(ToHex(digest("b-fresh"))), storage::Expect::kNew);
  EXPECT_EQ(store_.expects.at(ToHex(digest("b-seen-bits"))), storage::Expect::kUnknown);

  // A filter that is not warm yet vouches for nothing.
  Service cold(config_, Digester::Sha256(), *filter_, store_, metrics_);
  Router cold_router(config_, cold, &reader_);
  Router::Request req = Make(http::verb::post, "/observe", R"({"key":"cold"})");
  Router::Admission ad = cold_router.Admit(req.base(), Listener::kMain, false);
  ASSERT_FALSE(ad.answer);
  cold_router.Handle(ad.route, req, ioc_.get_executor(), metrics_.ForThread(0), [](Router::Answer) {});
  ioc_.restart();
  ioc_.run();
  EXPECT_EQ(store_.expects.at(ToHex(digest("cold"))), storage::Expect::kUnknown);
}

TEST_F(RouterTest, BatchInOrder) {
  auto a = Exchange(Make(http::verb::post, "/observe/batch", R"({"keys":["b1","b2","b1"]})"));
  ASSERT_EQ(a.res.result_int(), 200u) << a.res.body();
  const json::value v = json::parse(a.res.body());
  const json::array& r = v.at("results").as_array();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].at("verdict"), "new");
  EXPECT_EQ(r[2].at("verdict"), "duplicate");
}

TEST_F(RouterTest, StoreRefusalIs503WithRetryAfter) {
  store_.down = true;
  auto a = Exchange(Make(http::verb::post, "/observe", R"({"key":"k-down"})"));
  EXPECT_EQ(a.res.result_int(), 503u);
  EXPECT_EQ(a.res[http::field::retry_after], "1");
  EXPECT_EQ(Slug(a), "urn:scangate:problem:unavailable");
}

// Exceptions stop at the router: one 500 problem, the connection closed, the reason only in the log.
TEST_F(RouterTest, ExceptionBecomesOne500) {
  store_.throws = true;
  auto a = Exchange(Make(http::verb::post, "/observe", R"({"key":"boom"})"));
  EXPECT_EQ(a.res.result_int(), 500u);
  EXPECT_TRUE(a.close);
  EXPECT_EQ(a.res.body().find("fake store failure"), std::string::npos);
}

TEST_F(RouterTest, FormBodyIsParsedAsForm) {
  auto a = Exchange(Make(http::verb::post, "/observe", "key=a+b%21%C3%A9&source=till+7",
                         "application/x-www-form-urlencoded"));
  ASSERT_EQ(a.res.result_int(), 201u) << a.res.body();
  const std::string hex = ToHex(Digester::Sha256()("a b!\xC3\xA9"));
  ASSERT_EQ(store_.rows.count(hex), 1u);
  EXPECT_EQ(store_.rows[hex], "till 7");
}

TEST_F(RouterTest, JsonUnderFormTypeStillJson) {  // curl -d '{"key":...}' sends the form type
  auto a = Exchange(Make(http::verb::post, "/observe", R"(  {"key":"curl-key"})", "application/x-www-form-urlencoded"));
  ASSERT_EQ(a.res.result_int(), 201u) << a.res.body();
  EXPECT_EQ(store_.rows.count(ToHex(Digester::Sha256()("curl-key"))), 1u);
}

TEST_F(RouterTest, TextPlainIs415AndRecordsNothing) {
  auto a = Exchange(Make(http::verb::post, "/observe", R"({"key":"tp"})", "text/plain;charset=UTF-8"));
  EXPECT_EQ(a.res.result_int(), 415u);
  EXPECT_EQ(store_.submits, 0);
}

TEST_F(RouterTest, MethodAndRouteErrors) {
  auto a = Exchange(Make(http::verb::get, "/observe"));
  EXPECT_EQ(a.res.result_int(), 405u);
  EXPECT_EQ(a.res[http::field::allow], "POST");
  a = Exchange(Make(http::verb::get, "/lookup"));
  EXPECT_EQ(a.res.result_int(), 405u);
  a = Exchange(Make(http::verb::get, "/nope?key=secret"));
  EXPECT_EQ(a.res.result_int(), 404u);
  EXPECT_EQ(a.res.body().find("secret"), std::string::npos);
  a = Exchange(Make(http::verb::get, "/healthz", "", ""));
  EXPECT_EQ(a.res.result_int(), 200u);
}

TEST_F(RouterTest, ContentLengthAboveLimitRefusedAtAdmission) {
  Router::Request req = Make(http::verb::post, "/observe", std::string(kMaxObserveBodyBytes + 1, 'x'));
  const auto ad = router_->Admit(req.base(), Listener::kMain, false);
  ASSERT_TRUE(ad.answer);
  EXPECT_EQ(ad.answer->res.result_int(), 413u);
  EXPECT_TRUE(ad.answer->close);
}

// Issue 33 (request smuggling): a Transfer-Encoding other than exactly "chunked" — another coding, a list, a
// second field, or any in HTTP/1.0 — is 400 bad-request at admission and closes the connection: Beast would
// read such a request as body-less and leave its bytes to be parsed as the next request.
TEST_F(RouterTest, TransferEncodingOtherThanChunkedRefusedAndCloses) {
  auto with_te = [](std::vector<std::string> codings, unsigned version = 11) {
    Router::Request req(http::verb::post, "/observe", version);
    req.set(http::field::host, "scangate.test:8080");
    req.set(http::field::content_type, "application/json");
    for (const auto& c : codings) req.insert(http::field::transfer_encoding, c);
    return req;
  };
  for (const auto& codings : std::vector<std::vector<std::string>>{
           {"gzip"}, {"chunked, gzip"}, {"gzip, chunked"}, {"identity"}, {"chunked", "chunked"}, {"gzip", "chunked"}}) {
    const Router::Request req = with_te(codings);
    const auto ad = router_->Admit(req.base(), Listener::kMain, false);
    ASSERT_TRUE(ad.answer) << codings.front();
    EXPECT_EQ(ad.answer->res.result_int(), 400u) << codings.front();
    EXPECT_EQ(Slug(*ad.answer), "urn:scangate:problem:bad-request");
    EXPECT_TRUE(ad.answer->close) << codings.front();
  }
  const Router::Request old = with_te({"chunked"}, 10);
  const auto ad10 = router_->Admit(old.base(), Listener::kMain, false);
  ASSERT_TRUE(ad10.answer);
  EXPECT_EQ(ad10.answer->res.result_int(), 400u);
  EXPECT_TRUE(ad10.answer->close);
  for (const char* ok : {"chunked", "Chunked", " chunked "}) {
    const Router::Request req = with_te({ok});
    EXPECT_FALSE(router_->Admit(req.base(), Listener::kMain, false).answer) << ok;
  }
  EXPECT_EQ(store_.submits, 0);
}

TEST_F(RouterTest, LookupFoundNotFoundAndNeverRecords) {
  Exchange(Make(http::verb::post, "/observe", R"({"key":"seen-key","source":"lane 3"})"));
  const int submits = store_.submits;
  auto a = Exchange(Make(http::verb::post, "/lookup", R"({"key":"seen-key"})"));
  ASSERT_EQ(a.res.result_int(), 200u) << a.res.body();
  const json::object o = json::parse(a.res.body()).as_object();
  EXPECT_EQ(o.at("digest"), ToHex(Digester::Sha256()("seen-key")).c_str());
  EXPECT_EQ(o.at("source"), "lane 3");
  EXPECT_EQ(o.at("first_seen"), "2026-11-30T10:00:00.000000Z");
  a = Exchange(Make(http::verb::post, "/lookup", "key=never-seen", "application/x-www-form-urlencoded"));
  EXPECT_EQ(a.res.result_int(), 404u);
  EXPECT_EQ(Slug(a), "urn:scangate:problem:not-recorded");
  EXPECT_EQ(store_.submits, submits) << "a lookup must never record";
  EXPECT_EQ(store_.rows.count(ToHex(Digester::Sha256()("never-seen"))), 0u);
}

TEST_F(RouterTest, LookupUnavailableIs503) {
  reader_.refuse = true;
  auto a = Exchange(Make(http::verb::post, "/lookup", R"({"key":"x"})"));
  EXPECT_EQ(a.res.result_int(), 503u);
  EXPECT_EQ(a.res[http::field::retry_after], "1");
  reader_.refuse = false;
  reader_.unavailable = true;
  a = Exchange(Make(http::verb::post, "/lookup", R"({"key":"x"})"));
  EXPECT_EQ(a.res.result_int(), 503u);
  EXPECT_EQ(Slug(a), "urn:scangate:problem:unavailable");
}

// A rotation (--digest-secret-previous-file): a key not found under the current digest is looked up under the
// previous one; when the reader refuses that second lookup the answer is 503, never 404 not-recorded (the key may
// be recorded under the previous secret).
TEST_F(RouterTest, LookupUnderThePreviousSecretRefusedIs503NotNotRecorded) {
  const Digester previous = Digester::HmacSha256("the previous secret");
  service_->AttachPrevious(previous, config_, &reader_);
  // Recorded under the previous digest only: found by the second lookup.
  store_.rows[ToHex(previous("recorded-before-the-rotation"))] = "";
  auto a = Exchange(Make(http::verb::post, "/lookup", R"({"key":"recorded-before-the-rotation"})"));
  EXPECT_EQ(a.res.result_int(), 200u) << a.res.body();
  EXPECT_EQ(reader_.finds, 2);
  // The same key while the reader refuses the second lookup: 503, not 404.
  reader_.refuse_after = reader_.finds + 1;  // the next Find (current digest) answers, the one after is refused
  a = Exchange(Make(http::verb::post, "/lookup", R"({"key":"recorded-before-the-rotation"})"));
  EXPECT_EQ(a.res.result_int(), 503u) << a.res.body();
  EXPECT_EQ(Slug(a), "urn:scangate:problem:unavailable");
  EXPECT_EQ(reader_.finds, 4);
  // Under neither digest, both lookups answered: 404 not-recorded.
  reader_.refuse_after = -1;
  a = Exchange(Make(http::verb::post, "/lookup", R"({"key":"never-seen"})"));
  EXPECT_EQ(a.res.result_int(), 404u) << a.res.body();
  EXPECT_EQ(Slug(a), "urn:scangate:problem:not-recorded");
}

TEST_F(RouterTest, ForeignOriginRefusedBeforeBody) {
  Router::Request req = Make(http::verb::post, "/observe", R"({"key":"evil"})", "application/x-www-form-urlencoded",
                             {{http::field::origin, "http://evil.example"}});
  const auto ad = router_->Admit(req.base(), Listener::kMain, false);
  ASSERT_TRUE(ad.answer) << "a foreign Origin must be refused at admission (before the body)";
  EXPECT_EQ(ad.answer->res.result_int(), 403u);
  EXPECT_TRUE(ad.answer->close);
  EXPECT_EQ(Slug(*ad.answer), "urn:scangate:problem:origin-not-allowed");
  EXPECT_EQ(ad.answer->res.find(http::field::access_control_allow_origin), ad.answer->res.end());
  // "null" (sandboxed frames, file:) and any route are refused too.
  req = Make(http::verb::get, "/healthz", "", "", {{http::field::origin, "null"}});
  EXPECT_EQ(Exchange(req).res.result_int(), 403u);
  EXPECT_EQ(store_.submits, 0);
}

// scangate's own origin (same scheme://host:port as Host) is not a cross-origin caller when Host names an
// address or localhost (nothing to rebind); a DNS name only with --allowed-hosts (AllowedHostsRouterTest).
TEST_F(RouterTest, OwnOriginAndNoOriginServed) {
  auto own = [](std::string host, std::string origin) {
    Router::Request req = Make(http::verb::post, "/observe", R"({"key":"own-)" + host + R"("})", "application/json",
                               {{http::field::origin, origin}});
    req.set(http::field::host, host);
    return req;
  };
  for (const auto& [host, origin] : std::vector<std::pair<std::string, std::string>>{
           {"127.0.0.1:8080", "http://127.0.0.1:8080"}, {"[::1]:8080", "http://[::1]:8080"},
           {"LOCALHOST:8080", "http://localhost:8080"}, {"10.0.0.5", "http://10.0.0.5"}}) {
    const auto r = Exchange(own(host, origin));
    EXPECT_EQ(r.res.result_int(), 201u) << host << ": " << r.res.body();
  }
  // DNS rebinding: evil.example resolves to this server; its page's origin equals Host, but Host is a name.
  auto a = Exchange(own("evil.example:8080", "http://evil.example:8080"));
  EXPECT_EQ(a.res.result_int(), 403u) << a.res.body();
  a = Exchange(Make(http::verb::post, "/observe", R"({"key":"own"})", "application/json",
                    {{http::field::origin, "http://SCANGATE.test:8080"}}));
  EXPECT_EQ(a.res.result_int(), 403u) << "a DNS name as own origin without --allowed-hosts";
  a = Exchange(own("127.0.0.1:8080", "http://127.0.0.1:8080"));
  EXPECT_EQ(a.res.result_int(), 200u) << a.res.body();
  EXPECT_EQ(a.res.find(http::field::access_control_allow_origin), a.res.end());
  a = Exchange(Make(http::verb::post, "/observe", R"({"key":"no-origin"})"));
  EXPECT_EQ(a.res.result_int(), 201u);
  // Same host, other port or scheme: another origin.
  a = Exchange(own("127.0.0.1:8080", "https://127.0.0.1:8080"));
  EXPECT_EQ(a.res.result_int(), 403u);
  a = Exchange(own("127.0.0.1:8080", "http://127.0.0.1:9090"));
  EXPECT_EQ(a.res.result_int(), 403u);
}

class AllowedHostsRouterTest : public RouterTest {
 protected:
  AllowedHostsRouterTest() { config_.allowed_hosts = {"scangate.test:8080", "pos-gw.shop.lan"}; }
};

// Issue 33 (DNS rebinding): with --allowed-hosts a request naming another Host is 421 host-not-allowed on every
// route, before its body, never decided; a listed Host ("host:port" exactly, or "host" with any port) is served
// and its own origin trusted; no Host at all (an HTTP/1.0 probe) passes.
TEST_F(AllowedHostsRouterTest, OtherHostIs421AndListedHostsServe) {
  auto with_host = [](http::verb m, std::string target, std::string host, std::string body = "") {
    Router::Request req = Make(m, std::move(target), std::move(body), m == http::verb::get ? "" : "application/json");
    req.set(http::field::host, host);
    return req;
  };
  for (const char* host : {"evil.example:8080", "scangate.test:9999", "127.0.0.1:8080", "pos-gw.shop.lan.evil"}) {
    auto a = Exchange(with_host(http::verb::post, "/observe", host, R"({"key":"rebound"})"));
    EXPECT_EQ(a.res.result_int(), 421u) << host;
    EXPECT_EQ(Slug(a), "urn:scangate:problem:host-not-allowed");
    EXPECT_EQ(a.res.body().find("evil"), std::string::npos) << "the Host is echoed";
    EXPECT_EQ(Exchange(with_host(http::verb::get, "/stats", host)).res.result_int(), 421u) << host;
  }
  EXPECT_EQ(store_.submits, 0);
  EXPECT_EQ(Exchange(with_host(http::verb::post, "/observe", "SCANGATE.test:8080", R"({"key":"a"})")).res.result_int(), 201u);
  EXPECT_EQ(Exchange(with_host(http::verb::post, "/observe", "pos-gw.shop.lan:8080", R"({"key":"b"})")).res.result_int(), 201u);
  Router::Request own = with_host(http::verb::post, "/observe", "pos-gw.shop.lan:8080", R"({"key":"c"})");
  own.set(http::field::origin, "http://pos-gw.shop.lan:8080");
  EXPECT_EQ(Exchange(own).res.result_int(), 201u) << "own origin of a listed host";
  Router::Request probe(http::verb::get, "/readyz", 10);
  EXPECT_NE(Exchange(probe).res.result_int(), 421u);
}

TEST(RouterHost, HostPartAndListing) {
  EXPECT_EQ(HostPart("a.test:8080"), "a.test");
  EXPECT_EQ(HostPart("[fd00::5]:8080"), "[fd00::5]");
  EXPECT_EQ(HostPart("a.test"), "a.test");
  EXPECT_TRUE(IsAddressOrLocalhost("[fd00::5]:80"));
  EXPECT_TRUE(IsAddressOrLocalhost("10.1.2.3"));
  EXPECT_FALSE(IsAddressOrLocalhost("10.1.2.3.nip.io"));
  EXPECT_FALSE(IsAddressOrLocalhost(""));
  EXPECT_TRUE(HostListed("anything", {}));
  EXPECT_TRUE(HostListed("[FD00::5]:8080", {"[fd00::5]"}));
  EXPECT_FALSE(HostListed("a.test:81", {"a.test:80"}));
}

TEST(RouterOrigin, Normalization) {
  EXPECT_EQ(OwnOrigin("Example.com:80", false), "http://example.com");
  EXPECT_EQ(OwnOrigin("example.com:443", true), "https://example.com");
  EXPECT_EQ(OwnOrigin("example.com:8443", true), "https://example.com:8443");
  EXPECT_EQ(NormalizeOrigin("HTTP://Example.com:80"), "http://example.com");
  EXPECT_EQ(NormalizeOrigin("http://example.com:8080"), "http://example.com:8080");
}

TEST_F(CorsRouterTest, PreflightFromAllowedOrigin) {
  Router::Request req = Make(http::verb::options, "/observe", "", "",
                             {{http::field::origin, kAllowed}, {http::field::access_control_request_method, "POST"},
                              {http::field::access_control_request_headers, "content-type"}});
  auto a = Exchange(req);
  EXPECT_EQ(a.res.result_int(), 204u);
  EXPECT_EQ(a.res[http::field::access_control_allow_origin], kAllowed);
  EXPECT_EQ(a.res[http::field::access_control_allow_methods], "POST, OPTIONS");
  EXPECT_EQ(a.res[http::field::access_control_allow_headers], "Content-Type, Authorization, Idempotency-Key");
  EXPECT_EQ(a.res[http::field::access_control_max_age], std::to_string(kCorsMaxAgeSeconds));
  EXPECT_EQ(a.res[http::field::vary], "Origin");
  for (const char* target : {"/observe/batch", "/lookup"}) {
    req.target(target);
    EXPECT_EQ(Exchange(req).res.result_int(), 204u) << target;
  }
  // A preflight from a foreign origin: 403, no CORS headers.
  req.set(http::field::origin, "http://127.0.0.1:3001");
  a = Exchange(req);
  EXPECT_EQ(a.res.result_int(), 403u);
  EXPECT_EQ(a.res.find(http::field::access_control_allow_origin), a.res.end());
}

TEST_F(CorsRouterTest, AnswersToAllowedOriginCarryCors) {
  auto a = Exchange(Make(http::verb::post, "/observe", R"({"key":"cors-ok"})", "application/json",
                         {{http::field::origin, kAllowed}}));
  EXPECT_EQ(a.res.result_int(), 201u) << a.res.body();
  EXPECT_EQ(a.res[http::field::access_control_allow_origin], kAllowed);
  EXPECT_EQ(a.res[http::field::vary], "Origin");
  // Problems too, so the page can read them.
  a = Exchange(Make(http::verb::post, "/lookup", R"({"key":"never"})", "application/json",
                    {{http::field::origin, kAllowed}}));
  EXPECT_EQ(a.res.result_int(), 404u);
  EXPECT_EQ(a.res[http::field::access_control_allow_origin], kAllowed);
}

class TokenRouterTest : public RouterTest {
 protected:
  TokenRouterTest() {
    // SHA-256("secret-token")
    TokenHash h{};
    const Digest d = Digester::Sha256()("secret-token");
    std::copy(d.begin(), d.end(), h.begin());
    config_.terminals = {Terminal{h, "till-1", kAllClientRoutes}};
    // SHA-256("observe-only"): may not use /lookup.
    const Digest d2 = Digester::Sha256()("observe-only");
    std::copy(d2.begin(), d2.end(), h.begin());
    config_.terminals.push_back(Terminal{h, "till-2", kRouteBitObserve});
    cors_ = {kAllowed};
  }
  static std::vector<std::pair<http::field, std::string>> Bearer(std::string token) {
    return {{http::field::authorization, "Bearer " + token}};
  }
};

// A token names its terminal: a body source naming another one is 403, its own or none is fine; a token
// whose routes exclude /lookup gets 403 there.
TEST_F(TokenRouterTest, TerminalSourceAndRoutes) {
  auto a = Exchange(Make(http::verb::post, "/observe", R"({"key":"k1","source":"till-2"})", "application/json",
                         Bearer("secret-token")));
  EXPECT_EQ(a.res.result_int(), 403u);
  EXPECT_EQ(Slug(a), "urn:scangate:problem:source-not-allowed");
  a = Exchange(Make(http::verb::post, "/observe/batch", R"({"keys":["k2",{"key":"k3","source":"other"}]})",
                    "application/json", Bearer("secret-token")));
  EXPECT_EQ(a.res.result_int(), 403u);
  EXPECT_EQ(Slug(a), "urn:scangate:problem:source-not-allowed");
  a = Exchange(Make(http::verb::post, "/observe", R"({"key":"k4","source":"till-1"})", "application/json",
                    Bearer("secret-token")));
  EXPECT_EQ(a.res.result_int(), 201u);
  a = Exchange(Make(http::verb::post, "/observe", R"({"key":"k5"})", "application/json", Bearer("observe-only")));
  EXPECT_EQ(a.res.result_int(), 201u);
  a = Exchange(Make(http::verb::post, "/lookup", R"({"key":"k5"})", "application/json", Bearer("observe-only")));
  EXPECT_EQ(a.res.result_int(), 403u);
  EXPECT_EQ(Slug(a), "urn:scangate:problem:route-not-allowed");
  a = Exchange(Make(http::verb::post, "/observe/batch", R"({"keys":["k6"]})", "application/json",
                    Bearer("observe-only")));
  EXPECT_EQ(a.res.result_int(), 403u);
}

// Issue 33 item 7 (mTLS): without tokens a verified client certificate's terminal is the caller (its routes
// apply); one whose CN names no terminal gets 403 certificate-not-allowed; with tokens, the token's terminal
// must be the certificate's.
TEST_F(RouterTest, ClientCertificateNamesTheTerminal) {
  ClientCertificate till{std::make_shared<Terminal>(Terminal{{}, "till-9", kRouteBitObserve}), ""};
  const ClientCertificate nameless{nullptr, "no CN"};
  const Router::Request observe = Make(http::verb::post, "/observe", R"({"key":"k"})", "application/json");
  const Router::Request lookup = Make(http::verb::post, "/lookup", R"({"key":"k"})", "application/json");
  auto ad = router_->Admit(observe.base(), Listener::kMain, true, {}, &till);
  EXPECT_FALSE(ad.answer);
  ASSERT_TRUE(ad.terminal);
  EXPECT_EQ(ad.terminal->id, "till-9");
  ad = router_->Admit(lookup.base(), Listener::kMain, true, {}, &till);
  ASSERT_TRUE(ad.answer);
  EXPECT_EQ(Slug(*ad.answer), "urn:scangate:problem:route-not-allowed");
  ad = router_->Admit(observe.base(), Listener::kMain, true, {}, &nameless);
  ASSERT_TRUE(ad.answer);
  EXPECT_EQ(ad.answer->res.result_int(), 403u);
  EXPECT_EQ(Slug(*ad.answer), "urn:scangate:problem:certificate-not-allowed");
  // No certificate (plain HTTP, or mTLS off): as before.
  EXPECT_FALSE(router_->Admit(observe.base(), Listener::kMain, false).terminal);
}

TEST_F(TokenRouterTest, TokenMustBeTheCertificatesTerminal) {
  const ClientCertificate till1{std::make_shared<Terminal>(Terminal{{}, "till-1", kRouteBitObserve}), ""};
  const ClientCertificate till2{std::make_shared<Terminal>(Terminal{{}, "till-2", kAllClientRoutes}), ""};
  const Router::Request req =
      Make(http::verb::post, "/lookup", R"({"key":"k"})", "application/json", Bearer("secret-token"));
  // till-1's token from till-1's certificate: the token's routes (all) apply, not the certificate's.
  auto ad = router_->Admit(req.base(), Listener::kMain, true, {}, &till1);
  EXPECT_FALSE(ad.answer);
  ASSERT_TRUE(ad.terminal);
  EXPECT_EQ(ad.terminal->id, "till-1");
  ad = router_->Admit(req.base(), Listener::kMain, true, {}, &till2);
  ASSERT_TRUE(ad.answer);
  EXPECT_EQ(Slug(*ad.answer), "urn:scangate:problem:certificate-not-allowed");
  const Router::Request none = Make(http::verb::post, "/observe", R"({"key":"k"})", "application/json");
  ad = router_->Admit(none.base(), Listener::kMain, true, {}, &till1);
  ASSERT_TRUE(ad.answer);
  EXPECT_EQ(ad.answer->res.result_int(), 401u) << "a certificate alone is not enough with tokens on";
}

// Issue 33: wrong tokens are limited per client address before any token is verified: kAuthFailureBurst of
// them get 401, the next 429 rate-limited + Retry-After and the connection closes; then even a valid token from
// that address is 429 (guessing learns nothing), while another address is served; a request without
// credentials is not counted (an unconfigured client, not a guess).
TEST_F(TokenRouterTest, FailedAuthenticationIsLimitedPerAddress) {
  const auto guesser = boost::asio::ip::make_address("192.0.2.7");
  const auto other = boost::asio::ip::make_address("192.0.2.8");
  auto admit = [&](const std::string& token, const boost::asio::ip::address& peer) {
    const Router::Request req = Make(http::verb::post, "/observe", R"({"key":"k"})", "application/json",
                                     token.empty() ? std::vector<std::pair<http::field, std::string>>{} : Bearer(token));
    return router_->Admit(req.base(), Listener::kMain, false, peer);
  };
  for (int i = 0; i < 50; ++i) {
    const auto ad = admit("", guesser);
    ASSERT_TRUE(ad.answer);
    ASSERT_EQ(ad.answer->res.result_int(), 401u) << "no credentials, attempt " << i;
  }
  for (int i = 0; i < static_cast<int>(kAuthFailureBurst); ++i) {
    const auto ad = admit("wrong-" + std::to_string(i), guesser);
    ASSERT_TRUE(ad.answer);
    ASSERT_EQ(ad.answer->res.result_int(), 401u) << "wrong token " << i;
  }
  auto ad = admit("wrong-last", guesser);
  ASSERT_TRUE(ad.answer);
  EXPECT_EQ(ad.answer->res.result_int(), 429u);
  EXPECT_EQ(Slug(*ad.answer), "urn:scangate:problem:rate-limited");
  EXPECT_EQ(ad.answer->res[http::field::retry_after], "1");
  EXPECT_TRUE(ad.answer->close);
  ad = admit("secret-token", guesser);
  ASSERT_TRUE(ad.answer) << "a valid token from a blocked address was admitted";
  EXPECT_EQ(ad.answer->res.result_int(), 429u);
  EXPECT_FALSE(admit("secret-token", other).answer) << "another address was blocked";
}

class RateLimitRouterTest : public TokenRouterTest {
 protected:
  RateLimitRouterTest() {
    config_.rate_limit = 1;
    config_.rate_burst = 2;
  }
};

// Issue 33: /lookup is scoped to the caller. A token with the lookup right sees its own records' source; another
// terminal's record answers "source": null, "source_hidden": true; a token with the audit right sees every
// source.
TEST_F(TokenRouterTest, LookupHidesAnotherTerminalsSourceWithoutAudit) {
  TokenHash h{};
  for (const auto& [token, id, routes] : std::vector<std::tuple<std::string, std::string, std::uint8_t>>{
           {"till-3-token", "till-3", kRouteBitObserve | kRouteBitLookup},
           {"office-token", "office", kRouteBitLookup | kRouteBitAudit}}) {
    const Digest d = Digester::Sha256()(token);
    std::copy(d.begin(), d.end(), h.begin());
    config_.terminals.push_back(Terminal{h, id, routes});
  }
  router_ = std::make_unique<Router>(config_, *service_, &reader_);
  ASSERT_EQ(Exchange(Make(http::verb::post, "/observe", R"({"key":"by-1"})", "application/json", Bearer("secret-token")))
                .res.result_int(), 201u);
  ASSERT_EQ(Exchange(Make(http::verb::post, "/observe", R"({"key":"by-3"})", "application/json", Bearer("till-3-token")))
                .res.result_int(), 201u);
  auto lookup = [&](const char* key, const char* token) {
    const auto a = Exchange(Make(http::verb::post, "/lookup", std::string(R"({"key":")") + key + "\"}",
                                 "application/json", Bearer(token)));
    EXPECT_EQ(a.res.result_int(), 200u) << a.res.body();
    return json::parse(a.res.body()).as_object();
  };
  json::object o = lookup("by-3", "till-3-token");
  EXPECT_EQ(o.at("source"), "till-3");
  EXPECT_FALSE(o.contains("source_hidden"));
  o = lookup("by-1", "till-3-token");
  EXPECT_TRUE(o.at("source").is_null()) << json::serialize(o);
  EXPECT_EQ(o.at("source_hidden"), true);
  EXPECT_EQ(lookup("by-1", "office-token").at("source"), "till-1");
  EXPECT_EQ(lookup("by-3", "office-token").at("source"), "till-3");
}

// The burst passes, the next request of that terminal is 429 + Retry-After; the other terminal is unaffected
// and /metrics counts the 429 under the terminal's id.
TEST_F(RateLimitRouterTest, BurstThen429PerTerminal) {
  for (int i = 0; i < 2; ++i) {
    auto a = Exchange(Make(http::verb::post, "/observe", R"({"key":"r)" + std::to_string(i) + R"("})",
                           "application/json", Bearer("secret-token")));
    EXPECT_EQ(a.res.result_int(), 201u) << i;
  }
  auto a = Exchange(Make(http::verb::post, "/observe", R"({"key":"r9"})", "application/json", Bearer("secret-token")));
  EXPECT_EQ(a.res.result_int(), 429u);
  EXPECT_EQ(Slug(a), "urn:scangate:problem:rate-limited");
  EXPECT_EQ(a.res[http::field::retry_after], "1");
  a = Exchange(Make(http::verb::post, "/observe", R"({"key":"r10"})", "application/json", Bearer("observe-only")));
  EXPECT_EQ(a.res.result_int(), 201u);
  a = Exchange(Make(http::verb::get, "/metrics", "", ""));
  EXPECT_NE(a.res.body().find("scangate_rate_limited_total{terminal=\"till-1\"} 1\n"), std::string::npos);
  EXPECT_EQ(a.res.body().find("terminal=\"till-2\""), std::string::npos);
}

// Issue 33: a batch counts its keys. Admitted with one token (the header is checked before the body is read),
// then charged its other keys: 1/s with a burst of 2, a batch of 4 keys leaves the terminal 2 requests in debt,
// so its next request waits 3 s; another terminal is unaffected.
TEST_F(RateLimitRouterTest, BatchCountsItsKeys) {
  auto a = Exchange(Make(http::verb::post, "/observe/batch",
                         R"({"keys":["b1","b2","b3","b4"]})",
                         "application/json", Bearer("secret-token")));
  ASSERT_EQ(a.res.result_int(), 200u) << a.res.body();
  a = Exchange(Make(http::verb::post, "/observe", R"({"key":"b5"})", "application/json", Bearer("secret-token")));
  EXPECT_EQ(a.res.result_int(), 429u);
  EXPECT_EQ(a.res[http::field::retry_after], "3");
  a = Exchange(Make(http::verb::post, "/observe", R"({"key":"b6"})", "application/json", Bearer("observe-only")));
  EXPECT_EQ(a.res.result_int(), 201u);
}

// Issue 33: --max-body-bytes-in-flight. Admit takes an admitted body's declared bytes before any is read and
// the Admission holds them; a body that does not fit is 503 unavailable (+ Retry-After, close) and counted; the
// bytes come back when the hold is released; batches (bodies over 16 KiB) may use only half; a request refused
// earlier (401, 413) or without a body takes nothing; /metrics reports the bytes held, the limit and refusals.
TEST_F(RouterTest, BodyBudgetAdmitsWhatFits) {
  config_.max_body_bytes_in_flight = 64 * 1024;
  router_ = std::make_unique<Router>(config_, *service_, &reader_);
  auto padded = [](std::size_t n) {  // an /observe body of exactly n bytes (JSON whitespace after the key)
    std::string b = R"({"key":"budget")";
    b += std::string(n - b.size() - 1, ' ');
    return b + "}";
  };
  std::vector<Router::Admission> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(router_->Admit(Make(http::verb::post, "/observe", padded(15 * 1024)).base(), Listener::kMain, false));
    ASSERT_FALSE(held.back().answer) << i;
  }
  Router::Admission refused = router_->Admit(Make(http::verb::post, "/observe", padded(5 * 1024)).base(),
                                             Listener::kMain, false);
  ASSERT_TRUE(refused.answer) << "60 KiB held + 5 KiB is past 64 KiB";
  EXPECT_EQ(refused.answer->res.result_int(), 503u);
  EXPECT_EQ(Slug(*refused.answer), "urn:scangate:problem:unavailable");
  EXPECT_EQ(refused.answer->res[http::field::retry_after], "1");
  EXPECT_TRUE(refused.answer->close);
  EXPECT_FALSE(router_->Admit(Make(http::verb::post, "/observe", padded(4 * 1024)).base(), Listener::kMain, false).answer)
      << "4 KiB still fits (and is given back at once: the admission is dropped)";
  EXPECT_FALSE(router_->Admit(Make(http::verb::get, "/healthz", "", "").base(), Listener::kMain, false).answer)
      << "a request without a body needs no budget";
  auto metrics = Exchange(Make(http::verb::get, "/metrics", "", ""));
  EXPECT_NE(metrics.res.body().find("scangate_body_bytes_in_flight 61440\n"), std::string::npos) << metrics.res.body();
  EXPECT_NE(metrics.res.body().find("scangate_body_bytes_limit 65536\n"), std::string::npos);
  EXPECT_NE(metrics.res.body().find("scangate_body_budget_refused_total 1\n"), std::string::npos);
  held[0].body_hold.Release();
  held[1].body_hold.Release();
  // 30 KiB held: a 32 KiB batch is within half of 64 KiB only once the other observations are gone.
  std::string batch = R"({"keys":["budget-1"])";
  batch += std::string(32 * 1024 - batch.size() - 1, ' ') + "}";
  EXPECT_TRUE(router_->Admit(Make(http::verb::post, "/observe/batch", batch).base(), Listener::kMain, false).answer);
  held.clear();
  Router::Admission b = router_->Admit(Make(http::verb::post, "/observe/batch", batch).base(), Listener::kMain, false);
  EXPECT_FALSE(b.answer) << "a 32 KiB batch with nothing else held";
  b.body_hold.Release();
  // Refused for another reason first: 413 takes nothing.
  EXPECT_EQ(router_->Admit(Make(http::verb::post, "/observe", padded(17 * 1024)).base(), Listener::kMain, false)
                .answer->res.result_int(), 413u);
  metrics = Exchange(Make(http::verb::get, "/metrics", "", ""));
  EXPECT_NE(metrics.res.body().find("scangate_body_bytes_in_flight 0\n"), std::string::npos) << metrics.res.body();
  // The whole exchange still works within the budget, and gives its bytes back.
  EXPECT_EQ(Exchange(Make(http::verb::post, "/observe", padded(1000))).res.result_int(), 201u);
}

// Issue 43 item 2: a path or method the server does not serve, or a body on a route that takes none, is answered
// at the header (404, 405, 413), closing the connection when a body follows, and takes no body budget — whatever
// the budget left (with tokens on, POST /x needs no token). HEAD is a GET route's (item 5).
TEST_F(RouterTest, BodiesTheRoutesDoNotTakeHoldNoBudget) {
  config_.max_body_bytes_in_flight = 16 * 1024;
  router_ = std::make_unique<Router>(config_, *service_, &reader_);
  const std::string body(16 * 1024, 'x');
  struct Case {
    http::verb method;
    const char* target;
    unsigned status;
  };
  for (const Case& c : {Case{http::verb::post, "/x", 404u}, Case{http::verb::put, "/observe", 405u},
                        Case{http::verb::options, "/observe", 405u}, Case{http::verb::get, "/readyz", 413u},
                        Case{http::verb::post, "/metrics", 405u}}) {
    for (int i = 0; i < 3; ++i) {  // more than the budget holds, were any of it taken
      Router::Admission ad = router_->Admit(Make(c.method, c.target, body).base(), Listener::kMain, false);
      ASSERT_TRUE(ad.answer) << c.target;
      EXPECT_EQ(ad.answer->res.result_int(), c.status) << c.target;
      EXPECT_TRUE(ad.answer->close) << c.target << ": its body is never read";
    }
  }
  Router::Admission put = router_->Admit(Make(http::verb::put, "/observe", body).base(), Listener::kMain, false);
  EXPECT_EQ(put.answer->res[http::field::allow], "POST");
  EXPECT_EQ(Exchange(Make(http::verb::post, "/observe", R"({"key":"budget-left"})")).res.result_int(), 201u)
      << "the whole budget is still there for a till";
  // Without a body the connection stays open.
  EXPECT_FALSE(router_->Admit(Make(http::verb::get, "/nope", "", "").base(), Listener::kMain, false).answer->close);
}

TEST_F(RouterTest, HeadIsAGetRoutesMethod) {
  Router::Admission ad = router_->Admit(Make(http::verb::head, "/healthz", "", "").base(), Listener::kMain, false);
  EXPECT_FALSE(ad.answer);
  EXPECT_EQ(ad.route, Route::kHealthz);
  EXPECT_EQ(Exchange(Make(http::verb::head, "/readyz", "", "")).res.result_int(), 200u);
  auto a = Exchange(Make(http::verb::head, "/observe", "", ""));
  EXPECT_EQ(a.res.result_int(), 405u);
  EXPECT_EQ(a.res[http::field::allow], "POST");
  a = Exchange(Make(http::verb::post, "/healthz", "", ""));
  EXPECT_EQ(a.res.result_int(), 405u);
  EXPECT_EQ(a.res[http::field::allow], "GET, HEAD");
}

TEST_F(TokenRouterTest, TokenRequiredButNotOnPreflight) {
  auto a = Exchange(Make(http::verb::post, "/lookup", R"({"key":"x"})"));
  EXPECT_EQ(a.res.result_int(), 401u);
  EXPECT_EQ(a.res[http::field::www_authenticate], R"(Bearer realm="scangate")");
  a = Exchange(Make(http::verb::post, "/lookup", R"({"key":"x"})", "application/json",
                    {{http::field::authorization, "Bearer secret-token"}}));
  EXPECT_EQ(a.res.result_int(), 404u);
  a = Exchange(Make(http::verb::options, "/lookup", "", "", {{http::field::origin, kAllowed}}));
  EXPECT_EQ(a.res.result_int(), 204u);
}

TEST_F(RouterTest, AdminListenerSplit) {
  config_.admin_listen = "127.0.0.1:0";
  EXPECT_EQ(Exchange(Make(http::verb::get, "/healthz", "", "")).res.result_int(), 404u);
  EXPECT_EQ(Exchange(Make(http::verb::get, "/healthz", "", ""), Listener::kAdmin).res.result_int(), 200u);
  EXPECT_EQ(Exchange(Make(http::verb::post, "/lookup", R"({"key":"x"})"), Listener::kAdmin).res.result_int(), 404u);
}

}  // namespace
}  // namespace scangate::server
