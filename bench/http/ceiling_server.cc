// ceiling_server: the throughput ceiling of the HTTP stack scangate is built on, for the load benchmark.
// Same front as scangate (Beast, N io threads each with its own SO_REUSEPORT acceptor, keep-alive); every
// POST /observe is read in full and answered with a fixed 201 body. No JSON, no digest, no filter, no database.
// Usage: ceiling_server --port 8081 --threads 2
#include <iostream>
#include <string>

#include "http_front.h"

namespace {

using namespace bench_http;

// Byte-for-byte the shape of scangate's "new" answer, so both write the same amount.
const std::string kNewBody =
    R"({"verdict":"new","digest":")" + std::string(64, '0') + R"(","via":"filter"})";

void Handle(Request& req, const Reply& reply) {
  if (req.method() == http::verb::post && req.target() == "/observe") {
    reply(MakeResponse(http::status::created, kNewBody, req.version()));
    return;
  }
  reply(MakeResponse(http::status::not_found, R"({"error":"not-found"})", req.version()));
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Flags flags(argc, argv);
    const unsigned port = flags.GetUnsigned("port", 8081);
    const unsigned threads = flags.GetUnsigned("threads", 0);
    flags.CheckAllUsed();
    const Handler handler = [](Request& req, Reply reply) { Handle(req, reply); };
    return Serve(static_cast<unsigned short>(port), threads, handler);
  } catch (const std::exception& e) {
    std::cerr << "ceiling_server: " << e.what() << "\n";
    return 2;
  }
}
