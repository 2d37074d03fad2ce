// Service::Call: the keys of one Observe or ObserveBatch call in flight — a single observation is a call of
// one key, a batch a call of n — and the call's one answer. Private to the Service (server/verdict/service.cc,
// verdict.cc, service_journal.cc); the per-key decision lives in verdict.cc, this unit only aggregates.
// Invariant: the call's `done` runs exactly once — when its last key finishes, or at its deadline, whichever
// comes first; a key finishing after that only counts down. Threading: touched only on the call's I/O thread
// (its executor), except each entry's Ticket (atomic, shared with a Store writer) and what a Store completion reads
// on the writer's thread (`service`, `inbox`, an entry's `call` and `digest`): written before the key is submitted
// (the Store's queue lock orders them) and never after.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <utility>
#include <variant>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "core/boot_clock.h"
#include "server/verdict/service.h"

namespace scangate::server {

// What the filter said about one digest, and whether the filter's answer counts (filter on and warm).
// Only kDefinitelyNew is a filter verdict; kDefinitelyNewUntrusted (the shard forgot keys within the window,
// core/filter.h) takes the exact path like kPossiblySeen and is labelled `via: exact` in both ack modes.
struct Service::Probed {
  bool filter_trusted = false;
  Probe probe = Probe::kPossiblySeen;
  // The filter vouched "definitely new" (an exact negative of a trusted filter).
  bool filter_said_new() const { return filter_trusted && probe == Probe::kDefinitelyNew; }
  // The Store's hint: a batch of such digests may go by COPY (storage/exact_store.h, Expect).
  storage::Expect expect() const { return filter_said_new() ? storage::Expect::kNew : storage::Expect::kUnknown; }
};

struct Service::Call {
  // One key of the call.
  struct Entry {
    Call* call = nullptr;     // the call it belongs to (a Store completion holds the entry alone)
    storage::Ticket ticket;   // its Store item's withdrawal handle (the deadline cancels a queued item)
    Digest digest{};          // its Store digest, once submitted (the recent set remembers the outcome under it)
    std::int64_t journal_time_us = 0;  // --ack=filter: its journal record's first_seen, once journalled
    Probed probed;
    storage::PackAttrs attrs;  // --keys=gs1: the scan's lot, expiry and horizon (empty otherwise)
    Digest recent_digest{};    // its recent-set key (ScanKey::recent_digest)
    Verdict verdict;          // its answer, once finished without a problem
    bool in_store = false;    // submitted to the Store, outcome not here yet
    bool in_journal = false;  // waiting for a journal group commit (it may still become durable)
    // Read before the probe (Service::ReadTrust, issue 42): the follower of its database was fresh, and every
    // running peer's watermark covered the call's arrival.
    bool fresh = true;
    bool covered = true;
    // --digest-secret-previous-file (issue 55, service_previous.cc): the key's digest (and --keys=gs1 lot digest)
    // under the previous secret, and whether PostgreSQL was read for it (not found) before this key's insert.
    std::optional<Digest> previous;
    std::optional<Digest> previous_lot;
    bool previous_read = false;
  };
  using Done = std::variant<ObserveDone, BatchDone>;

  // `n` keys, all pending; `done` is an ObserveDone for /observe (n = 1), a BatchDone for /observe/batch.
  Call(Service& s, const boost::asio::any_io_executor& e, ThreadCounters& c, std::size_t n, bool filter_trusted,
       Done d)
      : service(s), ex(e), counters(c), n_(n), pending_(n),
        many_(n > 1 ? std::make_unique<Entry[]>(n) : nullptr), data_(n > 1 ? many_.get() : &one_),
        done_(std::move(d)) {
    for (std::size_t i = 0; i < n; ++i) {
      data_[i].call = this;
      data_[i].probed.filter_trusted = filter_trusted;
    }
  }
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  std::size_t size() const { return n_; }
  Entry& at(std::size_t i) { return data_[i]; }
  std::size_t index_of(const Entry& e) const { return static_cast<std::size_t>(&e - data_); }
  bool batch() const { return done_.index() == 1; }
  // The call was answered (the last key finished, or the deadline passed).
  bool answered() const {
    return std::visit([](const auto& f) { return !static_cast<bool>(f); }, done_);
  }
  // Some key failed (503): a batch stops deciding its remaining keys (they would not change the answer).
  bool failed() const { return problem_.has_value(); }

  // One key is finished: its entry's verdict holds its answer. The last key answers the call.
  void Finish() {
    if (--pending_ == 0 && !answered()) Answer();
  }
  // One key is finished with a 503 `p`: the call is answered with it (a batch in its batch wording), with
  // outcome-unknown winning over unavailable (the weaker claim: some key MAY be recorded).
  void Fail(Problem p) {
    if (!problem_ || (p.slug == kOutcomeUnknownSlug && problem_->slug != kOutcomeUnknownSlug)) {
      problem_ = std::move(p);
    }
    Finish();
  }
  // Answers now with `p`, whatever is still pending (the deadline). No-op once answered.
  void AnswerNow(Problem p) {
    if (!answered()) Deliver(std::move(p));
  }

  Service& service;
  const boost::asio::any_io_executor ex;
  ThreadCounters& counters;
  // The inbox of ex's I/O thread, where Store completions hop back to (set by the first submission, on ex's thread).
  IoInbox<StoredAnswer>* inbox = nullptr;
  const std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  // The call's arrival on the boot clock (core/boot_clock.h): the moment the peers' watermark must cover (issue 42).
  const std::int64_t arrived_ns = BootClock::NowNs();
  // The request deadline; constructed when the first key goes to the Store (most calls never need one).
  std::optional<boost::asio::steady_timer> deadline;

 private:
  static constexpr std::string_view kOutcomeUnknownSlug = "outcome-unknown";
  // The verdicts, or the recorded problem (a batch's in its batch wording), to `done_` (verdict.cc).
  void Answer();
  // `p` as the call's answer; `done_` is emptied first, the deadline cancelled.
  void Deliver(Problem p);

  const std::size_t n_;
  std::size_t pending_;
  Entry one_;                       // the entry of a single observation: no second allocation
  std::unique_ptr<Entry[]> many_;   // a batch's entries
  Entry* const data_;
  std::optional<Problem> problem_;  // the answer when set: the first failure (outcome-unknown wins)
  Done done_;
};

}  // namespace scangate::server
