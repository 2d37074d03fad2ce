#include "server/verdict/scan_key.h"

#include <array>
#include <cstring>
#include <string>
#include <utility>

#include <absl/container/inlined_vector.h>

#include "core/gs1.h"

namespace scangate::server {
namespace {

constexpr std::int64_t kUsPerDay = 86'400'000'000;

// The calendar year of `now_us` (UTC): AI 17's century is chosen relative to it (GS1 General Specifications).
int YearOf(std::int64_t now_us) {
  const std::chrono::sys_days day =
      std::chrono::floor<std::chrono::days>(std::chrono::sys_time<std::chrono::microseconds>(
          std::chrono::microseconds(now_us)));
  return static_cast<int>(std::chrono::year_month_day(day).year());
}

}  // namespace

std::int64_t KeyReader::SystemNowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

KeyReader::KeyReader(Digester digester, KeysMode mode, std::chrono::seconds grace, bool horizons, NowUs now_us)
    : digester_(std::move(digester)),
      plain_(Digester::Sha256()),
      mode_(mode),
      grace_us_(std::chrono::duration_cast<std::chrono::microseconds>(grace).count()),
      horizons_(horizons),
      now_us_(std::move(now_us)) {}

std::variant<ScanKey, Problem> KeyReader::Read(std::string_view key) const {
  ScanKey k;
  if (mode_ == KeysMode::kRaw) {
    k.digest = digester_(key);
    k.recent_digest = k.digest;
    return k;
  }
  std::variant<gs1::Pack, gs1::Error> parsed = gs1::Parse(key, YearOf(now_us_()));
  if (auto* e = std::get_if<gs1::Error>(&parsed)) return Problem::InvalidGs1(e->ai, e->detail);
  const gs1::Pack& pack = std::get<gs1::Pack>(parsed);
  k.digest = digester_(gs1::Identity(pack));
  // The lot is digested under its AI ("10" + lot) with the keys' digester: never raw in the database.
  if (pack.lot) k.attrs.lot = digester_("10" + *pack.lot);
  if (pack.expiry) {
    k.attrs.expiry = gs1::DaysSinceEpoch(*pack.expiry);
    // Kept until the end of the expiry month, plus the grace (PostgreSQL floors it at first_seen + --retention).
    // Without a horizon (--retention=off) nothing expires: a pack past its own would otherwise be `new` at
    // every scan.
    if (horizons_) {
      k.attrs.keep_until_us =
          static_cast<std::int64_t>(gs1::FirstDayOfNextMonth(*pack.expiry)) * kUsPerDay + grace_us_;
    }
  }
  k.recent_digest = RecentDigest(k.digest, k.attrs);
  return k;
}

Digest KeyReader::RecentDigest(const Digest& identity, const storage::PackAttrs& recorded) const {
  if (!recorded.lot && !recorded.expiry) return identity;
  // identity || lot-or-zeros || presence flags || expiry (little-endian days): one SHA-256 of 70 bytes.
  std::array<std::uint8_t, 32 + 32 + 2 + 4> buf{};
  std::memcpy(buf.data(), identity.data(), 32);
  if (recorded.lot) std::memcpy(buf.data() + 32, StoredDigest(*recorded.lot).data(), 32);  // as PostgreSQL holds it
  buf[64] = recorded.lot ? 1 : 0;
  buf[65] = recorded.expiry ? 1 : 0;
  const std::uint32_t days = recorded.expiry ? static_cast<std::uint32_t>(*recorded.expiry) : 0;
  for (int i = 0; i < 4; ++i) buf[66 + i] = static_cast<std::uint8_t>(days >> (8 * i));
  return plain_(std::string_view(reinterpret_cast<const char*>(buf.data()), buf.size()));
}

storage::RequestId KeyReader::RequestIdOf(std::string_view scope, std::string_view idempotency_key) const {
  // The digested bytes, a stored format (PostgreSQL's request column, the journal): the domain, then each part
  // as its little-endian 32-bit length and its bytes. On the stack for the usual sizes (a key is at most 255
  // bytes, a scope names a source or an address); a std::string grown by += reallocated twice per request.
  constexpr std::string_view kDomain = "scangate-idempotency-v1";
  absl::InlinedVector<char, 384> input;
  input.reserve(kDomain.size() + 8 + scope.size() + idempotency_key.size());
  input.insert(input.end(), kDomain.begin(), kDomain.end());
  for (const std::string_view part : {scope, idempotency_key}) {
    const auto n = static_cast<std::uint32_t>(part.size());
    for (int i = 0; i < 4; ++i) input.push_back(static_cast<char>(n >> (8 * i)));
    input.insert(input.end(), part.begin(), part.end());
  }
  const Digest d = digester_(std::string_view(input.data(), input.size()));
  storage::RequestId id{};
  std::memcpy(id.data(), d.data(), id.size());
  return id;
}

std::uint8_t KeyReader::Mismatch(const storage::PackAttrs& scan, const storage::PackAttrs& recorded) {
  std::uint8_t bits = 0;
  // A recorded lot read back from PostgreSQL is its stored form (core/digest.h): lots compare as stored.
  if (scan.lot && recorded.lot && StoredDigest(*scan.lot) != StoredDigest(*recorded.lot)) bits |= kMismatchLot;
  if (scan.expiry && recorded.expiry && *scan.expiry != *recorded.expiry) bits |= kMismatchExpiry;
  return bits;
}

}  // namespace scangate::server
