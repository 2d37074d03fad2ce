#include "server/http/answer_body.h"

#include <algorithm>
#include <array>
#include <utility>

#include <boost/json/array.hpp>
#include <boost/json/monotonic_resource.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

namespace scangate::server {
namespace json = boost::json;

namespace {
json::object VerdictObject(const Verdict& v, json::storage_ptr sp) {
  json::object o(std::move(sp));
  o["verdict"] = v.is_new ? "new" : "duplicate";
  o["digest"] = v.digest_hex;
  o["via"] = v.via_filter ? "filter" : "exact";
  if (!v.is_new) o["first_seen"] = v.first_seen;
  if (!v.is_new && v.mismatch != 0) {
    json::array m(o.storage());
    for (std::string_view name : MismatchNames(v.mismatch)) m.emplace_back(name);
    o["mismatch"] = std::move(m);
  }
  if (v.replayed) o["replayed"] = true;
  return o;
}

json::object LookupObject(std::string_view digest_hex, std::string_view first_seen,
                          const std::optional<std::string>& source, bool source_hidden) {
  json::object o;
  o["digest"] = digest_hex;
  o["first_seen"] = first_seen;
  if (source && !source_hidden) o["source"] = *source;
  else o["source"] = nullptr;
  if (source_hidden) o["source_hidden"] = true;
  return o;
}

// True when `s` can go between JSON quotes as is (no escaping needed).
bool PlainJsonText(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u >= 0x20 && u < 0x80 && c != '"' && c != '\\';
  });
}
}  // namespace

std::string VerdictBody(const Verdict& v) {
  // The hot path of /observe: the fixed shape written straight into one string (no value tree, one
  // allocation). Same bytes as json::serialize(VerdictObject(v)) — tests/server/request_test.cc checks it.
  // digest_hex is hex and first_seen is our RFC 3339; anything needing escapes takes the Boost.JSON path.
  if (!PlainJsonText(v.digest_hex) || !PlainJsonText(v.first_seen) || (v.mismatch != 0 && !v.is_new) || v.replayed) {
    std::array<unsigned char, 1024> arena;
    json::monotonic_resource mr(arena.data(), arena.size());
    return json::serialize(VerdictObject(v, &mr));
  }
  constexpr std::string_view kNew = R"({"verdict":"new","digest":")";
  constexpr std::string_view kDuplicate = R"({"verdict":"duplicate","digest":")";
  constexpr std::string_view kViaFilter = R"(","via":"filter")";
  constexpr std::string_view kViaExact = R"(","via":"exact")";
  constexpr std::string_view kFirstSeen = R"(,"first_seen":")";
  std::string out;
  out.reserve(kDuplicate.size() + v.digest_hex.size() + kViaFilter.size() + kFirstSeen.size() +
              v.first_seen.size() + 2);
  out += v.is_new ? kNew : kDuplicate;
  out += v.digest_hex;
  out += v.via_filter ? kViaFilter : kViaExact;
  if (!v.is_new) {
    out += kFirstSeen;
    out += v.first_seen;
    out += '"';
  }
  out += '}';
  return out;
}

std::string BatchBody(std::span<const Verdict> verdicts) {
  json::monotonic_resource mr;
  json::array results(&mr);
  results.reserve(verdicts.size());
  for (const Verdict& v : verdicts) results.emplace_back(VerdictObject(v, &mr));
  json::object o(&mr);
  o["results"] = std::move(results);
  return json::serialize(o);
}

std::string LookupBody(std::string_view digest_hex, std::string_view first_seen,
                       const std::optional<std::string>& source, bool source_hidden) {
  return json::serialize(LookupObject(digest_hex, first_seen, source, source_hidden));
}

std::string LookupBody(std::string_view digest_hex, std::string_view first_seen, const std::optional<std::string>& source,
                       const PackRecord& pack, bool source_hidden) {
  json::object o = LookupObject(digest_hex, first_seen, source, source_hidden);
  if (pack.expiry) o["expiry"] = *pack.expiry;
  else o["expiry"] = nullptr;
  o["lot_recorded"] = pack.lot_recorded;
  if (pack.keep_until) o["keep_until"] = *pack.keep_until;
  else o["keep_until"] = nullptr;
  if (pack.mismatch != 0) {
    json::array m;
    for (std::string_view name : MismatchNames(pack.mismatch)) m.emplace_back(name);
    o["mismatch"] = std::move(m);
  }
  return json::serialize(o);
}

std::vector<std::string_view> MismatchNames(std::uint8_t mismatch) {
  std::vector<std::string_view> names;
  if ((mismatch & kMismatchLot) != 0) names.emplace_back("lot");
  if ((mismatch & kMismatchExpiry) != 0) names.emplace_back("expiry");
  return names;
}

}  // namespace scangate::server
