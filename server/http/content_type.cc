#include "server/http/content_type.h"

#include <string_view>

#include "server/http/ascii.h"

namespace scangate::server {

std::optional<Problem> CheckContentType(std::string_view content_type) {
  std::string_view media = content_type.substr(0, content_type.find(';'));
  media = TrimOws(media);
  if (media.empty()) return std::nullopt;
  // Compared without case and without a lower-cased copy (one allocation per request less: issue 44).
  if (EqualsIgnoringAsciiCase(media, "application/json") ||
      EqualsIgnoringAsciiCase(media, "application/x-www-form-urlencoded")) {
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
  return EqualsIgnoringAsciiCase(TrimOws(content_type.substr(0, content_type.find(';'))), "application/x-www-form-urlencoded");
}

}  // namespace scangate::server
