#include "server/http/request_parser.h"

#include <algorithm>
#include <string>

#include <boost/asio/error.hpp>
#include <boost/beast/http/error.hpp>

namespace scangate::server {
namespace http = boost::beast::http;

namespace {

class FramingCategoryImpl final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "scangate.framing"; }
  std::string message(int ev) const override {
    switch (static_cast<FramingError>(ev)) {
      case FramingError::kSecondHost: return "more than one Host header field";
      case FramingError::kTrailer: return "trailer fields are not accepted";
      case FramingError::kChunkExtensions: return "chunk extensions too long";
    }
    return "framing error";
  }
};

bool IsHttpError(const boost::system::error_code& ec) {
  return &ec.category() == &http::make_error_code(http::error::bad_target).category();
}

}  // namespace

const boost::system::error_category& FramingCategory() {
  static const FramingCategoryImpl category;
  return category;
}

boost::system::error_code make_error_code(FramingError e) { return {static_cast<int>(e), FramingCategory()}; }

RequestParser::RequestParser() = default;

void RequestParser::on_request_impl(http::verb method, string_view method_str, string_view target, int version,
                                    error_code& ec) {
  ec = {};
  m_.target(target);
  if (method != http::verb::unknown) {
    m_.method(method);
  } else {
    m_.method_string(method_str);
  }
  m_.version(version);
}

void RequestParser::on_field_impl(http::field name, string_view name_string, string_view value, error_code& ec) {
  // basic_parser calls this for the trailer section too, after the body: refused, never merged into the request.
  if (is_header_done()) {
    ec = FramingError::kTrailer;
    return;
  }
  if (name == http::field::host) {
    if (host_seen_) {
      ec = FramingError::kSecondHost;
      return;
    }
    host_seen_ = true;
  }
  m_.insert(name, name_string, value);
}

void RequestParser::on_header_impl(error_code& ec) { ec = {}; }

void RequestParser::on_body_init_impl(const boost::optional<std::uint64_t>& content_length, error_code& ec) {
  // The transport refuses a longer Content-Length before reading (413); this keeps the parser from reserving it
  // whatever the caller checked.
  if (content_length && *content_length > route_limit_) {
    ec = http::error::body_limit;
    return;
  }
  body_.init(content_length, ec);
}

std::size_t RequestParser::on_body_impl(string_view body, error_code& ec) {
  return body_.put(boost::asio::buffer(body.data(), body.size()), ec);
}

void RequestParser::on_chunk_header_impl(std::uint64_t, string_view extensions, error_code& ec) {
  extension_bytes_ += extensions.size();
  ec = {};
  if (extension_bytes_ > kMaxChunkExtensionBytes) ec = FramingError::kChunkExtensions;
}

std::size_t RequestParser::on_chunk_body_impl(std::uint64_t, string_view body, error_code& ec) {
  return body_.put(boost::asio::buffer(body.data(), body.size()), ec);
}

void RequestParser::on_finish_impl(error_code& ec) { body_.finish(ec); }

std::optional<Problem> ReadProblem(const boost::system::error_code& ec) {
  if (ec == http::error::header_limit) return Problem::HeaderTooLarge();
  if (ec == http::error::buffer_overflow) {
    // The header cannot overflow (431 comes first): a chunk-size line or the trailer section did not fit.
    return Problem::BadRequest("a chunk-size line (with its extensions) or the trailer section exceeds " +
                               std::to_string(kReadBufferBytes) + " bytes");
  }
  if (ec == FramingError::kSecondHost) {
    return Problem::BadRequest("the request has more than one Host header field (RFC 9112 section 3.2)");
  }
  if (ec == FramingError::kTrailer) {
    return Problem::BadRequest("trailer fields are not accepted: end a chunked body with an empty trailer section");
  }
  if (ec == FramingError::kChunkExtensions) {
    return Problem::BadRequest("chunk extensions exceed " + std::to_string(kMaxChunkExtensionBytes) +
                               " bytes in all; send none");
  }
  // Any other parse error is bad HTTP; partial_message is a client gone mid-request (no one to answer).
  if (IsHttpError(ec) && ec != http::error::partial_message && ec != http::error::end_of_stream &&
      ec != http::error::body_limit) {
    return Problem::BadRequest("the request is not valid HTTP/1.1: " + ec.message());
  }
  return std::nullopt;
}

}  // namespace scangate::server
