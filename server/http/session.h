// One HTTP connection, in Boost.Beast's example shape: one session object per connection
// (enable_shared_from_this), do_x/on_x pairs, error_code on the I/O path and a single Fail(). A session lives
// entirely on its worker's thread (server/http/worker.h) and registers there, so the shutdown and the
// connection-timeout sweeper (server/http/sweeper.h) can reach it. Invariant: every request gets exactly one
// response (or the connection closes without one on a timeout or shutdown), every abusable limit is explicit,
// and exceptions never escape into Asio. What a request means is server/http/router.h, asked once after the
// header and once after the body. Use: the listener (server/http/http_server.cc) starts one per accepted socket.
#pragma once

#include <boost/asio/ip/address.hpp>

#include "server/http/connection_limit.h"
#include "server/http/http_server.h"
#include "server/http/router.h"
#include "server/http/worker.h"

namespace scangate::server {

// On the worker's thread: starts the session of an accepted socket, over TLS on the main listener when
// --tls-cert is set (HttpServer::Shared::tls), plain HTTP otherwise. The session keeps itself alive through
// its pending operations and ends with the connection.
// `peer`: the address accept() returned (never asked of the socket again). `slot`: the client address's connection
// slot the accept took; the session gives back exactly that when it ends. `proxied`: the peer is in
// --proxy-protocol-from (`slot` is empty); the session reads the PROXY v2 header first and takes its client's
// slot then.
void StartSession(HttpServer::Worker& w, Listener listener, PlainSocket socket, const boost::asio::ip::address& peer,
                  ConnectionLimiter::Slot slot, bool proxied);

}  // namespace scangate::server
