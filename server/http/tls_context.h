// The TLS server context of the main listener (--tls-cert/--tls-key): TLS 1.2 or newer, no renegotiation,
// the certificate chain and key from PEM files. Invariant: a context is returned only when the key matches the
// certificate; the protocol floor holds whatever the system openssl.cnf says. Use: HttpServer::Start, once,
// before the I/O threads start (sessions only read the context afterwards).
#pragma once

#include <memory>

#include <boost/asio/ssl/context.hpp>

#include "server/config.h"

namespace scangate::server {

// TLS 1.2+ server context from PEM files. Throws (boost::system::system_error, std::runtime_error) on a
// missing/invalid certificate or key, or a key that does not match the certificate.
std::unique_ptr<boost::asio::ssl::context> MakeTlsContext(const Config& config);

}  // namespace scangate::server
