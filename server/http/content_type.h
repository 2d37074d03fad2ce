// The Content-Type policy of request bodies: which media types POST /observe, /observe/batch and /lookup read, and
// whether a body is read as a form. Invariant: anything not accepted here is a 415 problem before the body is
// parsed (server/http/request.h parses what is accepted). Pure: no I/O, unit-tested and fuzzed.
#pragma once

#include <optional>
#include <string_view>

#include "server/http/problem.h"

namespace scangate::server {

// Content-Type policy: application/json (any parameters), application/*+json,
// application/x-www-form-urlencoded (curl -d's default) and an absent/empty header are accepted;
// anything else (text/plain, multipart/form-data, ...) is a 415 problem.
std::optional<Problem> CheckContentType(std::string_view content_type);
// True for application/x-www-form-urlencoded (any parameters, any case).
bool IsFormContentType(std::string_view content_type);

}  // namespace scangate::server
