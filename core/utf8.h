// Strict UTF-8 validation (RFC 3629): no overlong forms, no surrogates, nothing above U+10FFFF. Used where
// bytes arrive without a JSON parser's check: form-encoded request fields (server/http/request.cc) and sources
// bound into PostgreSQL text (storage/store.cc, the facade). Pure; safe to call from any thread.
#pragma once

#include <string_view>

namespace scangate {

// True when `s` is well-formed UTF-8; with `allow_nul` false a NUL byte (which PostgreSQL text cannot
// hold) also makes it false.
bool IsValidUtf8(std::string_view s, bool allow_nul = true);

}  // namespace scangate
