// FakeStore: an in-memory storage::ExactStore for the server's unit tests (no PostgreSQL): exact
// insert-if-absent of digests, with faults the test sets (down, a full queue, a refused write-behind lane, a
// forced outcome, a throwing Submit). Completions run inline, on the caller's thread: the Service hops them to
// the call's executor through its inbox, as it does for the real Store's writer threads. Used by
// tests/server/http/router_test.cc and tests/server/verdict/verdict_test.cc.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>

#include "core/digest.h"
#include "core/time_format.h"
#include "storage/exact_store.h"
#include "storage/store.h"

namespace scangate::server::test_support {

class FakeStore final : public storage::ExactStore {
 public:
  // The first_seen every committed outcome carries, and the same instant in µs since the epoch.
  static constexpr const char* kFirstSeen = "2026-11-30T10:00:00.000000Z";
  static constexpr std::int64_t kFirstSeenUs = 1'796'032'800'000'000;

  bool Submit(std::uint32_t, const Digest& d, std::string source, storage::Completion done,
              std::shared_ptr<storage::Ticket>, storage::Expect expect, storage::PackAttrs attrs) override {
    storage::Result r;
    {
      const std::lock_guard lock(mu_);
      ++submits;
      expects[ToHex(d)] = expect;
      if (throws) throw std::runtime_error("fake store failure");
      if (down || Refuse()) return false;
      if (outcome) {
        r.outcome = *outcome;
      } else {
        auto [it, inserted] = rows.try_emplace(ToHex(d), std::move(source));
        r.outcome = inserted ? storage::Outcome::kInserted : storage::Outcome::kDuplicate;
        // Each row's first_seen is the time it was inserted (the recent set honours the horizon by it), and
        // its pack attributes those of its first submission, as PostgreSQL records them.
        auto [stamp, fresh] = first_seen_us_.try_emplace(it->first, NowUs());
        r.first_seen_us = stamp->second;
        r.first_seen = Rfc3339Micros(r.first_seen_us);
        auto [rec, fresh_attrs] = attrs_.try_emplace(it->first, attrs);
        r.recorded = rec->second;
        r.recorded.keep_until_us = 0;  // as storage::Result: not reported
        r.request_known = request_known;
      }
    }
    done(r);
    return true;
  }
  bool SubmitWriteBehind(std::uint32_t, const Digest& d, std::string source, std::int64_t first_seen_us,
                         const std::optional<storage::RequestId>& request) override {
    const std::lock_guard lock(mu_);
    ++write_behinds;
    if (down || refuse_write_behind || Refuse()) return false;
    auto [it, inserted] = rows.try_emplace(ToHex(d), std::move(source));
    if (inserted) {  // the row as PostgreSQL writes it: the given first_seen and the request's record
      first_seen_us_.try_emplace(it->first, first_seen_us != 0 ? first_seen_us : NowUs());
      storage::PackAttrs attrs;
      attrs.request = request;
      attrs_.try_emplace(it->first, attrs);
    }
    return true;
  }
  // A row put in behind the Service's back (another instance recorded it): `first_seen_us` and `attrs` (its
  // request record) as PostgreSQL would hold them.
  void RecordRow(const Digest& d, std::int64_t first_seen_us, const storage::PackAttrs& attrs) {
    const std::lock_guard lock(mu_);
    rows.try_emplace(ToHex(d), "");
    first_seen_us_.try_emplace(ToHex(d), first_seen_us);
    attrs_.try_emplace(ToHex(d), attrs);
  }
  bool up() const override { return !down; }
  bool full() const override { return full_refusals > 0; }
  storage::StoreStats Stats() const override { return storage::StoreStats{}; }

  std::map<std::string, std::string> rows;         // digest hex -> source
  std::map<std::string, storage::Expect> expects;  // digest hex -> the hint of its last Submit
  int submits = 0, write_behinds = 0;
  bool down = false;
  bool throws = false;                      // Submit throws (the Service's caller turns it into a 500)
  bool refuse_write_behind = false;         // the write-behind lane alone refuses (its share of the queue)
  int full_refusals = 0;                    // the next this many submissions (any lane) find the queue full
  std::optional<storage::Outcome> outcome;  // every Submit completes with this (kUnavailable, kUnknown)
  bool request_known = true;  // Result::request_known of every outcome (false: as a raw batch's duplicate)

 private:
  bool Refuse() {
    if (full_refusals == 0) return false;
    --full_refusals;
    return true;
  }
  std::mutex mu_;  // test code: the service calls in from one I/O thread; the lock is belt and braces
  static std::int64_t NowUs() {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  std::map<std::string, std::int64_t> first_seen_us_;     // digest hex -> first_seen of a Submit-inserted row
  std::map<std::string, storage::PackAttrs> attrs_;       // digest hex -> its first submission's attributes
};

}  // namespace scangate::server::test_support
