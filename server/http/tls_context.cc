#include "server/http/tls_context.h"

#include <stdexcept>

#include <openssl/ssl.h>

namespace scangate::server {
namespace net = boost::asio;

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
  return ctx;
}

}  // namespace scangate::server
