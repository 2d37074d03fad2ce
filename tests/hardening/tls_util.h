// TLS helpers of the black-box security tests (hardening_security_test, hardening_mtls_test): certificates, CAs
// and CRLs made by the test with the OpenSSL API (nothing on disk beforehand), a scangate process whose
// readiness is read from its "listening" log line (its main port may speak only TLS), and one kept-alive HTTPS
// connection, with or without a client certificate. Nothing here links server code.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <openssl/evp.h>
#include <openssl/x509.h>

namespace scangate::hardening {

std::string TempDir();  // a fresh folder under /tmp
void WriteFile(const std::string& path, const std::string& content);

// Self-signed P-256 certificate for CN=`cn`, valid for a day; PEM files. Throws std::runtime_error.
void MakeSelfSigned(const std::string& cert_path, const std::string& key_path, const char* cn = "localhost");

// A certificate authority of the test's own (P-256, CA:TRUE, keyCertSign + cRLSign).
class TestCa {
 public:
  explicit TestCa(const std::string& cn);
  // An intermediate CA for CN=`cn` with serial `serial`, issued by `issuer`.
  TestCa(const std::string& cn, const TestCa& issuer, long serial);
  ~TestCa();
  TestCa(const TestCa&) = delete;
  TestCa& operator=(const TestCa&) = delete;
  void WriteCert(const std::string& path) const;
  // Appends this CA's certificate to a PEM file (a client's chain: its certificate, then the intermediates).
  void AppendCert(const std::string& path) const;
  // A client certificate (extendedKeyUsage clientAuth) for subject CN=`cn` with serial `serial`, valid from
  // `not_before_s` to `not_after_s` seconds from now; PEM certificate and key files.
  void Issue(const std::string& cn, long serial, const std::string& cert_path, const std::string& key_path,
             long not_before_s = -60, long not_after_s = 86400) const;
  // A CRL of this CA revoking `serials`, next update in a day.
  void WriteCrl(const std::vector<long>& serials, const std::string& path) const;

 private:
  EVP_PKEY* key_ = nullptr;
  X509* cert_ = nullptr;
};

// A scangate process (the harness's binary and database, --port=0 --threads=2, --listen=127.0.0.1 unless `flags`
// name another, plus `flags`)
// whose readiness is not probed over plain HTTP on the main port: WaitListening reads the port(s) from its
// "listening" log line.
class Server {
 public:
  explicit Server(std::vector<std::string> flags);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  // Waits for the "listening" line; false when the process exits first or after the startup timeout.
  bool WaitListening();
  bool alive();
  int Stop();  // SIGTERM; the exit status
  std::string Log() const;
  void Signal(int sig) const;
  // Waits until the log holds `n` lines of `event` (a SIGHUP's result, say); false after 10 s.
  bool WaitEvents(std::string_view event, std::size_t n) const;
  const std::string& dir() const { return dir_; }
  std::uint16_t port = 0, admin_port = 0;

 private:
  std::string dir_, log_;
  pid_t pid_ = -1;
};

// One kept-alive HTTPS connection to 127.0.0.1 (Beast over ssl_stream, synchronous, any server certificate
// accepted), with a client certificate when `client_cert` is set.
class TlsConnection {
 public:
  struct Reply {
    int status = -1;  // -1: the exchange failed (written or read), e.g. the server refused the certificate
    std::string body;
  };
  explicit TlsConnection(std::uint16_t port, const std::string& client_cert = "", const std::string& client_key = "");
  bool ok() const { return ok_; }  // the client's side of the handshake completed
  std::string PeerCn();            // the served certificate's CN ("" without one)
  Reply Exchange(std::string_view method, const std::string& target, const std::string& body,
                 const std::map<std::string, std::string>& headers = {});
  int Observe(const std::string& key);  // POST /observe {"key": key}: the status
  int Get(const std::string& target) { return Exchange("GET", target, "").status; }

 private:
  boost::asio::io_context ioc_;
  boost::asio::ssl::context ctx_;
  boost::beast::ssl_stream<boost::beast::tcp_stream> s_;
  bool ok_ = false;
};

// Retries `exchange` while it answers 503 (warm start still running), up to the harness's startup timeout.
TlsConnection::Reply UntilReady(const std::function<TlsConnection::Reply()>& exchange);

}  // namespace scangate::hardening
