#include "server/http/content_type.h"

#include <cstddef>
#include <string_view>

namespace scangate::server {

namespace {

// ASCII case-insensitive equality, without a lower-cased copy. Not beast::iequals: Boost 1.81's reads one byte
// past both views when they differ in case only (found by fuzz_request under ASan: a header value at the end of
// its buffer).
bool IEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::optional<Problem> CheckContentType(std::string_view content_type) {
  std::string_view media = content_type.substr(0, content_type.find(';'));
  media = Trim(media);
  if (media.empty()) return std::nullopt;
  // Compared without case and without a lower-cased copy (one allocation per request less: issue 44).
  if (IEquals(media, "application/json") || IEquals(media, "application/x-www-form-urlencoded")) return std::nullopt;
  constexpr std::string_view kApp = "application/";
  constexpr std::string_view kJsonSuffix = "+json";
  if (media.size() > kApp.size() + kJsonSuffix.size() && IEquals(media.substr(0, kApp.size()), kApp) &&
      IEquals(media.substr(media.size() - kJsonSuffix.size()), kJsonSuffix)) {
    return std::nullopt;
  }
  return Problem::UnsupportedMediaType(content_type);
}

bool IsFormContentType(std::string_view content_type) {
  return IEquals(Trim(content_type.substr(0, content_type.find(';'))), "application/x-www-form-urlencoded");
}

}  // namespace scangate::server
