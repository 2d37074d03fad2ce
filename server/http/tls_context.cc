#include "server/http/tls_context.h"

#include <stdexcept>

#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

namespace scangate::server {
namespace net = boost::asio;

namespace {

// mTLS: trust --tls-client-ca for client certificates, name its CAs in the CertificateRequest (the client's
// certificate choice), check --tls-crl, and fail a handshake without a valid certificate. The admin listener's
// sessions turn verification off on their own SSL (server/http/client_certificate.h).
void AddClientVerification(net::ssl::context& ctx, const Config& config) {
  SSL_CTX* native = ctx.native_handle();
  STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(config.tls_client_ca.c_str());
  if (names == nullptr) throw std::runtime_error("--tls-client-ca: no CA certificate in '" + config.tls_client_ca + "'");
  SSL_CTX_set_client_CA_list(native, names);  // takes ownership
  if (SSL_CTX_load_verify_file(native, config.tls_client_ca.c_str()) != 1) {
    throw std::runtime_error("--tls-client-ca: cannot load the CA certificates of '" + config.tls_client_ca + "'");
  }
  if (!config.tls_crl.empty()) {
    X509_STORE* store = SSL_CTX_get_cert_store(native);
    X509_LOOKUP* lookup = X509_STORE_add_lookup(store, X509_LOOKUP_file());
    if (lookup == nullptr || X509_load_crl_file(lookup, config.tls_crl.c_str(), X509_FILETYPE_PEM) <= 0) {
      throw std::runtime_error("--tls-crl: no CRL in '" + config.tls_crl + "'");
    }
    // Every certificate of the client's chain is checked against its issuer's CRL: the terminal's, and each
    // intermediate CA's against the CA above it (CRL_CHECK alone checks the leaf only, so a revoked intermediate
    // CA's terminals passed: issue 43). A CA without a CRL in the file fails every certificate it issued: the
    // file must hold a current CRL of every CA that issues a certificate of a chain (the trust anchor's own
    // self-signed certificate needs none).
    X509_STORE_set_flags(store, X509_V_FLAG_CRL_CHECK | X509_V_FLAG_CRL_CHECK_ALL);
  }
  ctx.set_verify_mode(net::ssl::verify_peer | net::ssl::verify_fail_if_no_peer_cert);
  // Session resumption with verification on needs a session id context (else OpenSSL fails the handshake).
  static constexpr unsigned char kSessionContext[] = "scangate";
  SSL_CTX_set_session_id_context(native, kSessionContext, sizeof kSessionContext - 1);
}

}  // namespace

std::unique_ptr<net::ssl::context> MakeTlsContext(const Config& config) {
  auto ctx = std::make_unique<net::ssl::context>(net::ssl::context::tls_server);
  ctx->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                   net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 | net::ssl::context::no_tlsv1_1 |
                   net::ssl::context::single_dh_use);
  // Belt and braces: the protocol floor does not depend on the option bits or the system openssl.cnf.
  if (SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION) != 1) {
    throw std::runtime_error("cannot set the TLS 1.2 minimum protocol version");
  }
  SSL_CTX_set_options(ctx->native_handle(), SSL_OP_NO_RENEGOTIATION);
  // Explicit suites, not the system openssl.cnf's: forward secrecy (ECDHE) and AEAD only (Mozilla's
  // "intermediate" profile without its finite-field DHE), so no RSA key exchange and no CBC mode whatever the
  // host's OpenSSL policy says.
  if (SSL_CTX_set_cipher_list(ctx->native_handle(), kTls12Ciphers) != 1) {
    throw std::runtime_error("cannot set the TLS 1.2 cipher list");
  }
  if (SSL_CTX_set_ciphersuites(ctx->native_handle(), kTls13Ciphersuites) != 1) {
    throw std::runtime_error("cannot set the TLS 1.3 cipher suites");
  }
  ctx->use_certificate_chain_file(config.tls_cert);
  ctx->use_private_key_file(config.tls_key, net::ssl::context::pem);
  if (SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
    throw std::runtime_error("--tls-key does not match --tls-cert");
  }
  if (config.mtls()) AddClientVerification(*ctx, config);
  return ctx;
}

}  // namespace scangate::server
