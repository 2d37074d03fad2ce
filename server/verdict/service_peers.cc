// Service's peers' hooks (issue 42; the argument: storage/peers/peer_view.h): what happens to a key that may not be
// decided `new` now because a running journal owner of its database does not cover the request's arrival — it
// answered keys `new` that PostgreSQL has not committed (a lock, a failover, a slow PostgreSQL), it died with keys
// in its journal, or this instance has not read the peers lately. Such a key is
//   1. read in PostgreSQL (storage::DigestReader, a connection of its own: reads go on when inserts wait): a row
//      (within the horizon) makes it `duplicate` — so repeats are still answered while a peer lags;
//   2. otherwise parked on its partition's queue (server/verdict/room_wait.h: no thread blocks) until the peers
//      cover its arrival, then decided on the exact path (an insert, which now sees every key they cover);
//   3. or answered 503 unavailable + Retry-After when min(--peer-wait, the request deadline) passes first.
// Nothing is recorded before the exact path, so a 503 here is `unavailable`, never outcome-unknown.
#include <memory>
#include <string>
#include <utility>

#include <boost/asio/post.hpp>

#include "server/verdict/room_wait.h"
#include "server/verdict/service.h"
#include "server/verdict/service_call.h"

namespace scangate::server {
namespace net = boost::asio;

namespace {
constexpr std::string_view kUncoveredDetail =
    "another scangate instance of this database answered keys new that PostgreSQL has not committed yet (it is "
    "behind, stopped with keys in its journal, or this instance cannot read its watermark), so this key cannot be "
    "decided new now; nothing was recorded: retry after the Retry-After delay (/stats \"peers\" names the instance)";
constexpr std::string_view kUncoveredReadDetail =
    "PostgreSQL could not be read while another scangate instance of this database holds keys answered new that "
    "it has not committed; nothing was recorded: retry after the Retry-After delay";
}  // namespace

void Service::AttachPeers(PeerHooks hooks) {
  peers_ = std::move(hooks);
  peer_queues_.assign(std::max(1u, peers_.partitions), 0);
}

void Service::Uncovered(const CallPtr& call, std::size_t i, std::uint32_t route, const Digest& d,
                        const std::string& source) {
  Call::Entry& e = call->at(i);
  call->counters.peer_uncovered.Inc();
  if (peers_.reader != nullptr && !e.attrs.request) {
    // The reader's thread answers; the call is touched on its own thread only.
    auto done = [this, call, i, route, d, source](const storage::RecordLookup& r) {
      net::post(call->ex, [this, call, i, route, d, source, r] { OnUncoveredRead(call, i, route, d, source, r); });
    };
    if (peers_.reader->Find(d, std::move(done))) return;
    // Refused (the reader is down or its queue full): no read; waiting may still answer it.
  }
  WaitForCoverage(call, i, route, d, source);
}

void Service::OnUncoveredRead(const CallPtr& call, std::size_t i, std::uint32_t route, const Digest& d,
                              const std::string& source, const storage::RecordLookup& r) {
  Call::Entry& e = call->at(i);
  switch (r.status) {
    case storage::RecordLookup::Status::kFound: {
      // Committed: a duplicate whatever any peer holds (an expired row reads as not found: it may be taken over).
      storage::Result row{storage::Outcome::kDuplicate, r.first_seen, 0, {}};
      row.recorded.lot = r.lot;
      row.recorded.expiry = r.expiry;
      Decide(e.probed, e.attrs, row, call->counters, e.verdict);
      call->counters.peer_read_duplicates.Inc();
      return call->Finish();
    }
    case storage::RecordLookup::Status::kNotFound:
      return WaitForCoverage(call, i, route, d, source);
    case storage::RecordLookup::Status::kUnavailable:
      return call->Fail(Problem::Unavailable(std::string(kUncoveredReadDetail)));
  }
}

void Service::WaitForCoverage(const CallPtr& call, std::size_t i, std::uint32_t route, const Digest& d,
                              const std::string& source) {
  ThreadCounters& counters = call->counters;
  const auto deadline = std::min(std::chrono::steady_clock::now() + peer_wait_, call->started + request_timeout_);
  if (peer_wait_.count() == 0 || deadline <= std::chrono::steady_clock::now()) {
    counters.peer_wait_timeouts.Inc();
    return call->Fail(Problem::Unavailable(std::string(kUncoveredDetail)));
  }
  counters.peer_waits.Inc();
  RoomWaiter w;
  w.deadline = deadline;
  w.retry = [this, call, i, route, d, source] {
    if (call->answered()) {  // another key's deadline answered the call: this one is only counted down
      call->Finish();
      return RetryResult::kIn;
    }
    Call::Entry& e = call->at(i);
    // acquire (PeerView::Covered): the insert that follows sees every key the covering sample vouches for.
    if (peers_.covered && !peers_.covered(d, call->arrived_ns)) return RetryResult::kRefused;
    e.covered = true;
    ExactPath(call, i, route, d, source);
    return RetryResult::kIn;
  };
  w.give_up = [&counters, call](GiveUp) {
    counters.peer_wait_timeouts.Inc();
    call->Fail(Problem::Unavailable(std::string(kUncoveredDetail)));
  };
  const unsigned p = peers_.partition ? peers_.partition(d) : 0;
  ParkForRoom(call->ex, &peer_queues_[p < peer_queues_.size() ? p : 0], std::move(w));
}

}  // namespace scangate::server
