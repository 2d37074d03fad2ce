// libFuzzer target over scangate's pure request layer (server/http/request.h) and the tokens-file parser
// (server/http/auth.h): content-type policy, routing, /observe and /observe/batch body parsing and validation
// (JSON and application/x-www-form-urlencoded),
// bearer-credential parsing, problem/verdict/batch JSON building. Invariant checked: nothing throws or
// crashes for any input, every rejection is a 4xx problem with a slug, every accepted observation obeys
// the key/source limits, and every JSON this layer builds parses back. Built by tests/fuzz/CMakeLists.txt
// with clang -fsanitize=fuzzer,address,undefined; no Beast server, no pqxx.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <variant>

#include <boost/json/parse.hpp>

#include "server/http/auth.h"
#include "server/http/content_type.h"
#include "server/http/request.h"

namespace {
using namespace scangate::server;

void Check(bool ok) {
  if (!ok) std::abort();  // libFuzzer reports the input as a crash
}

void CheckProblem(const Problem& p) {
  Check(p.status >= 400 && p.status < 500);
  Check(!p.slug.empty());
  const std::string body = ProblemBody(p);
  boost::json::error_code ec;
  const auto v = boost::json::parse(body, ec);
  Check(!ec && v.is_object() && v.as_object().at("status").to_number<unsigned>() == p.status);
}

void CheckObservation(const Observation& o) {
  Check(o.key.size() >= kMinKeyBytes && o.key.size() <= kMaxKeyBytes);
  Check(o.key.find('\0') == std::string::npos && o.source.find('\0') == std::string::npos);
}

// A verdict built from (bounded, fuzzer-chosen) text. Its fields come from the service, never from a client:
// digest_hex is hex and first_seen an RFC 3339 time (ASCII), so the fuzzer keeps to ASCII there; quotes,
// backslashes and control characters must still be escaped.
void CheckVerdictBodies(std::string_view text) {
  Verdict v;
  v.is_new = !text.empty() && (text[0] & 1);
  v.via_filter = !text.empty() && (text[0] & 2);
  auto ascii = [](std::string_view t) {
    std::string out(t);
    for (char& c : out) c = static_cast<char>(c & 0x7f);
    return out;
  };
  v.digest_hex = ascii(text.substr(0, 64));
  v.first_seen = ascii(text.substr(0, 40));
  boost::json::error_code ec;
  boost::json::parse(VerdictBody(v), ec);
  Check(!ec);
  const Verdict vs[2] = {v, v};
  boost::json::parse(BatchBody(vs), ec);
  Check(!ec);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // Input layout: byte 0 selects the path, then "<content-type>\n<target>\n<body>" (missing parts empty).
  if (size == 0) return 0;
  const std::uint8_t selector = data[0];
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  auto next_line = [&rest]() {
    const std::size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    return line;
  };
  const std::string_view content_type = next_line();
  const std::string_view target = next_line();
  const std::string_view body = rest;

  if (auto p = CheckContentType(content_type)) {
    Check(p->status == 415);
    CheckProblem(*p);
  }
  const Route route = RouteOf(target);
  Check(!RouteLabel(route).empty());
  // A client route takes a body of at least /observe's limit; the others take none (issue 43).
  Check(IsClientRoute(route) ? BodyLimitFor(route) >= kMaxObserveBodyBytes : BodyLimitFor(route) == 0);
  Check(MethodAllowed(route, AllowedMethod(route)));
  CheckProblem(Problem::MethodNotAllowed(content_type, route));
  CheckProblem(Problem::NotFound(target));

  switch (selector % 5) {
    case 0: {
      auto r = ParseObserve(body);
      if (auto* p = std::get_if<Problem>(&r)) CheckProblem(*p);
      else CheckObservation(std::get<Observation>(r));
      break;
    }
    case 1: {
      auto r = ParseBatch(body);
      if (auto* p = std::get_if<Problem>(&r)) {
        CheckProblem(*p);
      } else {
        const auto& b = std::get<BatchRequest>(r);
        Check(b.entries.size() >= kMinBatchEntries && b.entries.size() <= kMaxBatchEntries);
        for (const auto& o : b.entries) CheckObservation(o);
      }
      break;
    }
    case 2: {
      if (auto token = BearerToken(body)) {
        Check(!token->empty() && token->size() <= kMaxBearerTokenBytes);
        Check(token->find(' ') == std::string_view::npos);
      }
      CheckProblem(Problem::Unauthorized(!body.empty()));
      Check(!WwwAuthenticate(!body.empty()).empty());
      break;
    }
    case 3: {
      auto r = ParseTokensFile(body);
      if (auto* e = std::get_if<TokenFileError>(&r)) {
        Check(e->line >= 1 && !e->message.empty());
      } else {
        const auto& terminals = std::get<std::vector<Terminal>>(r);
        Check(!terminals.empty());
        for (const Terminal& t : terminals) {
          Check(!t.id.empty() && t.id.size() <= kMaxTerminalIdChars && t.routes != 0);
          Check((t.routes & ~(kAllClientRoutes | kRouteBitAudit)) == 0);
        }
      }
      CheckVerdictBodies(body);
      break;
    }
    case 4: {  // /observe and /lookup bodies by content type: JSON or application/x-www-form-urlencoded
      auto r = ParseObservation(body, content_type);
      if (auto* p = std::get_if<Problem>(&r)) {
        CheckProblem(*p);
      } else {
        const auto& o = std::get<Observation>(r);
        CheckObservation(o);
        // Accepted form values are valid UTF-8: the lookup answer (source) must serialize and parse back.
        boost::json::error_code ec;
        boost::json::parse(LookupBody("00", "t", o.source), ec);
        Check(!ec);
      }
      break;
    }
  }
  return 0;
}
