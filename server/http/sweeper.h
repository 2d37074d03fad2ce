// The per-worker connection-timeout sweeper: every kSweepInterval, on the worker's thread, it reads the clock
// once into Worker::now and closes the sessions whose deadline has passed (SessionBase::CloseIfExpired).
// Invariant: a session's deadline is Worker::now + its timeout + kSweepInterval, so a timeout never fires
// early and at most ~2 intervals late. Use: HttpServer::Start starts one per worker; sessions
// (server/http/session.h) set their deadlines from it. The worker it sweeps is server/http/worker.h.
#pragma once

#include <chrono>

#include "server/http/http_server.h"

namespace scangate::server {

// Connection timeouts are deadlines a per-worker sweeper checks this often, not a timer per read and write:
// Beast's stream timeouts armed, cancelled and completed a timer around every operation (4-9 % of the
// server's CPU, bench/RESULTS-history.md "Connection timeouts by a sweeper"). A deadline is set from the sweeper's
// last reading of the clock plus one interval, so a timeout never fires early and at most ~2 intervals late.
inline constexpr auto kSweepInterval = std::chrono::milliseconds(250);

// Every kSweepInterval on the worker's thread: reads the clock once and closes the sessions past their
// deadline. Runs until Stop() stops the io_context.
void Sweep(HttpServer::Worker& w);

}  // namespace scangate::server
