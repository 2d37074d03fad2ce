// Duplicate-member detection for JSON request bodies. RFC 8259 leaves `{"key":"A","key":"B"}` to the
// implementation: Boost.JSON keeps the last member, HAProxy's json_query('$.key') the first, so a body with
// a repeated name is routed by one reading and decided by another (issue 33: `new` twice behind the shipped
// key-affinity balancer). The service therefore refuses such bodies outright. Invariant: any object, at any
// depth, that names a member twice (compared after unescaping, so "key" and "\u006bey" are the same) is
// found; the location names only indices and the service's own member names, never client text.
// Use after the body parsed as JSON (the parser's limits and messages come first). Pure; any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace scangate::server {

struct DuplicateMember {
  std::string name;     // the repeated member's name if it is one of the service's ("key", "source", "keys"),
                        // else "" (a client's arbitrary name is not echoed)
  std::string pointer;  // RFC 6901 pointer of the object holding it, e.g. "" (the body) or "/keys/3"; a member
                        // name that is not the service's appears as "*" (never echoed)
};

// The first repeated member name in `body` (well-formed JSON), or nullopt when every object's names are
// unique. Linear in the body's size (names are kept per open object in a hash set once it grows).
std::optional<DuplicateMember> FindDuplicateMember(std::string_view body);

}  // namespace scangate::server
