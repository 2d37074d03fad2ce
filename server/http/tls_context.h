// The TLS server context of the main listener (--tls-cert/--tls-key): TLS 1.2 or newer, no renegotiation,
// ECDHE + AEAD cipher suites only, the certificate chain and key from PEM files, client certificates with
// --tls-client-ca (mTLS). Invariant: a context is returned only when the key matches the
// certificate; the protocol floor holds whatever the system openssl.cnf says. Use: HttpServer::Start, and
// HttpServer::ReloadTls on SIGHUP (a new context for new connections; open ones keep theirs).
#pragma once

#include <memory>

#include <boost/asio/ssl/context.hpp>

#include "server/config/config.h"

namespace scangate::server {

// TLS 1.2 cipher list and TLS 1.3 suites of the main listener: ECDHE key exchange and AEAD ciphers only.
inline constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";
inline constexpr const char* kTls13Ciphersuites =
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";

// TLS 1.2+ server context from PEM files; with --tls-client-ca it requires a client certificate of those CAs
// (checked against --tls-crl when given). Throws (boost::system::system_error, std::runtime_error) on a
// missing/invalid certificate, key, CA file or CRL file, or a key that does not match the certificate.
std::unique_ptr<boost::asio::ssl::context> MakeTlsContext(const Config& config);

}  // namespace scangate::server
