#include "server/http/sweeper.h"

#include <boost/system/error_code.hpp>

#include "server/http/worker.h"

namespace scangate::server {

void Sweep(HttpServer::Worker& w) {
  w.sweep.expires_after(kSweepInterval);
  w.sweep.async_wait([&w](boost::system::error_code ec) {
    if (ec) return;
    w.now = std::chrono::steady_clock::now();
    // Closing never destroys a session here (its pending handler holds it): iterating the set is safe.
    for (SessionBase* s : w.sessions) s->CloseIfExpired(w.now);
    Sweep(w);
  });
}

}  // namespace scangate::server
