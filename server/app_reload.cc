// App's SIGHUP work (server/app.h): the tokens file and the TLS certificate read again while serving, each
// keeping what is in force when the new one fails. Apart from app.cc, which owns start-up, serving and shutdown.
#include <exception>

#include "server/app.h"
#include "server/http/http_server.h"
#include "server/http/router.h"
#include "server/log.h"

namespace scangate::server {

// SIGHUP: the tokens file again. A file that fails keeps the tokens in force; the log names the file and the
// line, never a token or a hash (server/http/token_store.h).
void App::ReloadTokens() {
  if (config_.tokens_file.empty()) {
    Log(LogLevel::kInfo, "tokens_reload", {{"result", "ignored"}, {"reason", "no --tokens-file"}});
    return;
  }
  if (!router_) {
    Log(LogLevel::kWarn, "tokens_reload", {{"result", "ignored"}, {"reason", "not serving yet"}});
    return;
  }
  try {
    const std::size_t n = router_->ReloadTokens();
    Log(LogLevel::kInfo, "tokens_reload", {{"result", "reloaded"}, {"file", config_.tokens_file}, {"tokens", n}});
  } catch (const std::exception& e) {
    Log(LogLevel::kError, "tokens_reload", {{"result", "kept the previous tokens"}, {"error", e.what()}});
  }
}

// SIGHUP: --tls-cert and --tls-key again (a renewed certificate) for new connections; open ones keep theirs. A
// certificate or key that fails (unreadable, not matching) keeps the one in force; the log says why.
void App::ReloadTls() {
  if (!config_.tls() || !server_) return;
  try {
    server_->ReloadTls();
    Log(LogLevel::kInfo, "tls_reload", {{"result", "reloaded"}, {"cert", config_.tls_cert}});
  } catch (const std::exception& e) {
    Log(LogLevel::kError, "tls_reload", {{"result", "kept the previous certificate"}, {"error", e.what()}});
  }
}

}  // namespace scangate::server
