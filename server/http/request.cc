#include "server/http/request.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <cstdio>

#include <unicode/uchar.h>

#include <boost/json/monotonic_resource.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/parse_options.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include "core/utf8.h"
#include "server/http/content_type.h"
#include "server/http/json_members.h"
#include "server/http/unicode_nfc.h"

namespace scangate::server {
namespace json = boost::json;

namespace {

// Stack buffer for parsing a typical /observe body without touching the heap; larger bodies spill to the
// default resource through the monotonic resource's upstream.
constexpr std::size_t kParseArenaBytes = 4096;

// Number of Unicode code points of a string already validated as UTF-8 (Boost.JSON rejects invalid UTF-8).
std::size_t CodePoints(std::string_view s) {
  return static_cast<std::size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

// Parses `body` as JSON with the service's limits into storage `sp`; on any error sets `problem`.
json::value ParseJson(std::string_view body, json::storage_ptr sp, std::optional<Problem>& problem) {
  json::parse_options opts;
  opts.max_depth = kMaxJsonDepth;
  opts.allow_invalid_utf8 = false;  // the default, stated: invalid UTF-8 inside strings is a syntax error
  opts.allow_comments = false;
  opts.allow_trailing_commas = false;
  json::error_code ec;
  json::value out = json::parse(json::string_view(body.data(), body.size()), ec, std::move(sp), opts);
  if (ec) {
    if (body.empty()) {
      problem = Problem::MalformedJson("the request body is empty; a JSON object is required");
    } else if (ec == json::error::too_deep) {
      problem = Problem::MalformedJson("JSON nesting is deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    } else {
      problem = Problem::MalformedJson("the request body is not valid JSON (UTF-8): " + ec.message());
    }
    return out;
  }
  // A repeated member would be read one way here (Boost.JSON keeps the last) and another by a proxy (HAProxy's
  // json_query keeps the first): refused.
  if (const auto dup = FindDuplicateMember(body)) {
    problem = Problem::DuplicateMember(
        (dup->name.empty() ? std::string("a member") : "member \"" + dup->name + "\"") + " appears more than once in " +
        (dup->pointer.empty() ? std::string("the body's object") : "the object at " + dup->pointer) +
        "; JSON members must be unique");
  }
  return out;
}

// A keyboard-wedge scanner ends each scan with Enter: CR, LF or CR LF. Trailing ones are not part of the key
// (the same pack read by a serial scanner has none); anything else is kept byte for byte.
std::string_view TrimScannerNewline(std::string_view key) {
  while (!key.empty() && (key.back() == '\r' || key.back() == '\n')) key.remove_suffix(1);
  return key;
}

// Code points refused in a source, which is shown in /lookup answers, the dashboard and operators' terminals, so
// what they show must be all there is: controls (Cc: C0, DEL, C1 — terminal escape sequences), format characters
// (Cf: the bidirectional controls that reorder what an operator reads, "Trojan Source", CVE-2021-42574; zero-width
// space, joiners, word joiner, soft hyphen, BOM), the line and paragraph separators (U+2028, U+2029: a line break
// to a log or a JavaScript string), and every other default-ignorable code point (invisible: Hangul fillers,
// variation selectors, tags). ICU's Unicode data (the version Debian's libicu carries).
bool IsRefusedSourceCodePoint(char32_t c) {
  if (c < 0x80) return c < 0x20 || c == 0x7F;  // ASCII: the controls only (no ICU call on the common path)
  const auto cp = static_cast<UChar32>(c);
  const std::int8_t type = u_charType(cp);
  return type == U_CONTROL_CHAR || type == U_FORMAT_CHAR || type == U_LINE_SEPARATOR ||
         type == U_PARAGRAPH_SEPARATOR || u_hasBinaryProperty(cp, UCHAR_DEFAULT_IGNORABLE_CODE_POINT);
}

// The first refused code point of `s` (valid UTF-8), if any.
std::optional<char32_t> RefusedSourceCodePoint(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const std::size_t len = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    char32_t c = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    for (std::size_t k = 1; k < len && i + k < s.size(); ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    if (IsRefusedSourceCodePoint(c)) return c;
    i += len;
  }
  return std::nullopt;
}

std::string CodePointName(char32_t c) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "U+%04X", static_cast<unsigned>(c));
  return buf;
}

// Validates one key/source pair. `where` prefixes the detail ("" or "keys[3]: ").
std::optional<Problem> ValidateKey(std::string_view key, const std::string& where) {
  if (key.size() < kMinKeyBytes || key.size() > kMaxKeyBytes) {
    return Problem::InvalidKey(where + "\"key\" must be " + std::to_string(kMinKeyBytes) + ".." +
                               std::to_string(kMaxKeyBytes) + " bytes of UTF-8, got " + std::to_string(key.size()));
  }
  if (key.find('\0') != std::string_view::npos) {
    return Problem::InvalidKey(where + "\"key\" must not contain NUL (U+0000)");
  }
  if (!IsNfc(key)) {
    return Problem::InvalidKey(where + "\"key\" must be in Unicode normalization form C (NFC): the same text in "
                               "another form would be another key");
  }
  return std::nullopt;
}

std::optional<Problem> ValidateSource(std::string_view source, const std::string& where) {
  if (CodePoints(source) > kMaxSourceChars) {
    return Problem::InvalidSource(where + "\"source\" must be at most " + std::to_string(kMaxSourceChars) +
                                  " characters");
  }
  if (source.find('\0') != std::string_view::npos) {
    return Problem::InvalidSource(where + "\"source\" must not contain NUL (U+0000)");
  }
  if (const auto c = RefusedSourceCodePoint(source)) {
    return Problem::InvalidSource(where + "\"source\" must not contain control, formatting, line-separator or "
                                  "other invisible characters (found " + CodePointName(*c) + ")");
  }
  return std::nullopt;
}

// Reads {"key": string, "source"?: string|null} from an object; unknown members are ignored.
// The characters an idempotency key may hold: visible ASCII, and spaces when `quoted` (inside an sf-string).
std::optional<Problem> ValidateIdempotencyKey(std::string_view k, bool quoted, const std::string& where,
                                              std::string_view what) {
  if (k.empty() || k.size() > kMaxIdempotencyKeyBytes) {
    return Problem::InvalidIdempotencyKey(where + std::string(what) + " must hold 1.." +
                                          std::to_string(kMaxIdempotencyKeyBytes) + " characters");
  }
  for (const char c : k) {
    const auto u = static_cast<unsigned char>(c);
    if ((u >= 0x21 && u <= 0x7E && c != '"' && c != '\\') || (quoted && u == 0x20)) continue;
    return Problem::InvalidIdempotencyKey(where + std::string(what) +
                                          " may hold only visible ASCII characters (a UUID, say)");
  }
  return std::nullopt;
}

// `batch_entry`: a /observe/batch entry, whose "request_id" is its idempotency key (a single observation's is
// the Idempotency-Key header: the Router's).
std::variant<Observation, Problem> ObservationOf(const json::object& obj, const std::string& where,
                                                 bool batch_entry = false) {
  Observation o;
  const json::value* key = obj.if_contains("key");
  if (key == nullptr) return Problem::InvalidKey(where + "member \"key\" is required");
  const json::string* key_str = key->if_string();
  if (key_str == nullptr) return Problem::InvalidKey(where + "\"key\" must be a string");
  const std::string_view key_text = TrimScannerNewline(*key_str);
  if (auto p = ValidateKey(key_text, where)) return *std::move(p);
  o.key.assign(key_text);
  if (const json::value* src = obj.if_contains("source"); src != nullptr && !src->is_null()) {
    const json::string* src_str = src->if_string();
    if (src_str == nullptr) return Problem::InvalidSource(where + "\"source\" must be a string or null");
    if (auto p = ValidateSource(*src_str, where)) return *std::move(p);
    o.source.assign(src_str->data(), src_str->size());
  }
  if (const json::value* id = batch_entry ? obj.if_contains("request_id") : nullptr; id != nullptr && !id->is_null()) {
    const json::string* id_str = id->if_string();
    if (id_str == nullptr) return Problem::InvalidIdempotencyKey(where + "\"request_id\" must be a string or null");
    if (auto p = ValidateIdempotencyKey(*id_str, false, where, "\"request_id\"")) return *std::move(p);
    o.idempotency_key.assign(id_str->data(), id_str->size());
  }
  return o;
}

}  // namespace

namespace {
int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// WHATWG application/x-www-form-urlencoded percent-decoding of one name or value; nullopt on a bad escape
// (stricter than WHATWG, which passes it through: a client sending one has a bug worth reporting).
std::optional<std::string> FormDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '+') {
      out.push_back(' ');
    } else if (c == '%') {
      if (i + 2 >= s.size()) return std::nullopt;
      const int hi = HexValue(s[i + 1]);
      const int lo = HexValue(s[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// Strict UTF-8 check of a decoded form value (JSON strings get Boost.JSON's; form bytes arrive raw).
bool ValidUtf8(std::string_view s) { return IsValidUtf8(s); }
}  // namespace

std::variant<Observation, Problem> ParseObserveForm(std::string_view body) {
  std::optional<std::string> key;
  std::optional<std::string> source;
  std::size_t start = 0;
  while (start <= body.size()) {
    std::size_t end = body.find('&', start);
    if (end == std::string_view::npos) end = body.size();
    const std::string_view pair = body.substr(start, end - start);
    start = end + 1;
    if (pair.empty()) continue;
    const std::size_t eq = pair.find('=');
    const auto name = FormDecode(pair.substr(0, eq));
    const auto value = FormDecode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1));
    if (!name || !value) return Problem::MalformedForm("the form body has an invalid %-escape");
    std::optional<std::string>* slot = *name == "key" ? &key : *name == "source" ? &source : nullptr;
    if (slot == nullptr) continue;
    if (slot->has_value()) return Problem::MalformedForm("form field \"" + *name + "\" is given more than once");
    if (!ValidUtf8(*value)) return Problem::MalformedForm("form field \"" + *name + "\" is not valid UTF-8");
    *slot = *value;
  }
  if (!key) return Problem::InvalidKey("form field \"key\" is required");
  key->resize(TrimScannerNewline(*key).size());
  if (auto p = ValidateKey(*key, "")) return *std::move(p);
  Observation o;
  o.key = *std::move(key);
  if (source) {
    if (auto p = ValidateSource(*source, "")) return *std::move(p);
    o.source = *std::move(source);
  }
  return o;
}

std::variant<Observation, Problem> ParseObservation(std::string_view body, std::string_view content_type) {
  if (IsFormContentType(content_type)) {
    const std::size_t first = body.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos || body[first] != '{') return ParseObserveForm(body);
  }
  return ParseObserve(body);
}

std::variant<Observation, Problem> ParseObserve(std::string_view body) {
  std::array<unsigned char, kParseArenaBytes> arena;
  json::monotonic_resource mr(arena.data(), arena.size());
  std::optional<Problem> problem;
  const json::value v = ParseJson(body, &mr, problem);
  if (problem) return *std::move(problem);
  const json::object* obj = v.if_object();
  if (obj == nullptr) return Problem::InvalidKey("the request body must be a JSON object with a string member \"key\"");
  return ObservationOf(*obj, "");
}

std::variant<std::string, Problem> ParseIdempotencyKey(std::string_view header) {
  const bool quoted = header.size() >= 2 && header.front() == '"' && header.back() == '"';
  if (quoted) header = header.substr(1, header.size() - 2);
  if (auto p = ValidateIdempotencyKey(header, quoted, "", "the Idempotency-Key header")) return *std::move(p);
  return std::string(header);
}

std::variant<BatchRequest, Problem> ParseBatch(std::string_view body) {
  std::array<unsigned char, kParseArenaBytes> arena;
  json::monotonic_resource mr(arena.data(), arena.size());
  std::optional<Problem> problem;
  const json::value v = ParseJson(body, &mr, problem);
  if (problem) return *std::move(problem);
  const json::object* obj = v.if_object();
  if (obj == nullptr) return Problem::InvalidBatch("the request body must be a JSON object with an array member \"keys\"");
  const json::value* keys = obj->if_contains("keys");
  if (keys == nullptr) return Problem::InvalidBatch("member \"keys\" is required");
  const json::array* arr = keys->if_array();
  if (arr == nullptr) return Problem::InvalidBatch("\"keys\" must be an array");
  if (arr->size() < kMinBatchEntries || arr->size() > kMaxBatchEntries) {
    return Problem::InvalidBatch("\"keys\" must hold " + std::to_string(kMinBatchEntries) + ".." +
                                 std::to_string(kMaxBatchEntries) + " entries, got " + std::to_string(arr->size()));
  }
  BatchRequest batch;
  batch.entries.reserve(arr->size());
  for (std::size_t i = 0; i < arr->size(); ++i) {
    const json::value& e = (*arr)[i];
    const std::string where = "keys[" + std::to_string(i) + "]: ";
    if (const json::string* s = e.if_string()) {
      const std::string_view key_text = TrimScannerNewline(*s);
      if (auto p = ValidateKey(key_text, where)) return *std::move(p);
      batch.entries.push_back(Observation{std::string(key_text), {}, {}, {}});
    } else if (const json::object* o = e.if_object()) {
      auto r = ObservationOf(*o, where, /*batch_entry=*/true);
      if (auto* p = std::get_if<Problem>(&r)) return std::move(*p);
      batch.entries.push_back(std::get<Observation>(std::move(r)));
    } else {
      return Problem::InvalidBatch(where + "an entry must be a string or an object {\"key\", \"source\", \"request_id\"}");
    }
  }
  return batch;
}

}  // namespace scangate::server
