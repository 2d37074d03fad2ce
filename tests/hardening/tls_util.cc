#include "tls_util.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <fstream>
#include <stdexcept>
#include <thread>

#include <boost/asio/ip/address.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "harness.h"

namespace scangate::hardening {
namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Clock = std::chrono::steady_clock;

namespace {

void Check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("OpenSSL: ") + what);
}

void WritePem(const std::string& path, const std::function<int(FILE*)>& write) {
  FILE* f = std::fopen(path.c_str(), "w");
  Check(f != nullptr, "cannot open a PEM file for writing");
  const int ok = write(f);
  std::fclose(f);
  Check(ok == 1, "PEM write");
}

void AddExtension(X509* subject, X509* issuer, int nid, const char* value) {
  X509V3_CTX v3;
  X509V3_set_ctx(&v3, issuer, subject, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &v3, nid, value);
  Check(ext != nullptr, "extension");
  X509_add_ext(subject, ext, -1);
  X509_EXTENSION_free(ext);
}

// A certificate for CN=`cn` with `pkey`, valid from now+`not_before_s` to now+`not_after_s`, not yet signed.
X509* NewCertificate(const std::string& cn, long serial, EVP_PKEY* pkey, long not_before_s, long not_after_s) {
  X509* x = X509_new();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), serial);
  X509_gmtime_adj(X509_getm_notBefore(x), not_before_s);
  X509_gmtime_adj(X509_getm_notAfter(x), not_after_s);
  X509_set_pubkey(x, pkey);
  X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  return x;
}

}  // namespace

std::string TempDir() {
  char tmpl[] = "/tmp/scangate-tls-XXXXXX";
  const char* d = ::mkdtemp(tmpl);
  if (d == nullptr) throw std::runtime_error("mkdtemp failed");
  return d;
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::trunc | std::ios::binary);
  out << content;
}

void MakeSelfSigned(const std::string& cert_path, const std::string& key_path, const char* cn) {
  EVP_PKEY* pkey = EVP_EC_gen("P-256");
  Check(pkey != nullptr, "key generation");
  X509* x = NewCertificate(cn, 1, pkey, -60, 86400);
  X509_set_issuer_name(x, X509_get_subject_name(x));
  Check(X509_sign(x, pkey, EVP_sha256()) > 0, "sign");
  WritePem(key_path, [&](FILE* f) { return PEM_write_PrivateKey(f, pkey, nullptr, nullptr, 0, nullptr, nullptr); });
  WritePem(cert_path, [&](FILE* f) { return PEM_write_X509(f, x); });
  X509_free(x);
  EVP_PKEY_free(pkey);
}

TestCa::TestCa(const std::string& cn) {
  key_ = EVP_EC_gen("P-256");
  Check(key_ != nullptr, "CA key generation");
  cert_ = NewCertificate(cn, 1, key_, -3600, 86400);
  X509_set_issuer_name(cert_, X509_get_subject_name(cert_));
  AddExtension(cert_, cert_, NID_basic_constraints, "critical,CA:TRUE");
  AddExtension(cert_, cert_, NID_key_usage, "critical,keyCertSign,cRLSign");
  AddExtension(cert_, cert_, NID_subject_key_identifier, "hash");
  Check(X509_sign(cert_, key_, EVP_sha256()) > 0, "CA sign");
}

TestCa::TestCa(const std::string& cn, const TestCa& issuer, long serial) {
  key_ = EVP_EC_gen("P-256");
  Check(key_ != nullptr, "CA key generation");
  cert_ = NewCertificate(cn, serial, key_, -3600, 86400);
  X509_set_issuer_name(cert_, X509_get_subject_name(issuer.cert_));
  AddExtension(cert_, issuer.cert_, NID_basic_constraints, "critical,CA:TRUE");
  AddExtension(cert_, issuer.cert_, NID_key_usage, "critical,keyCertSign,cRLSign");
  AddExtension(cert_, cert_, NID_subject_key_identifier, "hash");
  AddExtension(cert_, issuer.cert_, NID_authority_key_identifier, "keyid");
  Check(X509_sign(cert_, issuer.key_, EVP_sha256()) > 0, "intermediate CA sign");
}

TestCa::~TestCa() {
  X509_free(cert_);
  EVP_PKEY_free(key_);
}

void TestCa::WriteCert(const std::string& path) const {
  WritePem(path, [&](FILE* f) { return PEM_write_X509(f, cert_); });
}

void TestCa::AppendCert(const std::string& path) const {
  FILE* f = std::fopen(path.c_str(), "a");
  Check(f != nullptr, "cannot open a PEM file for appending");
  const int ok = PEM_write_X509(f, cert_);
  std::fclose(f);
  Check(ok == 1, "PEM write");
}

void TestCa::Issue(const std::string& cn, long serial, const std::string& cert_path, const std::string& key_path,
                   long not_before_s, long not_after_s) const {
  EVP_PKEY* pkey = EVP_EC_gen("P-256");
  Check(pkey != nullptr, "key generation");
  X509* x = NewCertificate(cn, serial, pkey, not_before_s, not_after_s);
  X509_set_issuer_name(x, X509_get_subject_name(cert_));
  AddExtension(x, cert_, NID_basic_constraints, "critical,CA:FALSE");
  AddExtension(x, cert_, NID_key_usage, "critical,digitalSignature");
  AddExtension(x, cert_, NID_ext_key_usage, "clientAuth");
  AddExtension(x, cert_, NID_authority_key_identifier, "keyid");
  Check(X509_sign(x, key_, EVP_sha256()) > 0, "sign");
  WritePem(key_path, [&](FILE* f) { return PEM_write_PrivateKey(f, pkey, nullptr, nullptr, 0, nullptr, nullptr); });
  WritePem(cert_path, [&](FILE* f) { return PEM_write_X509(f, x); });
  X509_free(x);
  EVP_PKEY_free(pkey);
}

void TestCa::WriteCrl(const std::vector<long>& serials, const std::string& path) const {
  X509_CRL* crl = X509_CRL_new();
  X509_CRL_set_version(crl, 1);  // v2
  X509_CRL_set_issuer_name(crl, X509_get_subject_name(cert_));
  const std::time_t now = std::time(nullptr);
  ASN1_TIME* last = ASN1_TIME_adj(nullptr, now, 0, -60);
  ASN1_TIME* next = ASN1_TIME_adj(nullptr, now, 1, 0);
  X509_CRL_set1_lastUpdate(crl, last);
  X509_CRL_set1_nextUpdate(crl, next);
  for (long serial : serials) {
    X509_REVOKED* r = X509_REVOKED_new();
    ASN1_INTEGER* sn = ASN1_INTEGER_new();
    ASN1_INTEGER_set(sn, serial);
    X509_REVOKED_set_serialNumber(r, sn);
    X509_REVOKED_set_revocationDate(r, last);
    X509_CRL_add0_revoked(crl, r);
    ASN1_INTEGER_free(sn);
  }
  X509_CRL_sort(crl);
  Check(X509_CRL_sign(crl, key_, EVP_sha256()) > 0, "CRL sign");
  WritePem(path, [&](FILE* f) { return PEM_write_X509_CRL(f, crl); });
  ASN1_TIME_free(last);
  ASN1_TIME_free(next);
  X509_CRL_free(crl);
}

Server::Server(std::vector<std::string> flags) {
  // As the harness's ScangateProcess does: this test binary's servers use one database with and without a digest
  // secret, and the database keeps the first one's scheme (a server with another is refused at start).
  try {
    it::ForgetDigestScheme(it::Env().pg_url);
  } catch (const std::exception&) {
    // PostgreSQL down: nothing recorded can be forgotten there.
  }
  dir_ = TempDir();
  log_ = dir_ + "/scangate.log";
  std::vector<std::string> args{it::Env().server_binary, "--database-url=" + it::Env().pg_url, "--port=0",
                                "--threads=2"};
  bool listen = false;
  for (auto& f : flags) {
    listen = listen || f.rfind("--listen=", 0) == 0;
    args.push_back(f);
  }
  if (!listen) args.push_back("--listen=127.0.0.1");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_ = ::fork();
  if (pid_ == 0) {
    FILE* out = std::freopen(log_.c_str(), "a", stderr);
    if (out == nullptr) ::_exit(125);
    ::dup2(::fileno(stderr), 1);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
}

Server::~Server() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

bool Server::WaitListening() {
  const auto deadline = Clock::now() + it::kStartupTimeout;
  while (Clock::now() < deadline) {
    if (!alive()) return false;
    std::ifstream in(log_);
    for (std::string line; std::getline(in, line);) {
      boost::json::error_code ec;
      auto v = boost::json::parse(line, ec);
      if (ec || !v.is_object() || !v.as_object().contains("event")) continue;
      const auto& o = v.as_object();
      if (o.at("event") != "listening") continue;
      port = static_cast<std::uint16_t>(o.at("port").to_number<int>());
      if (o.contains("admin_port")) admin_port = static_cast<std::uint16_t>(o.at("admin_port").to_number<int>());
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

bool Server::alive() {
  if (pid_ <= 0) return false;
  int st = 0;
  if (::waitpid(pid_, &st, WNOHANG) == pid_) {
    pid_ = -1;
    return false;
  }
  return true;
}

int Server::Stop() {
  ::kill(pid_, SIGTERM);
  int st = 0;
  ::waitpid(pid_, &st, 0);
  pid_ = -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::string Server::Log() const { return it::ReadFile(log_); }

void Server::Signal(int sig) const { ::kill(pid_, sig); }

bool Server::WaitEvents(std::string_view event, std::size_t n) const {
  const std::string needle = "\"event\":\"" + std::string(event) + "\"";
  for (int i = 0; i < 200; ++i) {
    std::size_t count = 0;
    const std::string log = Log();
    for (std::size_t at = log.find(needle); at != std::string::npos; at = log.find(needle, at + 1)) ++count;
    if (count >= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

TlsConnection::TlsConnection(std::uint16_t port, const std::string& client_cert, const std::string& client_key)
    : ctx_(net::ssl::context::tls_client), s_(ioc_, ctx_) {
  ctx_.set_verify_mode(net::ssl::verify_none);  // self-signed test server certificates
  beast::error_code ec;
  if (!client_cert.empty()) {
    // The stream was made from ctx_ before the certificate was set: give it to the connection's SSL itself.
    if (SSL_use_certificate_chain_file(s_.native_handle(), client_cert.c_str()) != 1 ||
        SSL_use_PrivateKey_file(s_.native_handle(), client_key.c_str(), SSL_FILETYPE_PEM) != 1) {
      throw std::runtime_error("cannot load the client certificate " + client_cert);
    }
  }
  beast::get_lowest_layer(s_).socket().connect({net::ip::make_address("127.0.0.1"), port}, ec);
  if (!ec) s_.handshake(net::ssl::stream_base::client, ec);
  ok_ = !ec;
}

std::string TlsConnection::PeerCn() {
  X509* cert = SSL_get1_peer_certificate(s_.native_handle());
  if (cert == nullptr) return "";
  char cn[256] = {};
  X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof cn);
  X509_free(cert);
  return cn;
}

TlsConnection::Reply TlsConnection::Exchange(std::string_view method, const std::string& target,
                                             const std::string& body,
                                             const std::map<std::string, std::string>& headers) {
  Reply r;
  if (!ok_) return r;
  http::request<http::string_body> req{http::string_to_verb(method), target, 11};
  req.set(http::field::host, "localhost");
  if (!body.empty()) req.set(http::field::content_type, "application/json");
  for (const auto& [name, value] : headers) req.set(name, value);
  req.body() = body;
  req.prepare_payload();
  beast::error_code ec;
  http::write(s_, req, ec);
  if (ec) return r;
  beast::flat_buffer buf;
  http::response<http::string_body> res;
  http::read(s_, buf, res, ec);
  if (ec) return r;
  r.status = static_cast<int>(res.result_int());
  r.body = res.body();
  return r;
}

int TlsConnection::Observe(const std::string& key) { return Exchange("POST", "/observe", it::ObserveBody(key)).status; }

TlsConnection::Reply UntilReady(const std::function<TlsConnection::Reply()>& exchange) {
  const auto deadline = Clock::now() + it::kStartupTimeout;
  TlsConnection::Reply r = exchange();
  while (r.status == 503 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    r = exchange();
  }
  return r;
}

}  // namespace scangate::hardening
