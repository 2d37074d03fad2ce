// The GS1 Digital Link reader of core/gs1_elements.h (GS1 Digital Link URI syntax 1.2, uncompressed form):
//   http(s)://{any host}/{optional path prefix}/01/{gtin}[/{ai}/{value}]...[?{ai}={value}&...][#...]
// The primary key is the first "01" (or the convenience name "gtin") segment that is followed by a numeric
// segment and an even number of segments to the end of the path; its GTIN-8/12/13 is left-padded to 14
// digits. Path qualifiers (22, 10, 21, 235 in the standard) are accepted in any order; query keys that are
// numeric are AIs, other keys (linkType, utm_*, …) are ignored. Values are percent-decoded; '+' stays '+'.
#include <array>
#include <cstring>
#include <string>

#include "core/gs1_elements.h"

namespace scangate::gs1::detail {
namespace {

constexpr std::size_t kMaxSegments = 2 * kMaxElements + 16;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool AllDigits(std::string_view s) {
  for (char c : s)
    if (!IsDigit(c)) return false;
  return !s.empty();
}
char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
bool EqualsNoCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (Lower(a[i]) != Lower(b[i])) return false;
  return true;
}
int Hex(char c) {
  if (IsDigit(c)) return c - '0';
  c = Lower(c);
  return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

// The AI a path segment names: its digits, or the AI of a convenience name (DL 1.1 path names); "" if neither.
std::string_view PathAi(std::string_view seg) {
  if (AllDigits(seg) && seg.size() >= 2 && seg.size() <= 4) return seg;
  if (EqualsNoCase(seg, "gtin")) return "01";
  if (EqualsNoCase(seg, "cpv")) return "22";
  if (EqualsNoCase(seg, "lot")) return "10";
  if (EqualsNoCase(seg, "ser")) return "21";
  return {};
}

// Percent-decodes `raw` into `scratch`; nullopt on a malformed escape or a full buffer.
std::optional<std::string_view> Decode(std::string_view raw, ScratchBuffer& scratch) {
  if (raw.find('%') == std::string_view::npos) return raw;  // the common case: no copy
  char* const out = scratch.data.data() + scratch.used;
  std::size_t n = 0;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    if (n == scratch.room()) return std::nullopt;
    if (raw[i] != '%') {
      out[n++] = raw[i];
      continue;
    }
    if (raw.size() - i < 3 || Hex(raw[i + 1]) < 0 || Hex(raw[i + 2]) < 0) return std::nullopt;
    out[n++] = static_cast<char>(Hex(raw[i + 1]) * 16 + Hex(raw[i + 2]));
    i += 2;
  }
  scratch.used += n;
  return std::string_view(out, n);
}

// A GTIN-8/12/13 as GTIN-14 (in `scratch`); other values unchanged (their length is checked later).
std::optional<std::string_view> PadGtin(std::string_view v, ScratchBuffer& scratch) {
  if (!AllDigits(v) || !(v.size() == 8 || v.size() == 12 || v.size() == 13)) return v;
  if (scratch.room() < 14) return std::nullopt;
  char* const out = scratch.data.data() + scratch.used;
  std::memset(out, '0', 14 - v.size());
  std::memcpy(out + 14 - v.size(), v.data(), v.size());
  scratch.used += 14;
  return std::string_view(out, 14);
}

std::optional<Error> AddElement(std::string_view ai, std::string_view raw, Elements& out, ScratchBuffer& scratch) {
  std::optional<std::string_view> v = Decode(raw, scratch);
  if (!v) return AiError(ai, "malformed percent-encoding");
  if (ai == "01" && !(v = PadGtin(*v, scratch))) return AiError(ai, "Digital Link too long");
  if (!out.Add(ai, *v)) return Error{"", "more than " + std::to_string(kMaxElements) + " elements"};
  return std::nullopt;
}

}  // namespace

bool LooksLikeDigitalLink(std::string_view s) {
  return (s.size() >= 7 && EqualsNoCase(s.substr(0, 7), "http://")) ||
         (s.size() >= 8 && EqualsNoCase(s.substr(0, 8), "https://"));
}

std::optional<Error> ReadDigitalLink(std::string_view uri, Elements& out, ScratchBuffer& scratch) {
  std::string_view rest = uri.substr(uri.find("://") + 3);
  if (const std::size_t hash = rest.find('#'); hash != std::string_view::npos) rest = rest.substr(0, hash);
  std::string_view query;
  if (const std::size_t q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  const std::size_t slash = rest.find('/');
  if (slash == 0 || rest.empty()) return Error{"", "Digital Link without a host"};
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  if (!path.empty() && path.back() == '/') path.remove_suffix(1);

  std::array<std::string_view, kMaxSegments> segs;
  std::size_t n = 0;
  while (!path.empty()) {
    if (n == segs.size()) return Error{"", "Digital Link path has too many segments"};
    const std::size_t cut = path.find('/');
    segs[n++] = path.substr(0, cut);
    path = cut == std::string_view::npos ? std::string_view() : path.substr(cut + 1);
  }
  std::size_t key = n;
  for (std::size_t k = 0; k + 1 < n && key == n; ++k)
    if (PathAi(segs[k]) == "01" && (n - k) % 2 == 0 && AllDigits(segs[k + 1])) key = k;
  if (key == n) return AiError("01", "missing: Digital Link without a /01/{GTIN} path");
  for (std::size_t k = key; k < n; k += 2) {
    const std::string_view ai = PathAi(segs[k]);
    if (ai.empty()) return Error{"", "Digital Link path segment " + std::to_string(k + 1) + " is not an AI"};
    if (auto e = AddElement(ai, segs[k + 1], out, scratch)) return e;
  }

  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view param = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    const std::size_t eq = param.find('=');
    const std::string_view name = param.substr(0, eq);
    if (!AllDigits(name)) continue;  // not a GS1 attribute (linkType, tracking parameters, …)
    if (name.size() < 2 || name.size() > 4) return Error{"", "Digital Link query key is not an AI"};
    const std::string_view raw = eq == std::string_view::npos ? std::string_view() : param.substr(eq + 1);
    if (auto e = AddElement(name, raw, out, scratch)) return e;
  }
  return std::nullopt;
}

}  // namespace scangate::gs1::detail
