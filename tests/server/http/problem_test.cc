// Tests server/http/problem.h: RFC 9457 bodies with the urn:scangate:problem: type, statuses and slugs, and that
// details never echo client input.
#include "server/http/problem.h"

#include <gtest/gtest.h>

#include <string>

#include <boost/json/parse.hpp>

namespace scangate::server {
namespace {
namespace json = boost::json;

// Problem bodies follow RFC 9457 with the urn:scangate:problem: type; details never echo client input.
TEST(Problem, Body) {
  const Problem p = Problem::MethodNotAllowed("DELETE", Route::kHealthz);
  const json::value v = json::parse(ProblemBody(p));
  EXPECT_EQ(v.at("type").as_string(), "urn:scangate:problem:method-not-allowed");
  EXPECT_EQ(v.at("status").as_int64(), 405);
  EXPECT_EQ(v.at("title").as_string(), "Method not allowed");
  EXPECT_FALSE(v.at("detail").as_string().empty());
  EXPECT_EQ(Problem::NotFound("/secret-key-123").detail.find("secret-key-123"), std::string::npos);
  EXPECT_EQ(Problem::UnsupportedMediaType("text/secret").detail.find("secret"), std::string::npos);
  EXPECT_EQ(Problem::BodyTooLarge(16384).status, 413u);
  EXPECT_EQ(Problem::HeaderTooLarge().status, 431u);
  EXPECT_EQ(Problem::Unavailable("x").status, 503u);
  EXPECT_EQ(Problem::OutcomeUnknown("x").status, 503u);  // http_server adds Retry-After to every 503
  EXPECT_EQ(json::parse(ProblemBody(Problem::OutcomeUnknown("x"))).at("type").as_string(),
            "urn:scangate:problem:outcome-unknown");
  EXPECT_EQ(Problem::Internal().status, 500u);
  // A hostile method string is not echoed verbatim.
  EXPECT_EQ(Problem::MethodNotAllowed("P\"{<", Route::kObserve).detail.find('"'), std::string::npos);
}

TEST(Problem, Statuses) {
  EXPECT_EQ(Problem::OriginNotAllowed().status, 403u);
  EXPECT_EQ(Problem::OriginNotAllowed().slug, "origin-not-allowed");
  EXPECT_EQ(Problem::NotRecorded().status, 404u);
  EXPECT_EQ(Problem::NotRecorded().slug, "not-recorded");
}

TEST(Problem, DuplicateMember) {
  const Problem p = Problem::DuplicateMember("member \"key\" appears more than once in the body's object");
  EXPECT_EQ(p.status, 400u);
  EXPECT_EQ(json::parse(ProblemBody(p)).at("type").as_string(), "urn:scangate:problem:duplicate-member");
}

}  // namespace
}  // namespace scangate::server
