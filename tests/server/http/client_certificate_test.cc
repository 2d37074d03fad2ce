// ClientCertificateOf (server/http/client_certificate.h) after a real TLS 1.3 handshake in memory (a BIO pair,
// no sockets): a verified certificate's single CN that is a terminal id names the terminal, with the given
// routes; a CN with other characters, two CNs or none name none (and the problem never quotes the CN).
// IsClientCertificateRefusal tells certificate failures from other handshake failures.
#include "server/http/client_certificate.h"

#include <memory>
#include <string>
#include <vector>

#include <boost/asio/ssl/error.hpp>
#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

namespace {
using namespace scangate::server;

struct KeyAndCert {
  EVP_PKEY* key = nullptr;
  X509* cert = nullptr;
  ~KeyAndCert() {
    X509_free(cert);
    EVP_PKEY_free(key);
  }
};

// Self-signed P-256 certificate with one subject entry per CN in `cns`.
std::unique_ptr<KeyAndCert> SelfSigned(const std::vector<std::string>& cns) {
  auto kc = std::make_unique<KeyAndCert>();
  kc->key = EVP_EC_gen("P-256");
  kc->cert = X509_new();
  X509_set_version(kc->cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(kc->cert), 7);
  X509_gmtime_adj(X509_getm_notBefore(kc->cert), -60);
  X509_gmtime_adj(X509_getm_notAfter(kc->cert), 3600);
  X509_set_pubkey(kc->cert, kc->key);
  X509_NAME* name = X509_get_subject_name(kc->cert);
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>("Shop"), -1, -1, 0);
  for (const std::string& cn : cns) {
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                               0);
  }
  X509_set_issuer_name(kc->cert, name);
  X509_sign(kc->cert, kc->key, EVP_sha256());
  return kc;
}

// The server side of a finished handshake with a client presenting `client` (trusted by the server as is).
class Handshake {
 public:
  explicit Handshake(const KeyAndCert& client) : server_id_(SelfSigned({"scangate.test"})) {
    SSL_CTX* sctx = SSL_CTX_new(TLS_server_method());
    SSL_CTX_use_certificate(sctx, server_id_->cert);
    SSL_CTX_use_PrivateKey(sctx, server_id_->key);
    X509_STORE_add_cert(SSL_CTX_get_cert_store(sctx), client.cert);
    SSL_CTX_set_verify(sctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    SSL_CTX* cctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_use_certificate(cctx, client.cert);
    SSL_CTX_use_PrivateKey(cctx, client.key);
    server_ = SSL_new(sctx);
    client_ = SSL_new(cctx);
    SSL_CTX_free(sctx);  // the SSLs hold references
    SSL_CTX_free(cctx);
    BIO *s = nullptr, *c = nullptr;
    BIO_new_bio_pair(&s, 0, &c, 0);
    SSL_set_bio(server_, s, s);
    SSL_set_bio(client_, c, c);
    SSL_set_accept_state(server_);
    SSL_set_connect_state(client_);
    for (int i = 0; i < 20 && !done_; ++i) {
      const int rc = SSL_do_handshake(client_);
      const int rs = SSL_do_handshake(server_);
      done_ = rc == 1 && rs == 1;
    }
  }
  ~Handshake() {
    SSL_free(server_);
    SSL_free(client_);
  }
  bool done() const { return done_; }
  SSL* server() { return server_; }

 private:
  std::unique_ptr<KeyAndCert> server_id_;
  SSL* server_ = nullptr;
  SSL* client_ = nullptr;
  bool done_ = false;
};

TEST(ClientCertificate, TheCnIsTheTerminal) {
  const auto till = SelfSigned({"till-07.shop_3"});
  Handshake h(*till);
  ASSERT_TRUE(h.done());
  const ClientCertificate c = ClientCertificateOf(h.server(), kRouteBitObserve | kRouteBitBatch);
  ASSERT_TRUE(c.terminal) << c.problem;
  EXPECT_EQ(c.terminal->id, "till-07.shop_3");
  EXPECT_EQ(c.terminal->routes, kRouteBitObserve | kRouteBitBatch);
}

TEST(ClientCertificate, NoTerminalWithoutExactlyOneValidCn) {
  const std::vector<std::vector<std::string>> refused = {
      {"till 7"}, {"till-7/../admin"}, {"tïll-7"}, {std::string(65, 'a')}, {"till-1", "till-2"}, {}};
  for (const auto& cns : refused) {
    const auto cert = SelfSigned(cns);
    Handshake h(*cert);
    ASSERT_TRUE(h.done());
    const ClientCertificate c = ClientCertificateOf(h.server(), kRouteBitObserve);
    EXPECT_FALSE(c.terminal) << (cns.empty() ? "(no CN)" : cns[0]);
    EXPECT_FALSE(c.problem.empty());
    for (const std::string& cn : cns) EXPECT_EQ(c.problem.find(cn), std::string::npos) << c.problem;
  }
}

TEST(ClientCertificate, RefusalsAreTheCertificatesOnly) {
  const auto ssl_error = [](int reason) {
    return boost::system::error_code(static_cast<int>(ERR_PACK(ERR_LIB_SSL, 0, reason)),
                                     boost::asio::error::get_ssl_category());
  };
  EXPECT_TRUE(IsClientCertificateRefusal(ssl_error(SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE)));
  EXPECT_TRUE(IsClientCertificateRefusal(ssl_error(SSL_R_CERTIFICATE_VERIFY_FAILED)));
  EXPECT_FALSE(IsClientCertificateRefusal(ssl_error(SSL_R_UNSUPPORTED_PROTOCOL)));
  EXPECT_FALSE(IsClientCertificateRefusal(ssl_error(SSL_R_WRONG_VERSION_NUMBER)));
  EXPECT_FALSE(IsClientCertificateRefusal(boost::asio::error::eof));
}

}  // namespace
