// Tests server/http/route.h: targets to routes (exact paths, the query string ignored), each route's method, body
// limit and kind (client or operational).
#include "server/http/route.h"

#include <gtest/gtest.h>

namespace scangate::server {
namespace {

// Routes are exact paths; the query string is ignored; anything else is not found.
TEST(Route, RouteOf) {
  EXPECT_EQ(RouteOf("/observe"), Route::kObserve);
  EXPECT_EQ(RouteOf("/observe?x=1"), Route::kObserve);
  EXPECT_EQ(RouteOf("/observe/batch"), Route::kObserveBatch);
  EXPECT_EQ(RouteOf("/healthz"), Route::kHealthz);
  EXPECT_EQ(RouteOf("/readyz"), Route::kReadyz);
  EXPECT_EQ(RouteOf("/metrics"), Route::kMetrics);
  EXPECT_EQ(RouteOf("/stats"), Route::kStats);
  EXPECT_EQ(RouteOf("/dashboard"), Route::kDashboard);
  EXPECT_EQ(RouteOf("/observe/"), Route::kNotFound);
  EXPECT_EQ(RouteOf("/"), Route::kNotFound);
  EXPECT_EQ(RouteOf(""), Route::kNotFound);
  EXPECT_EQ(AllowedMethod(Route::kObserve), "POST");
  EXPECT_EQ(AllowedMethod(Route::kMetrics), "GET");
  EXPECT_EQ(BodyLimitFor(Route::kObserve), 16u * 1024);
  EXPECT_EQ(BodyLimitFor(Route::kObserveBatch), 1024u * 1024);
}

// Issue 43: the operational routes and unknown paths take no body; HEAD is served where GET is.
TEST(Route, MethodsAndBodies) {
  EXPECT_EQ(BodyLimitFor(Route::kHealthz), 0u);
  EXPECT_EQ(BodyLimitFor(Route::kNotFound), 0u);
  EXPECT_TRUE(MethodAllowed(Route::kMetrics, "GET"));
  EXPECT_TRUE(MethodAllowed(Route::kMetrics, "HEAD"));
  EXPECT_FALSE(MethodAllowed(Route::kMetrics, "POST"));
  EXPECT_TRUE(MethodAllowed(Route::kObserve, "POST"));
  EXPECT_FALSE(MethodAllowed(Route::kObserve, "HEAD"));
  EXPECT_FALSE(MethodAllowed(Route::kObserve, "post"));
  EXPECT_EQ(AllowHeader(Route::kObserve), "POST");
  EXPECT_EQ(AllowHeader(Route::kReadyz), "GET, HEAD");
}

TEST(Route, LookupRoute) {
  EXPECT_EQ(RouteOf("/lookup"), Route::kLookup);
  EXPECT_EQ(RouteOf("/lookup?key=x"), Route::kLookup);
  EXPECT_EQ(AllowedMethod(Route::kLookup), "POST");
  EXPECT_EQ(RouteLabel(Route::kLookup), "/lookup");
  EXPECT_EQ(BodyLimitFor(Route::kLookup), kMaxObserveBodyBytes);
  EXPECT_TRUE(IsClientRoute(Route::kLookup));
  EXPECT_FALSE(IsAdminRoute(Route::kLookup));
}

}  // namespace
}  // namespace scangate::server
