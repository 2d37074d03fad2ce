// SerializeResponse (server/http/response_wire.h) writes exactly the bytes Beast's own serializer writes for
// the same prepared response: status line (HTTP/1.1 and 1.0, a status Beast has no reason for), fields in
// order, an empty and a non-empty body.
#include "server/http/response_wire.h"

#include <sstream>
#include <string>

#include <boost/beast/http/write.hpp>
#include <gtest/gtest.h>

namespace {
namespace http = boost::beast::http;
using scangate::server::SerializeResponse;

std::string Beast(const http::response<http::string_body>& res) {
  std::ostringstream out;
  out << res;
  return out.str();
}

TEST(ResponseWire, SameBytesAsBeast) {
  std::string wire = "left over from the last answer";
  for (unsigned version : {11u, 10u}) {
    for (unsigned status : {201u, 200u, 429u, 503u, 599u}) {
      for (const std::string body : {"", R"({"digest":"ab","verdict":"new"})"}) {
        http::response<http::string_body> res{static_cast<http::status>(status), version};
        res.set(http::field::content_type, "application/json");
        res.set("Retry-After", "1");
        res.set(http::field::vary, "Origin");
        res.keep_alive(version == 11);
        res.body() = body;
        res.prepare_payload();
        SerializeResponse(res, wire);
        EXPECT_EQ(wire, Beast(res)) << "HTTP/1." << (version % 10) << " " << status;
      }
    }
  }
}

// The answer to a HEAD: Beast's bytes up to the end of the header, Content-Length still the body's, no body.
TEST(ResponseWire, HeadSendsTheHeaderOnly) {
  http::response<http::string_body> res{http::status::method_not_allowed, 11};
  res.set(http::field::content_type, "application/problem+json");
  res.body() = R"({"status":405})";
  res.prepare_payload();
  std::string wire;
  SerializeResponse(res, wire, /*head=*/true);
  const std::string full = Beast(res);
  EXPECT_EQ(wire, full.substr(0, full.size() - res.body().size()));
  EXPECT_NE(wire.find("Content-Length: 14\r\n"), std::string::npos) << wire;
  EXPECT_EQ(wire.substr(wire.size() - 4), "\r\n\r\n");
}

}  // namespace
