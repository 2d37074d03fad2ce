// Service's journal hooks (ack=filter, --journal=on): the durable fast path, two steps of the per-key decision
// (server/verdict/verdict.cc); see storage/journal/journal_drain.h for the invariant.
// Waiter groups: one per I/O thread, holding that thread's executor. Every session of an I/O thread runs on
// the same single-threaded io_context, so posting a batch of waiter calls to the thread's first-seen executor
// runs each call on its session's thread — one post per thread per group commit, not one per key.
#include <exception>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include <boost/asio/post.hpp>

#include "server/verdict/service.h"
#include "server/verdict/service_call.h"

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
    auto slot = std::make_unique<JournalGroupSlot>(ex, *this);
    cache = Cache{instance_id_, slot.get()};
    const MutexLock lk(&groups_mu_);
    groups_.push_back(std::move(slot));
  }
  return *cache.slot;
}

void Service::JournalGroupSlot::Deliver(std::vector<storage::JournalWaiter> waiters, storage::JournalFate fate) {
  net::post(ex, [waiters = std::move(waiters), fate]() mutable {
    for (auto& waiter : waiters) {
      try {
        waiter(fate);
      } catch (const std::exception&) {
        // A waiter's done() must not throw (it writes a response); never let one stop the others.
      }
    }
  });
}

Service::Journalled Service::JournalKnown(const CallPtr& call, std::size_t i, const Digest& d) {
  // Almost every digest is not pending: say so before building the waiter (its allocation is per request).
  if (!journal_->Holds(d)) return Journalled::kAbsent;
  Call::Entry& e = call->at(i);
  const auto r = journal_->Lookup(d, JournalGroup(call->ex), [call, i](storage::JournalFate fate) {
    OnJournal(*call, i, /*is_new=*/false, fate);
  });
  if (r.state == storage::JournalDrain::LookupResult::kAbsent) return Journalled::kAbsent;
  if (r.state == storage::JournalDrain::LookupResult::kExpired) return Journalled::kExpired;
  // A duplicate of the journalled record — or, when the record holds this request's idempotency record, a retry
  // of the request that journalled it (replayed `new`); a follower's waiter runs later, on this thread (posted to
  // `ex`), after this sets the entry.
  if (e.attrs.request && r.request == e.attrs.request) {
    e.verdict.replayed = true;
  } else {
    e.verdict.first_seen = r.first_seen;
  }
  e.in_journal = true;
  if (r.state == storage::JournalDrain::LookupResult::kDurable) OnJournal(*call, i, false, storage::JournalFate::kDurable);
  return Journalled::kAnswered;
}

bool Service::JournalNew(const CallPtr& call, std::size_t i, const Digest& d, const std::string& source,
                         std::int64_t time_us) {
  Call::Entry& e = call->at(i);
  e.digest = d;
  e.journal_time_us = time_us;
  // The waiter holds the entry alone (a shared_ptr sharing the call's: inline in the AnyInvocable, no allocation).
  auto waiter = [entry = std::shared_ptr<Call::Entry>(call, &e)](storage::JournalFate fate) {
    // Durable: recorded. The journal's pending set answers repeats until PostgreSQL commits the row (with this
    // same time and request record); the recent set answers them after that.
    Call& c = *entry->call;
    if (fate == storage::JournalFate::kDurable) {
      c.service.recent_.InsertConcurrently(entry->digest, entry->journal_time_us, Recorder::Of(entry->attrs.request),
                                           c.service.ExpiredBeforeUs(entry->digest));
    }
    OnJournal(c, c.index_of(*entry), /*is_new=*/true, fate);
  };
  static_assert(sizeof(waiter) <= 2 * sizeof(void*) && std::is_nothrow_move_constructible_v<decltype(waiter)>,
                "the journal waiter must stay inline in its AnyInvocable (no allocation per key)");
  if (journal_->Append(d, source, JournalGroup(call->ex), std::move(waiter), time_us, e.attrs.request)) {
    call->at(i).in_journal = true;  // its waiter runs later, on this thread (posted to `ex`)
    return true;
  }
  if (!journal_->usable()) return false;  // became unusable since the caller asked: the exact path decides
  OnJournal(*call, i, true, storage::JournalFate::kRefused);  // stopping (shutdown): 503, nothing recorded
  return true;
}

void Service::OnJournal(Call& call, std::size_t i, bool is_new, storage::JournalFate fate) {
  Call::Entry& e = call.at(i);
  e.in_journal = false;
  if (fate != storage::JournalFate::kDurable) return call.Fail(JournalProblem(fate));
  if (e.verdict.replayed) {  // a retry of the request whose record this is (JournalKnown): its verdict again
    Replay(e.verdict, call.counters);
    return call.Finish();
  }
  e.verdict.is_new = is_new;
  e.verdict.via_filter = is_new;
  call.Finish();
}

}  // namespace scangate::server
