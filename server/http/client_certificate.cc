#include "server/http/client_certificate.h"

#include <boost/asio/ssl/error.hpp>
#include <openssl/err.h>
#include <openssl/x509.h>

namespace scangate::server {

ClientCertificate ClientCertificateOf(SSL* ssl, std::uint8_t routes) {
  ClientCertificate out;
  // get0: borrowed, lives as long as the connection's session.
  X509* cert = SSL_get0_peer_certificate(ssl);
  if (cert == nullptr || SSL_get_verify_result(ssl) != X509_V_OK) {
    out.problem = "the client certificate was not verified";
    return out;
  }
  const X509_NAME* subject = X509_get_subject_name(cert);
  const int at = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  if (at < 0 || X509_NAME_get_index_by_NID(subject, NID_commonName, at) >= 0) {
    out.problem = "the client certificate's subject must hold exactly one CN, the terminal id";
    return out;
  }
  const ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, at));
  unsigned char* utf8 = nullptr;
  const int n = ASN1_STRING_to_UTF8(&utf8, data);
  std::string cn = n > 0 ? std::string(reinterpret_cast<const char*>(utf8), static_cast<std::size_t>(n)) : "";
  OPENSSL_free(utf8);
  if (!IsTerminalId(cn)) {
    out.problem = "the client certificate's CN is not a terminal id (1-" + std::to_string(kMaxTerminalIdChars) +
                  " characters of A-Z a-z 0-9 . _ -)";
    return out;
  }
  auto t = std::make_shared<Terminal>();
  t->id = std::move(cn);
  t->routes = routes;
  out.terminal = std::move(t);
  return out;
}

void NoClientCertificate(SSL* ssl) { SSL_set_verify(ssl, SSL_VERIFY_NONE, nullptr); }

bool IsClientCertificateRefusal(const boost::system::error_code& ec) {
  if (ec.category() != boost::asio::error::get_ssl_category()) return false;
  const int reason = ERR_GET_REASON(static_cast<unsigned long>(ec.value()));
  return reason == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE || reason == SSL_R_CERTIFICATE_VERIFY_FAILED;
}

}  // namespace scangate::server
