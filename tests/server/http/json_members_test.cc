// Tests server/http/json_members.h: every repeated member name is found, at any depth, compared after
// unescaping; the location names only indices and the service's own member names; distinct names (and the
// same name in different objects) pass; a huge object stays linear.
#include "server/http/json_members.h"

#include <gtest/gtest.h>

#include <string>

namespace scangate::server {
namespace {

TEST(JsonMembers, UniqueMembersPass) {
  for (const char* body : {R"({"key":"A"})", R"({"key":"A","source":"t1"})", R"({"keys":["a",{"key":"b"},{"key":"c"}]})",
                           R"([{"key":"a"},{"key":"a"}])", R"({"a":{"key":1},"b":{"key":2}})", R"("key")", "[]", "{}",
                           R"({"Key":"A","key":"B"})"}) {
    EXPECT_FALSE(FindDuplicateMember(body).has_value()) << body;
  }
}

TEST(JsonMembers, TopLevelDuplicateIsNamed) {
  const auto d = FindDuplicateMember(R"({"key":"A","key":"B"})");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->name, "key");
  EXPECT_EQ(d->pointer, "");
  const auto s = FindDuplicateMember(R"({"key":"A","source":"x","source":"y"})");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->name, "source");
}

// "\u006bey" is "key": Boost.JSON and HAProxy both unescape before comparing.
TEST(JsonMembers, ComparedAfterUnescaping) {
  const auto d = FindDuplicateMember(R"({"key":"A","\u006bey":"B"})");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->name, "key");
}

TEST(JsonMembers, BatchEntryIsLocated) {
  const auto d = FindDuplicateMember(R"({"keys":["a",{"key":"b"},{"key":"c","key":"d"}]})");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->name, "key");
  EXPECT_EQ(d->pointer, "/keys/2");
}

// A client's own member names are neither named nor put in the pointer.
TEST(JsonMembers, ForeignNamesAreNotEchoed) {
  const auto d = FindDuplicateMember(R"({"secret-1234":{"x":1,"x":2}})");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->name, "");
  EXPECT_EQ(d->pointer, "/*");
  EXPECT_EQ(d->pointer.find("secret"), std::string::npos);
}

// Past the linear threshold names go to a hash set: a duplicate far in is still found among 100 000 distinct
// members (a quadratic scan would take minutes here and meet ctest's timeout).
TEST(JsonMembers, LargeObjects) {
  std::string body = "{";
  for (int i = 0; i < 100000; ++i) body += "\"m" + std::to_string(i) + "\":0,";
  std::string dup = body + "\"m99999\":1}";
  body.back() = '}';
  EXPECT_FALSE(FindDuplicateMember(body).has_value());
  const auto d = FindDuplicateMember(dup);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->name, "");
}

}  // namespace
}  // namespace scangate::server
