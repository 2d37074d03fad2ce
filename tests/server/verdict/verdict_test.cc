// Unit tests of the per-key decision (server/verdict/verdict.cc) with no sockets and no PostgreSQL: a Service over an
// in-memory ExactStore whose refusals and outcomes the test sets. Table-driven: every case runs through the
// single route (Observe) and the batch route (ObserveBatch, the key alone and the key among fresh keys), and
// the answers must agree — one decision, whatever the route.
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <span>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include "core/filter.h"
#include "server/verdict/service.h"
#include "storage/store.h"
#include "tests/server/fake_store.h"

namespace scangate::server {
namespace {

using test_support::FakeStore;

// What a route answered for the case's key: "new/filter", "new/exact", "duplicate/exact", "503 <slug>".
std::string Describe(const Verdict& v) {
  if (v.is_new) return v.via_filter ? "new/filter" : "new/exact";
  std::string mismatch;
  for (std::string_view m : MismatchNames(v.mismatch)) mismatch += std::string(mismatch.empty() ? " mismatch=" : ",") + std::string(m);
  return std::string("duplicate/") + (v.via_filter ? "filter" : "exact") + (v.first_seen.empty() ? " (no first_seen)" : "") +
         mismatch;
}
std::string Describe(const Problem& p) { return std::to_string(p.status) + " " + p.slug; }

struct Case {
  std::string name;
  AckMode ack = AckMode::kCommit;
  KeysMode keys = KeysMode::kRaw;
  bool filter = true;
  bool warm = true;
  std::chrono::milliseconds queue_wait{1000};
  std::chrono::seconds retention = std::chrono::hours(24);  // --retention (the horizon)
  bool seen_before = false;  // the key was observed once already through this Service (same route)
  bool recorded_before = false;  // the key's row exists in the store, put there behind the Service's back
  void (*fault)(FakeStore&) = nullptr;  // set on the store just before the case's key is observed
  std::string expected;
};

enum class Route { kSingle, kBatchAlone, kBatchAmongFresh };

class Rig {
 public:
  explicit Rig(const Case& c) {
    config_.ack = c.ack;
    config_.keys = c.keys;
    config_.filter = c.filter;
    config_.queue_wait = c.queue_wait;
    config_.request_timeout = std::chrono::milliseconds(3000);
    config_.retention = c.retention;
    FilterOptions fo;
    fo.capacity = 10'000;
    fo.shards = 1;
    filter_ = std::make_unique<ShardedFilter>(fo);
    service_ = std::make_unique<Service>(config_, Digester::Sha256(), *filter_, store_, metrics_);
    if (c.warm) service_->MarkWarm();
  }

  // Observes `keys` through `route` (kSingle: one Observe per key, in order) and returns each key's answer.
  std::vector<std::string> Observe(const std::vector<std::string>& keys, Route route) {
    std::vector<std::string> out;
    if (route == Route::kSingle) {
      for (const auto& k : keys) {
        std::optional<std::string> got;
        service_->Observe(Observation{k, "", "", ""}, ioc_.get_executor(), metrics_.ForThread(0),
                          [&](std::variant<Verdict, Problem> r) {
                            EXPECT_FALSE(got) << "answered twice";
                            got = std::visit([](const auto& x) { return Describe(x); }, r);
                          });
        Run([&] { return got.has_value(); });
        out.push_back(got.value_or("no answer"));
      }
      return out;
    }
    BatchRequest batch;
    for (const auto& k : keys) batch.entries.push_back(Observation{k, "", "", ""});
    std::optional<std::variant<std::vector<Verdict>, Problem>> got;
    service_->ObserveBatch(batch, ioc_.get_executor(), metrics_.ForThread(0),
                           [&](std::variant<std::vector<Verdict>, Problem> r) {
                             EXPECT_FALSE(got) << "answered twice";
                             got = std::move(r);
                           });
    Run([&] { return got.has_value(); });
    if (!got) return std::vector<std::string>(keys.size(), "no answer");
    if (auto* p = std::get_if<Problem>(&*got)) return std::vector<std::string>(keys.size(), Describe(*p));
    for (const Verdict& v : std::get<std::vector<Verdict>>(*got)) out.push_back(Describe(v));
    return out;
  }

  // One Observe of `o` (Idempotency-Key: its idempotency_key and scope): its verdict; a failed test and a
  // default Verdict when it is a problem or no answer.
  Verdict ObserveOne(const Observation& o) {
    std::optional<std::variant<Verdict, Problem>> got;
    service_->Observe(o, ioc_.get_executor(), metrics_.ForThread(0), [&](std::variant<Verdict, Problem> r) {
      EXPECT_FALSE(got) << "answered twice";
      got = std::move(r);
    });
    Run([&] { return got.has_value(); });
    if (!got || !std::holds_alternative<Verdict>(*got)) {
      ADD_FAILURE() << "no verdict";
      return {};
    }
    return std::get<Verdict>(*got);
  }

  FakeStore& store() { return store_; }
  Service& service() { return *service_; }
  ShardedFilter& filter() { return *filter_; }
  MetricsSnapshot Counters() {
    MetricsSnapshot s;
    metrics_.Collect(s);
    return s;
  }

 private:
  // Runs the io_context until `done` (a missing answer fails within 10 s instead of hanging the test).
  template <class Pred>
  void Run(Pred done) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done() && std::chrono::steady_clock::now() < until) {
      ioc_.restart();
      ioc_.run_for(std::chrono::milliseconds(20));
    }
    EXPECT_TRUE(done()) << "no answer within 10 s";
  }

  Config config_;
  boost::asio::io_context ioc_;
  Metrics metrics_{1};
  FakeStore store_;
  std::unique_ptr<ShardedFilter> filter_;
  std::unique_ptr<Service> service_;
};

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      {.name = "CommitNewViaFilter", .expected = "new/filter"},
      {.name = "CommitFilterOff", .filter = false, .expected = "new/exact"},
      {.name = "CommitBeforeWarmStart", .warm = false, .expected = "new/exact"},
      {.name = "CommitRepeat", .seen_before = true, .expected = "duplicate/exact"},
      {.name = "CommitRecordedElsewhere", .recorded_before = true, .expected = "duplicate/exact"},
      {.name = "CommitStoreDown", .fault = [](FakeStore& s) { s.down = true; }, .expected = "503 unavailable"},
      {.name = "CommitOutcomeUnknown",
       .fault = [](FakeStore& s) { s.outcome = storage::Outcome::kUnknown; },
       .expected = "503 outcome-unknown"},
      {.name = "CommitOutcomeUnavailable",
       .fault = [](FakeStore& s) { s.outcome = storage::Outcome::kUnavailable; },
       .expected = "503 unavailable"},
      {.name = "CommitQueueFullWaitsForRoom",
       .fault = [](FakeStore& s) { s.full_refusals = 1; },
       .expected = "new/filter"},
      {.name = "CommitQueueFullNoWait",
       .queue_wait = std::chrono::milliseconds(0),
       .fault = [](FakeStore& s) { s.full_refusals = 1; },
       .expected = "503 unavailable"},
      {.name = "FilterNewWrittenBehind", .ack = AckMode::kFilter, .expected = "new/filter"},
      {.name = "FilterRepeat", .ack = AckMode::kFilter, .seen_before = true, .expected = "duplicate/exact"},
      {.name = "FilterFilterOff", .ack = AckMode::kFilter, .filter = false, .expected = "new/exact"},
      {.name = "FilterBeforeWarmStart", .ack = AckMode::kFilter, .warm = false, .expected = "new/exact"},
      // The drift this test was written for: a write-behind row refused by a full queue sends the key to the
      // exact path (it waits for room there), in the batch route as in the single one — not a 503.
      {.name = "FilterWriteBehindRefusedTakesExactPath",
       .ack = AckMode::kFilter,
       .fault = [](FakeStore& s) { s.refuse_write_behind = true; },
       .expected = "new/filter"},  // PostgreSQL inserted what the filter called new
      {.name = "FilterQueueFullWaitsForRoom",
       .ack = AckMode::kFilter,
       .fault = [](FakeStore& s) { s.full_refusals = 2; },  // the write-behind row, then the exact submission
       .expected = "new/filter"},
      {.name = "FilterQueueFullNoWait",
       .ack = AckMode::kFilter,
       .queue_wait = std::chrono::milliseconds(0),
       .fault = [](FakeStore& s) { s.full_refusals = 2; },
       .expected = "503 unavailable"},
      {.name = "FilterStoreDown", .ack = AckMode::kFilter, .fault = [](FakeStore& s) { s.down = true; },
       .expected = "503 unavailable"},
      {.name = "FilterPossiblySeenOutcomeUnknown",
       .ack = AckMode::kFilter,
       .filter = false,
       .fault = [](FakeStore& s) { s.outcome = storage::Outcome::kUnknown; },
       .expected = "503 outcome-unknown"},
  };
  return cases;
}

class VerdictTest : public ::testing::TestWithParam<std::tuple<Case, Route>> {};

// One case, one route: the case's key is answered as `expected`.
TEST_P(VerdictTest, SameAnswerOnEveryRoute) {
  const auto& [c, route] = GetParam();
  Rig rig(c);
  static int n = 0;
  const std::string key = "verdict-test-" + c.name + "-" + std::to_string(++n);
  if (c.recorded_before) rig.store().rows[ToHex(Digester::Sha256()(key))] = "";
  if (c.seen_before) {
    const auto first = rig.Observe({key}, route == Route::kSingle ? Route::kSingle : Route::kBatchAlone);
    ASSERT_EQ(first.size(), 1U);
    ASSERT_EQ(first[0].substr(0, 3), "new") << "the first observation of a fresh key";
  }
  if (c.fault) c.fault(rig.store());
  if (route == Route::kBatchAmongFresh) {
    // The key last, behind two fresh keys decided first: a fault that refuses the key's submission hits the
    // fresh keys first, so a refusal of theirs is the batch's answer too; the key's own answer must not
    // differ from the other routes when the batch succeeds.
    const auto got = rig.Observe({key + "-a", key + "-b", key}, route);
    ASSERT_EQ(got.size(), 3U);
    if (c.expected.rfind("503", 0) == 0) {
      EXPECT_EQ(got[2].substr(0, 3), "503") << c.name;
    } else if (got[2].rfind("503", 0) != 0) {
      EXPECT_EQ(got[2], c.expected) << c.name;
    }
    return;
  }
  const auto got = rig.Observe({key}, route);
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got[0], c.expected) << c.name;
}

INSTANTIATE_TEST_SUITE_P(
    Routes, VerdictTest,
    ::testing::Combine(::testing::ValuesIn(Cases()),
                       ::testing::Values(Route::kSingle, Route::kBatchAlone, Route::kBatchAmongFresh)),
    [](const ::testing::TestParamInfo<std::tuple<Case, Route>>& info) {
      const Route r = std::get<1>(info.param);
      return std::get<0>(info.param).name +
             (r == Route::kSingle ? "_Single" : r == Route::kBatchAlone ? "_BatchAlone" : "_BatchAmongFresh");
    });

// A batch answers each key as the single route would, in request order, with repeats inside the batch itself
// decided in order (the first new, the second duplicate).
TEST(Verdict, BatchRepeatsInsideTheBatch) {
  for (AckMode ack : {AckMode::kCommit, AckMode::kFilter}) {
    Case c{.name = "inside", .ack = ack, .expected = ""};
    Rig rig(c);
    const auto got = rig.Observe({"inside-a", "inside-b", "inside-a"}, Route::kBatchAlone);
    ASSERT_EQ(got.size(), 3U);
    EXPECT_EQ(got[0], "new/filter");
    EXPECT_EQ(got[1], "new/filter");
    EXPECT_EQ(got[2], "duplicate/exact");
  }
}

// --keys=gs1: a pack's `new` always comes from the exact path in ack=filter (the filter cannot vouch for a pack
// kept past its window) and nothing is written behind; a repeat with another lot is a duplicate flagged `lot`,
// decided by the store (the recent set is keyed by the attributes too); an identical repeat is answered from the
// recent set without the store; a string that is not a pack is a 400 before anything is decided.
TEST(Verdict, Gs1PacksAreDecidedExactlyAndMismatchesFlagged) {
  for (AckMode ack : {AckMode::kCommit, AckMode::kFilter}) {
    SCOPED_TRACE(ack == AckMode::kFilter ? "ack=filter" : "ack=commit");
    Case c{.name = "gs1", .ack = ack, .keys = KeysMode::kGs1, .expected = ""};
    Rig rig(c);
    const std::string lot_a = "010036141403000821SN1\x1d" "10A";
    const std::string lot_b = "(01)00361414030008(10)B(21)SN1";
    EXPECT_EQ(rig.Observe({lot_a}, Route::kSingle).at(0), ack == AckMode::kFilter ? "new/exact" : "new/filter");
    EXPECT_EQ(rig.store().write_behinds, 0);
    const int submits = rig.store().submits;
    EXPECT_EQ(rig.Observe({lot_b}, Route::kSingle).at(0), "duplicate/exact mismatch=lot");
    EXPECT_EQ(rig.store().submits, submits + 1) << "a differing scan must reach the record";
    EXPECT_EQ(rig.Observe({lot_a}, Route::kSingle).at(0), "duplicate/exact");
    EXPECT_EQ(rig.store().submits, submits + 1) << "an identical repeat is a recent-set hit";
    const auto batch = rig.Observe({lot_b, lot_a}, Route::kBatchAlone);
    EXPECT_EQ(batch.at(0), "duplicate/exact mismatch=lot");
    EXPECT_EQ(batch.at(1), "duplicate/exact");
    const int before_bad = rig.store().submits;
    EXPECT_EQ(rig.Observe({"010036141403000721SN2"}, Route::kSingle).at(0), "400 invalid-gs1");
    EXPECT_EQ(rig.Observe({"010036141403000821SN3", "21SN4"}, Route::kBatchAlone).at(0), "400 invalid-gs1");
    EXPECT_EQ(rig.store().submits, before_bad) << "a refused request decides nothing";
  }
}

// Idempotency-Key (issue 34), in both ack modes: the first request with the header is new — decided by the store
// in ack=commit, by the filter in ack=filter (written behind with its request record); its retry (same scope,
// same idempotency key) is new again, replayed — from the recent set, which keeps the recording request's record:
// the store is not asked; another idempotency key, another scope or no header is a duplicate, from the set too.
TEST(Verdict, IdempotentRetryIsReplayedARepeatIsDuplicate) {
  for (AckMode ack : {AckMode::kCommit, AckMode::kFilter}) {
    SCOPED_TRACE(ack == AckMode::kCommit ? "ack=commit" : "ack=filter");
    Case c{.name = "idempotent", .ack = ack, .expected = ""};
    Rig rig(c);
    const Verdict first = rig.ObserveOne(Observation{"idem-a", "till-1", "r-1", "source:till-1"});
    EXPECT_TRUE(first.is_new);
    EXPECT_FALSE(first.replayed);
    EXPECT_TRUE(first.via_filter);  // ack=filter: the verdict; ack=commit: confirmed by the store
    EXPECT_EQ(rig.store().write_behinds, ack == AckMode::kFilter ? 1 : 0);
    const int submits = rig.store().submits;
    for (int i = 0; i < 2; ++i) {
      const Verdict retry = rig.ObserveOne(Observation{"idem-a", "till-1", "r-1", "source:till-1"});
      EXPECT_TRUE(retry.is_new);
      EXPECT_TRUE(retry.replayed);
      EXPECT_FALSE(retry.via_filter);
      EXPECT_EQ(retry.digest_hex, first.digest_hex);
    }
    for (const Observation& o : {Observation{"idem-a", "till-1", "r-2", "source:till-1"},
                                 Observation{"idem-a", "till-2", "r-1", "source:till-2"},
                                 Observation{"idem-a", "till-1", "", ""}}) {
      const Verdict v = rig.ObserveOne(o);
      EXPECT_FALSE(v.is_new) << o.idempotency_key << " " << o.scope;
      EXPECT_FALSE(v.replayed);
      EXPECT_EQ(v.first_seen, first.first_seen.empty() ? v.first_seen : first.first_seen);
      EXPECT_FALSE(v.first_seen.empty());
    }
    EXPECT_EQ(rig.store().submits, submits) << "a retry or a second scan of a key in the recent set asked the store";
    const MetricsSnapshot m = rig.Counters();
    EXPECT_EQ(m.idempotent_replays, 2u);
    EXPECT_EQ(m.recent_replays, 2u);
    EXPECT_EQ(m.recent_hits, 3u);
  }
}

// A key recorded without the header is a duplicate for a request with one (it is not the recording request's
// retry), from the recent set; a key recorded by a request with a record is a duplicate for a request without.
TEST(Verdict, RecordedWithoutARecordIsADuplicateForAnyRequest) {
  for (AckMode ack : {AckMode::kCommit, AckMode::kFilter}) {
    SCOPED_TRACE(ack == AckMode::kCommit ? "ack=commit" : "ack=filter");
    Case c{.name = "idempotent-none", .ack = ack, .expected = ""};
    Rig rig(c);
    EXPECT_TRUE(rig.ObserveOne(Observation{"plain", "till-1", "", ""}).is_new);
    const int submits = rig.store().submits;
    const Verdict v = rig.ObserveOne(Observation{"plain", "till-1", "r-1", "source:till-1"});
    EXPECT_FALSE(v.is_new);
    EXPECT_FALSE(v.replayed);
    EXPECT_EQ(rig.store().submits, submits) << "a known absence of a record is an answer";
    EXPECT_EQ(rig.Counters().recent_hits, 1u);
  }
}

// The recorder of an entry is unknown when its source did not carry it: a row learned by --follow
// (LearnCommitted), a duplicate whose row's record the statement did not read (a raw batch). A request with an
// Idempotency-Key then asks the store (a request without one is still answered from the set); the store's answer
// reads the row's record, which the entry learns (same first_seen: the same row), so the next retry is answered
// from the set. Both ack modes; a retry of the recording request and a second scan alike.
TEST(Verdict, UnknownRecorderSendsAnIdempotentRequestToTheStore) {
  for (const auto& [ack, learned] : {std::pair{AckMode::kCommit, true}, std::pair{AckMode::kCommit, false},
                                     std::pair{AckMode::kFilter, false}}) {
    {
      SCOPED_TRACE(std::string(ack == AckMode::kCommit ? "ack=commit" : "ack=filter") +
                   (learned ? ", learned from a follower" : ", a raw duplicate"));
      Case c{.name = "idempotent-unknown", .ack = ack, .expected = ""};
      Rig rig(c);
      const Digest d = Digester::Sha256()("elsewhere");
      const std::int64_t first_seen = KeyReader::SystemNowUs() - 1'000'000;
      storage::PackAttrs row;
      row.request = KeyReader(Digester::Sha256(), KeysMode::kRaw, std::chrono::seconds(0))
                        .RequestIdOf("source:till-9", "r-9");  // another instance's request recorded it
      rig.store().RecordRow(d, first_seen, row);
      // Another instance's key is in the filter (--follow sets it there), so the filter does not vouch for it.
      rig.filter().InsertBatchConcurrently(std::span<const Digest>(&d, 1));
      if (learned) {
        rig.service().LearnCommitted(std::span<const Digest>(&d, 1), std::span<const std::int64_t>(&first_seen, 1));
      } else {
        rig.store().request_known = false;  // the duplicate's row record not read
        EXPECT_FALSE(rig.ObserveOne(Observation{"elsewhere", "till-1", "", ""}).is_new);
        rig.store().request_known = true;
      }
      int submits = rig.store().submits;
      EXPECT_FALSE(rig.ObserveOne(Observation{"elsewhere", "till-1", "", ""}).is_new);
      EXPECT_EQ(rig.store().submits, submits) << "a request without a record is answered from the set";
      const Verdict second_scan = rig.ObserveOne(Observation{"elsewhere", "till-1", "r-1", "source:till-1"});
      EXPECT_FALSE(second_scan.is_new);
      EXPECT_FALSE(second_scan.replayed);
      EXPECT_EQ(rig.store().submits, submits + 1) << "an unknown recorder answered a request with a record";
      submits = rig.store().submits;
      const Verdict retry = rig.ObserveOne(Observation{"elsewhere", "till-9", "r-9", "source:till-9"});
      EXPECT_TRUE(retry.replayed) << "the recording request's retry, answered from a learned recorder";
      EXPECT_EQ(rig.store().submits, submits) << "the row's record, read once, was not kept";
      EXPECT_EQ(rig.Counters().recent_replays, 1u);
    }
  }
}

// --keys=gs1: a pack's retry is replayed and its second scan (the same lot and expiry) is a duplicate from the
// recent set, keyed by the pack's attributes; a second scan with another lot still reaches the record (mismatch).
TEST(Verdict, Gs1PackRetryIsReplayedFromTheRecentSet) {
  for (AckMode ack : {AckMode::kCommit, AckMode::kFilter}) {
    SCOPED_TRACE(ack == AckMode::kCommit ? "ack=commit" : "ack=filter");
    Case c{.name = "gs1-idempotent", .ack = ack, .keys = KeysMode::kGs1, .expected = ""};
    Rig rig(c);
    const std::string pack = "(01)00361414030008(17)291231(10)A(21)SN9";
    EXPECT_TRUE(rig.ObserveOne(Observation{pack, "till-1", "r-1", "source:till-1"}).is_new);
    const int submits = rig.store().submits;
    const Verdict retry = rig.ObserveOne(Observation{pack, "till-1", "r-1", "source:till-1"});
    EXPECT_TRUE(retry.replayed);
    const Verdict again = rig.ObserveOne(Observation{pack, "till-1", "r-2", "source:till-1"});
    EXPECT_FALSE(again.is_new);
    EXPECT_EQ(again.mismatch, 0);
    EXPECT_EQ(rig.store().submits, submits) << "a pack's retry or second scan asked the store";
    const Verdict other_lot =
        rig.ObserveOne(Observation{"(01)00361414030008(17)291231(10)B(21)SN9", "till-1", "r-3", "source:till-1"});
    EXPECT_FALSE(other_lot.is_new);
    EXPECT_EQ(other_lot.mismatch, kMismatchLot);
    EXPECT_EQ(rig.store().submits, submits + 1);
  }
}

// Past the horizon (--retention) an entry answers nothing, for a retry either: the store decides.
TEST(Verdict, IdempotentRetryPastTheHorizonAsksTheStore) {
  Case c{.name = "idempotent-horizon", .retention = std::chrono::seconds(1), .expected = ""};
  Rig rig(c);
  EXPECT_TRUE(rig.ObserveOne(Observation{"idem-h", "till-1", "r-1", "source:till-1"}).is_new);
  const int submits = rig.store().submits;
  EXPECT_TRUE(rig.ObserveOne(Observation{"idem-h", "till-1", "r-1", "source:till-1"}).replayed);
  EXPECT_EQ(rig.store().submits, submits);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // the record's first_seen leaves the horizon
  rig.ObserveOne(Observation{"idem-h", "till-1", "r-1", "source:till-1"});
  EXPECT_EQ(rig.store().submits, submits + 1) << "an entry past the horizon answered a retry";
}

}  // namespace
}  // namespace scangate::server
