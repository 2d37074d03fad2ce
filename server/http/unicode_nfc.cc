#include "server/http/unicode_nfc.h"

#include <array>
#include <cstdint>

#include <unicode/unorm2.h>
#include <unicode/ustring.h>

namespace scangate::server {

namespace {

// The longest key (kMaxKeyBytes, 512) in UTF-16: at most one code unit per UTF-8 byte.
constexpr std::int32_t kMaxUnits = 1024;

}  // namespace

bool IsNfc(std::string_view utf8) {
  bool ascii = true;
  for (const char c : utf8) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (ascii) return true;
  if (utf8.size() > static_cast<std::size_t>(kMaxUnits)) return false;
  UErrorCode err = U_ZERO_ERROR;
  std::array<UChar, kMaxUnits> units;
  std::int32_t len = 0;
  u_strFromUTF8(units.data(), kMaxUnits, &len, utf8.data(), static_cast<std::int32_t>(utf8.size()), &err);
  if (U_FAILURE(err)) return false;
  const UNormalizer2* nfc = unorm2_getNFCInstance(&err);
  if (U_FAILURE(err)) return false;
  const UBool normalized = unorm2_isNormalized(nfc, units.data(), len, &err);
  return U_SUCCESS(err) && normalized;
}

}  // namespace scangate::server
