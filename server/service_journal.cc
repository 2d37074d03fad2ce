// Service's journal hooks (ack=filter, --journal=on): the durable fast path. Kept apart from service.cc so
// the verdict logic there stays readable; see storage/journal_drain.h for the invariant.
// Waiter groups: one per I/O thread, holding that thread's executor. Every session of an I/O thread runs on
// the same single-threaded io_context, so posting a batch of waiter calls to the thread's first-seen executor
// runs each call on its session's thread — one post per thread per group commit, not one per key.
#include <exception>
#include <memory>
#include <string>
#include <utility>

#include <boost/asio/post.hpp>

#include "server/service.h"

namespace scangate::server {
namespace net = boost::asio;

namespace {
constexpr std::string_view kJournalUnavailableDetail =
    "the local journal could not record the key in time (full while PostgreSQL is behind); nothing was "
    "recorded: retry after the Retry-After delay";
constexpr std::string_view kJournalIoErrorDetail =
    "the local journal failed while recording the key (I/O error): it may have been recorded, so a retry may "
    "be answered duplicate; retry after the Retry-After delay";

// kRefused: nothing recorded (unavailable). kIoError: the record may be on disk and replayed (outcome-unknown).
Problem JournalProblem(storage::JournalFate fate) {
  if (fate == storage::JournalFate::kIoError) return Problem::OutcomeUnknown(std::string(kJournalIoErrorDetail));
  return Problem::Unavailable(std::string(kJournalUnavailableDetail));
}
}  // namespace

Service::JournalGroupSlot& Service::JournalGroup(const net::any_io_executor& ex) {
  struct Cache {
    std::uint64_t instance = 0;
    JournalGroupSlot* slot = nullptr;
  };
  thread_local Cache cache;
  if (cache.instance != instance_id_) {
    auto slot = std::make_unique<JournalGroupSlot>(ex);
    cache = Cache{instance_id_, slot.get()};
    std::lock_guard lk(groups_mu_);
    groups_.push_back(std::move(slot));
  }
  return *cache.slot;
}

void Service::JournalGroupSlot::Deliver(std::vector<storage::JournalWaiter> waiters, storage::JournalFate fate) {
  net::post(ex, [waiters = std::move(waiters), fate] {
    for (const auto& waiter : waiters) {
      try {
        waiter(fate);
      } catch (const std::exception&) {
        // A waiter's done() must not throw (it writes a response); never let one stop the others.
      }
    }
  });
}

bool Service::JournalKnown(const Digest& d, const std::string& hex, const net::any_io_executor& ex,
                           ThreadCounters& counters, const ObserveDone& done) {
  // Almost every digest is not pending: say so before building the waiter (its allocations are per request).
  if (!journal_->Holds(d)) return false;
  auto first_seen = std::make_shared<std::string>();
  const auto answer = [hex, &counters, done, first_seen](storage::JournalFate fate) {
    if (fate != storage::JournalFate::kDurable) {
      done(JournalProblem(fate));
      return;
    }
    Verdict v;
    v.digest_hex = hex;
    v.is_new = false;
    v.via_filter = false;
    v.first_seen = *first_seen;
    counters.CountVerdict(false, false);
    done(std::move(v));
  };
  const auto r = journal_->Lookup(d, JournalGroup(ex), answer);
  if (r.state == storage::JournalDrain::LookupResult::kAbsent) return false;
  *first_seen = r.first_seen;  // a follower runs later, on this thread (posted to `ex`)
  if (r.state == storage::JournalDrain::LookupResult::kDurable) answer(storage::JournalFate::kDurable);
  return true;
}

void Service::JournalNew(const Digest& d, const std::string& source, Verdict v, const net::any_io_executor& ex,
                         ThreadCounters& counters, const ObserveDone& done, std::int64_t time_us) {
  auto waiter = [this, d, time_us, v = std::move(v), &counters, done](storage::JournalFate fate) mutable {
    if (fate != storage::JournalFate::kDurable) {
      done(JournalProblem(fate));
      return;
    }
    // Durable: recorded. The journal's pending set answers repeats until PostgreSQL commits the row (with this
    // same time); the recent set answers them after that.
    recent_.InsertConcurrently(d, time_us);
    v.is_new = true;
    v.via_filter = true;
    counters.CountVerdict(true, true);
    done(std::move(v));
  };
  if (!journal_->Append(d, source, JournalGroup(ex), std::move(waiter), time_us)) {
    done(JournalProblem(storage::JournalFate::kRefused));
  }
}

}  // namespace scangate::server
