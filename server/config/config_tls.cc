// --tls-cert, --tls-key, --admin-tls and mTLS (--tls-client-ca, --tls-crl, --tls-client-routes): checked at
// start-up so that a typo or a missing half fails with exit 2 naming the flag; the PEM contents are loaded (and
// reloaded on SIGHUP) by server/http/tls_context.cc. Kept apart from config.cc, which owns the option table.
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>

#include "server/config/config.h"
#include "server/http/auth.h"

namespace scangate::server {
namespace {

void CheckReadable(const std::string& path, std::string_view option) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError("--" + std::string(option) + ": cannot read '" + path + "'");
}

}  // namespace

void ParseTls(const TlsFlags& f, Config& c) {
  c.tls_cert = f.cert;
  c.tls_key = f.key;
  if (c.tls_cert.empty() != c.tls_key.empty()) throw ConfigError("--tls-cert and --tls-key must be given together");
  if (c.tls()) {  // readable now, so a typo fails at start-up (the PEM contents are checked by HttpServer)
    CheckReadable(c.tls_cert, "tls-cert");
    CheckReadable(c.tls_key, "tls-key");
  }
  if (c.admin_tls && (!c.tls() || !c.admin_split())) {
    throw ConfigError("--admin-tls: needs --tls-cert/--tls-key (the certificate it serves) and --admin-listen");
  }
  c.tls_client_ca = f.client_ca;
  c.tls_crl = f.crl;
  if (c.mtls()) {
    if (!c.tls()) throw ConfigError("--tls-client-ca: needs --tls-cert/--tls-key (client certificates are asked "
                                    "for in the TLS handshake)");
    CheckReadable(c.tls_client_ca, "tls-client-ca");
  }
  if (!c.tls_crl.empty()) {
    if (!c.mtls()) throw ConfigError("--tls-crl: needs --tls-client-ca (the CRLs are of the client certificates' CAs)");
    CheckReadable(c.tls_crl, "tls-crl");
  }
  const auto routes = ParseRoutes(f.client_routes);
  if (!routes) {
    throw ConfigError("--tls-client-routes: expected a comma-separated subset of observe,batch,lookup,audit, got '" +
                      f.client_routes + "'");
  }
  c.tls_client_routes = *routes;
  if (*routes != kDefaultRoutes && (!c.mtls() || !c.tokens_file.empty())) {
    throw ConfigError("--tls-client-routes: only with --tls-client-ca and without --tokens-file (with tokens, a "
                      "token's routes apply)");
  }
}

}  // namespace scangate::server
