#include "server/http/content_type.h"

#include <string_view>

#include "server/http/ascii.h"

namespace scangate::server {
namespace {

constexpr std::string_view kForm = "application/x-www-form-urlencoded";

// The media type of a Content-Type value: before any parameter, without the optional whitespace around it.
std::string_view MediaType(std::string_view content_type) {
  return TrimOws(content_type.substr(0, content_type.find(';')));
}

}  // namespace

std::optional<Problem> CheckContentType(std::string_view content_type) {
  const std::string_view media = MediaType(content_type);
  if (media.empty()) return std::nullopt;
  // Compared without case and without a lower-cased copy (one allocation per request less: issue 44).
  if (EqualsIgnoringAsciiCase(media, "application/json") || EqualsIgnoringAsciiCase(media, kForm)) {
    return std::nullopt;
  }
  constexpr std::string_view kApp = "application/";
  constexpr std::string_view kJsonSuffix = "+json";
  if (media.size() > kApp.size() + kJsonSuffix.size() &&
      EqualsIgnoringAsciiCase(media.substr(0, kApp.size()), kApp) &&
      EqualsIgnoringAsciiCase(media.substr(media.size() - kJsonSuffix.size()), kJsonSuffix)) {
    return std::nullopt;
  }
  return Problem::UnsupportedMediaType(content_type);
}

bool IsFormContentType(std::string_view content_type) {
  return EqualsIgnoringAsciiCase(MediaType(content_type), kForm);
}

}  // namespace scangate::server
