// A client certificate as a caller's identity (mTLS, --tls-client-ca): after a handshake on the main listener
// has verified the client's certificate (its chain ends at a --tls-client-ca CA, it is in its validity period,
// and --tls-crl does not revoke it), the certificate's subject CN names the caller's terminal exactly as a
// tokens-file line does — the recorded source, the rate limit's bucket, /lookup's scope — with the routes of
// --tls-client-routes (Router::CheckCaller: with --tokens-file the token's routes apply and its terminal must be
// the certificate's). Invariant: only a verified certificate with exactly one CN that is a terminal id
// ([A-Za-z0-9._-]{1,64}) yields a terminal; any other certificate yields none and its requests get 403.
// Use: Session, once per connection after its handshake.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <boost/system/error_code.hpp>
#include <openssl/ssl.h>

#include "server/http/auth.h"

namespace scangate::server {

struct ClientCertificate {
  // The certificate's terminal (its `hash` all zero: no token names it); null when the certificate cannot name
  // one (no CN, several, or not a terminal id): `problem` says why, for the 403's detail (never the CN itself).
  std::shared_ptr<const Terminal> terminal;
  std::string problem;
};

// The verified peer certificate of `ssl` as a terminal with `routes`. Call on the connection's thread after a
// successful server handshake with verification on (the handshake fails without a certificate).
ClientCertificate ClientCertificateOf(SSL* ssl, std::uint8_t routes);

// Turns client certificate verification off for one connection (the admin listener shares the main listener's
// context, but its probes present no certificate). Call before the handshake, on the connection's thread.
void NoClientCertificate(SSL* ssl);

// Whether a failed server handshake was the client certificate's fault (none sent, a chain that does not end at
// --tls-client-ca, expired, revoked): such refusals are counted (scangate_tls_client_certificate_refused_total).
// Pure; any thread.
bool IsClientCertificateRefusal(const boost::system::error_code& ec);

}  // namespace scangate::server
