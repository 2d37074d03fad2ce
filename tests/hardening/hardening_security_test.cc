// Security features of the scangate binary (issue "Hardening" items 6 and 7), black-box:
// - TLS (--tls-cert/--tls-key): a self-signed certificate made here with the OpenSSL API; /observe over
//   HTTPS with a Beast ssl client (201 then 200); TLS 1.1 refused (while the same client config allowing
//   TLS 1.2 succeeds, so the refusal is the server's); plain HTTP bytes on the TLS port do not crash it; a
//   connection that never starts its handshake is closed by the 10 s handshake timeout, not earlier.
// - Bearer tokens (--tokens-file): 401 without/with a wrong token (+ WWW-Authenticate), 201 with a right
//   one, operational routes stay open, no token ever in the log; a malformed tokens file exits 2 naming the line.
// - --admin-listen: operational routes only there (404 on the main port), /observe* not served there.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <thread>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "tls_util.h"
#include "util.h"

namespace {
namespace net = boost::asio;
namespace ssl = net::ssl;
namespace beast = boost::beast;
namespace http = beast::http;
using namespace scangate;
using hardening::Clock;
using hardening::MakeSelfSigned;
using hardening::Server;
using hardening::TempDir;
using hardening::TlsConnection;
using hardening::WriteFile;

// --------------------------------------------------------------------------------------------------
// TLS client (Beast over ssl_stream, synchronous).
struct TlsAnswer {
  bool handshake = false;
  std::string error;
  int version = 0;  // SSL_version of the session
  std::vector<int> statuses;
  std::vector<std::string> bodies;
};

// min/max protocol of the client; security level 0 so an old version is really offered. `ciphers`: the TLS 1.2
// cipher list the client offers (OpenSSL syntax).
TlsAnswer TlsExchange(std::uint16_t port, int max_version, const std::vector<std::string>& observe_bodies,
                      const char* ciphers = "DEFAULT:@SECLEVEL=0") {
  TlsAnswer a;
  net::io_context ioc;
  ssl::context ctx(ssl::context::tls_client);
  SSL_CTX_set_security_level(ctx.native_handle(), 0);
  SSL_CTX_set_min_proto_version(ctx.native_handle(), TLS1_VERSION);
  SSL_CTX_set_max_proto_version(ctx.native_handle(), max_version);
  SSL_CTX_set_cipher_list(ctx.native_handle(), ciphers);
  ctx.set_verify_mode(ssl::verify_none);  // self-signed test certificate
  beast::ssl_stream<beast::tcp_stream> s(ioc, ctx);
  beast::error_code ec;
  beast::get_lowest_layer(s).socket().connect({net::ip::make_address("127.0.0.1"), port}, ec);
  if (ec) {
    a.error = "connect: " + ec.message();
    return a;
  }
  s.handshake(ssl::stream_base::client, ec);
  if (ec) {
    a.error = "handshake: " + ec.message();
    return a;
  }
  a.handshake = true;
  a.version = SSL_version(s.native_handle());
  for (const auto& body : observe_bodies) {
    http::request<http::string_body> req{http::verb::post, "/observe", 11};
    req.set(http::field::host, "localhost");
    req.set(http::field::content_type, "application/json");
    req.body() = body;
    req.prepare_payload();
    http::write(s, req, ec);
    if (ec) {
      a.error = "write: " + ec.message();
      return a;
    }
    beast::flat_buffer buf;
    http::response<http::string_body> res;
    http::read(s, buf, res, ec);
    if (ec) {
      a.error = "read: " + ec.message();
      return a;
    }
    a.statuses.push_back(res.result_int());
    a.bodies.push_back(res.body());
  }
  return a;
}

TEST(SecurityTls, ObserveOverHttpsTls11RefusedPlainHttpHarmless) {
  const std::string dir = TempDir();
  MakeSelfSigned(dir + "/cert.pem", dir + "/key.pem");
  Server server({"--tls-cert=" + dir + "/cert.pem", "--tls-key=" + dir + "/key.pem"});
  ASSERT_TRUE(server.WaitListening()) << server.Log();

  // Ready over TLS (warm start may still run: an early 503 is retried, never a wrong verdict).
  const std::string key = it::UniqueKey("tls");
  TlsAnswer first;
  const auto deadline = Clock::now() + it::kStartupTimeout;
  do {
    first = TlsExchange(server.port, TLS1_3_VERSION, {it::ObserveBody(key)});
    if (first.handshake && !first.statuses.empty() && first.statuses[0] != 503) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  } while (Clock::now() < deadline);
  ASSERT_TRUE(first.handshake) << first.error << "\n" << server.Log();
  ASSERT_EQ(first.statuses.size(), 1u) << first.error;
  EXPECT_EQ(first.statuses[0], 201) << first.bodies[0];
  EXPECT_GE(first.version, TLS1_2_VERSION);
  EXPECT_NE(first.bodies[0].find(it::Sha256Hex(key)), std::string::npos);

  // Keep-alive on TLS: the same key twice more on one connection -> 200 duplicate both times.
  const TlsAnswer again = TlsExchange(server.port, TLS1_3_VERSION, {it::ObserveBody(key), it::ObserveBody(key)});
  ASSERT_EQ(again.statuses.size(), 2u) << again.error;
  EXPECT_EQ(again.statuses[0], 200);
  EXPECT_EQ(again.statuses[1], 200);

  // Control: TLS 1.2 exactly is accepted ...
  const TlsAnswer v12 = TlsExchange(server.port, TLS1_2_VERSION, {});
  EXPECT_TRUE(v12.handshake) << v12.error;
  EXPECT_EQ(v12.version, TLS1_2_VERSION);
  // Issue 33: TLS 1.2 suites are the server's own list (ECDHE + AEAD), not the system openssl.cnf's: a client
  // offering only CBC (with or without ECDHE) or only static-RSA key exchange is refused; ECDHE + GCM or
  // ChaCha20-Poly1305 is accepted.
  for (const char* refused : {"ECDHE-ECDSA-AES128-SHA:@SECLEVEL=0", "ECDHE-ECDSA-AES256-SHA384:@SECLEVEL=0",
                              "AES128-GCM-SHA256:AES256-SHA:@SECLEVEL=0"}) {
    const TlsAnswer weak = TlsExchange(server.port, TLS1_2_VERSION, {}, refused);
    EXPECT_FALSE(weak.handshake) << refused;
  }
  for (const char* accepted : {"ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305"}) {
    const TlsAnswer strong = TlsExchange(server.port, TLS1_2_VERSION, {}, accepted);
    EXPECT_TRUE(strong.handshake) << accepted << ": " << strong.error;
  }
  // ... and the same client capped at TLS 1.1 is refused by the server (not by the client itself).
  const TlsAnswer v11 = TlsExchange(server.port, TLS1_1_VERSION, {});
  EXPECT_FALSE(v11.handshake);
  EXPECT_EQ(v11.error.find("no protocols available"), std::string::npos) << v11.error;
  hardening::Report("TLS 1.1 handshake refused: " + v11.error);

  // Plain HTTP on the TLS port: no HTTP answer, the connection ends, the server keeps serving TLS.
  const std::string raw = it::RawExchange(server.port, "POST /observe HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n"
                                                       "{\"key\":\"a\"}");
  EXPECT_EQ(raw.find("HTTP/1.1 201"), std::string::npos);
  EXPECT_EQ(raw.find("HTTP/1.1 200"), std::string::npos);
  const std::string garbage(3000, '\x16');
  it::RawExchange(server.port, garbage, std::chrono::milliseconds(500));
  EXPECT_TRUE(server.alive());
  const TlsAnswer after = TlsExchange(server.port, TLS1_3_VERSION, {it::ObserveBody(key)});
  ASSERT_EQ(after.statuses.size(), 1u) << after.error;
  EXPECT_EQ(after.statuses[0], 200);

  // A connection that never starts its handshake is closed by the 10 s handshake timeout: not before it, and
  // not much after (the server checks its connections' deadlines 4 times a second).
  {
    hardening::RawConn idle(server.port);
    const auto start = Clock::now();
    ASSERT_TRUE(idle.WaitClosed(start + std::chrono::seconds(15))) << "not closed within 15 s";
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
    EXPECT_GE(ms, 9900) << "the handshake timeout fired early";
    EXPECT_LE(ms, 11500);
    EXPECT_TRUE(idle.received().empty());
    hardening::Report("silent TLS connection closed after " + std::to_string(ms) + " ms");
  }
  EXPECT_TRUE(server.alive());
  EXPECT_EQ(server.Stop(), 0);
}

// Issue 33: SIGHUP reloads --tls-cert/--tls-key (a renewed certificate) without a restart: new connections get
// the new certificate, a connection opened before keeps working; a certificate that fails to load is logged and
// the one in force stays.
TEST(SecurityTls, SighupReloadsTheCertificateKeepingOpenConnections) {
  const std::string dir = TempDir();
  const std::string cert = dir + "/cert.pem", key = dir + "/key.pem";
  MakeSelfSigned(cert, key, "first.scangate.test");
  Server server({"--tls-cert=" + cert, "--tls-key=" + key});
  ASSERT_TRUE(server.WaitListening()) << server.Log();
  TlsConnection before(server.port);
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(before.PeerCn(), "first.scangate.test");
  int status = 0;
  for (int i = 0; i < 100 && (status = before.Observe(it::UniqueKey("tls-reload"))) == 503; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // warm start still running
  }
  EXPECT_EQ(status, 201);

  MakeSelfSigned(cert, key, "second.scangate.test");
  server.Signal(SIGHUP);
  ASSERT_TRUE(server.WaitEvents("tls_reload", 1)) << server.Log();
  EXPECT_NE(server.Log().find("\"result\":\"reloaded\""), std::string::npos) << server.Log();
  TlsConnection after(server.port);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after.PeerCn(), "second.scangate.test");
  EXPECT_EQ(after.Observe(it::UniqueKey("tls-reload")), 201);
  EXPECT_EQ(before.Observe(it::UniqueKey("tls-reload")), 201) << "the connection opened before the reload broke";
  EXPECT_EQ(before.PeerCn(), "first.scangate.test");

  WriteFile(cert, "not a certificate\n");
  server.Signal(SIGHUP);
  ASSERT_TRUE(server.WaitEvents("tls_reload", 2)) << server.Log();
  EXPECT_NE(server.Log().find("kept the previous certificate"), std::string::npos) << server.Log();
  TlsConnection kept(server.port);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept.PeerCn(), "second.scangate.test");
  EXPECT_TRUE(server.alive());
  EXPECT_EQ(server.Stop(), 0);
}

// Issue 33: --admin-tls serves the admin listener over HTTPS with the main port's certificate (a plain-HTTP
// request there gets no HTTP answer); without --tls-cert or --admin-listen it is a start-up error.
TEST(SecurityTls, AdminListenerOverTls) {
  const std::string dir = TempDir();
  MakeSelfSigned(dir + "/cert.pem", dir + "/key.pem", "admin.scangate.test");
  const std::string tls_flags = " --tls-cert=" + dir + "/cert.pem --tls-key=" + dir + "/key.pem";
  Server server({"--tls-cert=" + dir + "/cert.pem", "--tls-key=" + dir + "/key.pem", "--admin-listen=127.0.0.1:0",
                 "--admin-tls=on"});
  ASSERT_TRUE(server.WaitListening()) << server.Log();
  ASSERT_NE(server.admin_port, 0) << server.Log();
  TlsConnection admin(server.admin_port);
  ASSERT_TRUE(admin.ok());
  EXPECT_EQ(admin.PeerCn(), "admin.scangate.test");
  EXPECT_EQ(admin.Get("/healthz"), 200);
  EXPECT_EQ(admin.Get("/metrics"), 200);
  EXPECT_EQ(it::RawExchange(server.admin_port, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").find("HTTP/1.1 200"),
            std::string::npos)
      << "plain HTTP answered on the TLS admin listener";
  EXPECT_EQ(server.Stop(), 0);
  const std::vector<std::string> incomplete = {" --admin-tls=on --admin-listen=127.0.0.1:0", tls_flags + " --admin-tls=on"};
  for (const std::string& flags : incomplete) {
    const auto r = hardening::RunCommand(it::Env().server_binary + " --database-url=" + it::Env().pg_url + flags);
    EXPECT_EQ(r.status, 2) << flags << ": " << r.output;
    EXPECT_NE(r.output.find("--admin-tls"), std::string::npos) << r.output;
  }
}

TEST(SecurityTls, MismatchedOrMissingCertificateFailsStartup) {
  const std::string dir = TempDir();
  const auto r = hardening::RunCommand(it::Env().server_binary + " --database-url=" + it::Env().pg_url +
                                       " --tls-cert=" + dir + "/missing.pem --tls-key=" + dir + "/missing.key");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--tls-cert"), std::string::npos) << r.output;
  const auto half = hardening::RunCommand(it::Env().server_binary + " --database-url=x --tls-cert=/etc/hostname");
  EXPECT_EQ(half.status, 2) << half.output;
}

// --------------------------------------------------------------------------------------------------
const std::string kToken = "sg-test-token-" + it::RandomHex(16);
const std::string kOtherToken = "sg-wrong-token-" + it::RandomHex(16);

std::string TokensFile(const std::string& dir) {
  const std::string path = dir + "/tokens";
  // The test's token may observe and send batches (a line without routes may only observe: issue 33).
  WriteFile(path, "# scangate tokens\n\n  " + it::Sha256Hex("some-other-client") + "\n" + it::Sha256Hex(kToken) +
                      " till-t observe,batch\n");
  return path;
}

TEST(SecurityTokens, BearerTokenRequiredOnObserveOnly) {
  const std::string dir = TempDir();
  it::ScangateProcess server({"--tokens-file=" + TokensFile(dir), "--access-log=on"});
  ASSERT_TRUE(server.Start());
  it::HttpClient c(server.port());
  const std::string key = it::UniqueKey("token");

  auto none = c.Post("/observe", it::ObserveBody(key));
  EXPECT_TRUE(it::IsProblem(none, 401, "unauthorized")) << none;
  EXPECT_EQ(none.header("www-authenticate"), R"(Bearer realm="scangate")");

  c.Reconnect();  // a 401 with a body closes the connection (the body is drained, never read)
  auto wrong = c.Request("POST", "/observe", it::ObserveBody(key), "application/json",
                         {{"Authorization", "Bearer " + kOtherToken}});
  EXPECT_TRUE(it::IsProblem(wrong, 401, "unauthorized")) << wrong;
  EXPECT_EQ(wrong.header("www-authenticate"), R"(Bearer realm="scangate", error="invalid_token")");

  c.Reconnect();
  auto basic = c.Request("POST", "/observe/batch", R"({"keys":["x"]})", "application/json",
                         {{"Authorization", "Basic dXNlcjpwYXNz"}});
  EXPECT_TRUE(it::IsProblem(basic, 401, "unauthorized")) << basic;

  c.Reconnect();
  it::Pg pg;
  EXPECT_EQ(pg.CountDigest(it::Sha256Hex(key)), 0) << "a rejected request must not be recorded";
  auto ok = c.Request("POST", "/observe", it::ObserveBody(key), "application/json",
                      {{"Authorization", "Bearer " + kToken}});
  EXPECT_EQ(ok.status, 201) << ok;
  auto dup = c.Request("POST", "/observe", it::ObserveBody(key), "application/json",
                       {{"Authorization", "bearer   " + kToken}});
  EXPECT_EQ(dup.status, 200) << dup;
  auto batch = c.Request("POST", "/observe/batch", "{\"keys\":[" + it::JsonString(key) + "]}", "application/json",
                         {{"Authorization", "Bearer " + kToken}});
  EXPECT_EQ(batch.status, 200) << batch;

  // Operational routes stay open without a token.
  EXPECT_EQ(c.Get("/healthz").status, 200);
  EXPECT_EQ(c.Get("/readyz").status, 200);
  const auto metrics = c.Get("/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("401"), std::string::npos) << "401s are counted";
  EXPECT_EQ(c.Get("/stats").status, 200);

  EXPECT_EQ(server.Stop(), 0);
  const std::string log = server.Log();
  EXPECT_EQ(log.find(kToken), std::string::npos) << "a token reached the log";
  EXPECT_EQ(log.find(kOtherToken), std::string::npos) << "a presented token reached the log";
  EXPECT_EQ(log.find(it::Sha256Hex(kToken)), std::string::npos) << "a token hash reached the log";
  EXPECT_NE(log.find("\"status\":401"), std::string::npos) << "the access log should show the 401s";
}

TEST(SecurityTokens, MalformedTokensFileExits2NamingTheLine) {
  const std::string dir = TempDir();
  const std::string path = dir + "/tokens";
  WriteFile(path, "# ok\n" + it::Sha256Hex("a") + "\n\nnot-a-hash\n");
  const auto r = hardening::RunCommand(it::Env().server_binary + " --database-url=x --tokens-file=" + path);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("line 4"), std::string::npos) << r.output;
  WriteFile(path, it::Sha256Hex("a").substr(0, 63) + "G\n");
  const auto upper = hardening::RunCommand(it::Env().server_binary + " --database-url=x --tokens-file=" + path);
  EXPECT_EQ(upper.status, 2) << upper.output;
  EXPECT_NE(upper.output.find("line 1"), std::string::npos) << upper.output;
  const auto missing =
      hardening::RunCommand(it::Env().server_binary + " --database-url=x --tokens-file=" + dir + "/nope");
  EXPECT_EQ(missing.status, 2) << missing.output;
}

// --------------------------------------------------------------------------------------------------
TEST(SecurityAdmin, OperationalRoutesOnlyOnAdminListener) {
  Server server({"--admin-listen=127.0.0.1:0"});
  ASSERT_TRUE(server.WaitListening()) << server.Log();
  ASSERT_NE(server.admin_port, 0) << server.Log();
  ASSERT_NE(server.admin_port, server.port);
  ASSERT_TRUE(hardening::WaitReady(server.admin_port, it::kStartupTimeout).has_value()) << server.Log();

  it::HttpClient admin(server.admin_port);
  EXPECT_EQ(admin.Get("/healthz").status, 200);
  EXPECT_EQ(admin.Get("/metrics").status, 200);
  EXPECT_EQ(admin.Get("/stats").status, 200);
  auto obs_on_admin = admin.Post("/observe", it::ObserveBody(it::UniqueKey("admin")));
  EXPECT_TRUE(it::IsProblem(obs_on_admin, 404, "not-found")) << obs_on_admin;

  it::HttpClient main(server.port);
  for (const char* route : {"/healthz", "/readyz", "/metrics", "/stats"}) {
    auto r = main.Get(route);
    EXPECT_TRUE(it::IsProblem(r, 404, "not-found")) << route << ": " << r;
  }
  const std::string key = it::UniqueKey("main");
  EXPECT_EQ(main.Post("/observe", it::ObserveBody(key)).status, 201);
  EXPECT_EQ(main.Post("/observe", it::ObserveBody(key)).status, 200);
  EXPECT_EQ(server.Stop(), 0);
}

}  // namespace
