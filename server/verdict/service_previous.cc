// Service's rotation of the digest secret (issue 55; the scheme's record and why running instances of the old
// scheme cannot record a key meanwhile: storage/scheme/scheme_record.h). With --digest-secret-previous-file a key
// is new only if PostgreSQL holds it under neither digest:
//   1. the filter's `new` is not a verdict (verdict.cc step 2 is skipped): the filter knows the current digests
//      only, and a key recorded under the previous one may be in PostgreSQL alone;
//   2. on the exact path, once the peers cover the request (every key they answered `new` before it is committed),
//      the key's previous digest is read on a connection of its own (storage::DigestReader, the /lookup reader):
//      a row within its horizon answers `duplicate`, with its first_seen (and, --keys=gs1, its lot and expiry
//      compared with the scan's, digested as the previous secret did);
//   3. not found: the key goes on to the insert of its current digest, which decides it among every instance on
//      the current scheme. No instance records a previous digest after the rotation began (sql/014's fence), so
//      the set read in 2 can only lose rows to the horizon: nothing recorded under it can appear between the read
//      and the insert.
// A read that fails or is refused (queue full, PostgreSQL down) answers 503 unavailable: nothing was recorded.
#include <memory>
#include <string>
#include <utility>

#include <boost/asio/post.hpp>

#include "server/verdict/service.h"
#include "server/verdict/service_call.h"

namespace scangate::server {
namespace net = boost::asio;

namespace {
constexpr std::string_view kPreviousReadDetail =
    "PostgreSQL could not be read for this key's digest under the previous digest secret (a rotation is in "
    "progress); nothing was recorded: retry after the Retry-After delay";
}  // namespace

void Service::AttachPrevious(Digester previous, const Config& config, storage::DigestReader* reader) {
  previous_keys_.emplace(std::move(previous), config.keys, config.expiry_grace, config.retention.count() > 0);
  previous_reader_ = reader;
}

void Service::ReadPreviousDigest(Call& call, std::size_t i, std::string_view key) const {
  if (!previous_keys_) return;
  std::variant<ScanKey, Problem> read = previous_keys_->Read(key);
  // The same parser: a key the current reader accepted is accepted here too.
  if (auto* k = std::get_if<ScanKey>(&read)) {
    Call::Entry& e = call.at(i);
    e.previous = k->digest;
    e.previous_lot = k->attrs.lot;
  }
}

void Service::ReadPrevious(const CallPtr& call, std::size_t i, std::uint32_t route, const Digest& d,
                           const std::string& source) {
  Call::Entry& e = call->at(i);
  if (previous_reader_ != nullptr) {
    auto done = [this, call, i, route, d, source](const storage::RecordLookup& r) {
      net::post(call->ex, [this, call, i, route, d, source, r] { OnPreviousRead(call, i, route, d, source, r); });
    };
    if (previous_reader_->Find(*e.previous, std::move(done))) return;
  }
  call->Fail(Problem::Unavailable(std::string(kPreviousReadDetail)));
}

void Service::OnPreviousRead(const CallPtr& call, std::size_t i, std::uint32_t route, const Digest& d,
                             const std::string& source, const storage::RecordLookup& r) {
  Call::Entry& e = call->at(i);
  if (call->answered()) return call->Finish();  // the deadline answered the call meanwhile
  switch (r.status) {
    case storage::RecordLookup::Status::kFound: {
      // Recorded under the previous secret, within its horizon: a duplicate. Its lot is compared with the scan's
      // lot as the previous secret digested it.
      storage::PackAttrs scan = e.attrs;
      scan.lot = e.previous_lot;
      storage::Result row{storage::Outcome::kDuplicate, r.first_seen, 0, {}};
      row.recorded.lot = r.lot;
      row.recorded.expiry = r.expiry;
      Decide(e.probed, scan, row, call->counters, e.verdict);
      call->counters.previous_digest_duplicates.Inc();
      return call->Finish();
    }
    case storage::RecordLookup::Status::kNotFound:
      e.previous_read = true;
      return ExactPath(call, i, route, d, source);
    case storage::RecordLookup::Status::kUnavailable:
      return call->Fail(Problem::Unavailable(std::string(kPreviousReadDetail)));
  }
}

}  // namespace scangate::server
