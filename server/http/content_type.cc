#include "server/http/content_type.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace scangate::server {

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
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
  const std::string m = Lower(media);
  if (m == "application/json" || m == "application/x-www-form-urlencoded") return std::nullopt;
  constexpr std::string_view kApp = "application/";
  constexpr std::string_view kJsonSuffix = "+json";
  if (m.size() > kApp.size() + kJsonSuffix.size() && m.starts_with(kApp) && m.ends_with(kJsonSuffix)) {
    return std::nullopt;
  }
  return Problem::UnsupportedMediaType(content_type);
}

bool IsFormContentType(std::string_view content_type) {
  return Lower(Trim(content_type.substr(0, content_type.find(';')))) == "application/x-www-form-urlencoded";
}

}  // namespace scangate::server
