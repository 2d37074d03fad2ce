// Tests server/http/content_type.h: which media types a request body may have (415 for the others), and which
// are read as a form.
#include "server/http/content_type.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string_view>

namespace scangate::server {
namespace {

// JSON media types, form encoding (curl -d) and no Content-Type are read as JSON; others are 415.
TEST(ContentType, JsonFormAndNoneAreReadOthersAre415) {
  EXPECT_FALSE(CheckContentType(""));
  EXPECT_FALSE(CheckContentType("application/json"));
  EXPECT_FALSE(CheckContentType("Application/JSON; charset=utf-8"));
  EXPECT_FALSE(CheckContentType("application/problem+json"));
  EXPECT_FALSE(CheckContentType("application/vnd.scan+json ; q=1"));
  EXPECT_FALSE(CheckContentType("application/x-www-form-urlencoded"));
  for (const char* bad : {"text/plain", "application/xml", "multipart/form-data; boundary=x", "application/+json",
                          "text/json", "application/jsonx"}) {
    auto p = CheckContentType(bad);
    ASSERT_TRUE(p) << bad;
    EXPECT_EQ(p->status, 415u);
    EXPECT_EQ(p->slug, "unsupported-media-type");
  }
}

// The form type is recognised with any parameters and in any case; the no-cors fetch default (text/plain) and
// multipart stay refused.
TEST(ContentType, FormIsRecognisedTextAndMultipartAreNot) {
  EXPECT_TRUE(IsFormContentType("application/x-www-form-urlencoded; charset=UTF-8"));
  EXPECT_TRUE(IsFormContentType("Application/X-WWW-Form-Urlencoded"));
  EXPECT_FALSE(IsFormContentType("application/json"));
  EXPECT_TRUE(CheckContentType("text/plain;charset=UTF-8").has_value());
  EXPECT_TRUE(CheckContentType("multipart/form-data; boundary=x").has_value());
}

// A header value that ends its buffer and differs from a known type in case only: compared without reading past
// its end (Boost 1.81's beast::iequals read one byte more; the ASan build of this test catches that).
TEST(ContentType, CaseOnlyDifferenceAtTheEndOfItsBufferReadsNoFurther) {
  for (const std::string_view text : {std::string_view("application/JSON"), std::string_view("Application/Vnd.X+JSON"),
                                      std::string_view("application/x-www-form-URLENCODED")}) {
    const auto buf = std::make_unique<char[]>(text.size());  // exactly the value's bytes: nothing after it
    std::memcpy(buf.get(), text.data(), text.size());
    const std::string_view value(buf.get(), text.size());
    EXPECT_FALSE(CheckContentType(value)) << text;
    EXPECT_EQ(IsFormContentType(value), text.starts_with("application/x-www")) << text;
  }
}

}  // namespace
}  // namespace scangate::server
