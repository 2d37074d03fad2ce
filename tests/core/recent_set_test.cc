// Tests of core/recent_set.h: the bound holds, eviction only forgets (a digest is found with the first_seen
// it was inserted with, or not at all), a digest never inserted is never found, each entry keeps the recorder of
// its first record (known request, known none, unknown kept apart; through rotations; replaced only past the
// horizon or by PostgreSQL's newer row), and concurrent inserts and lookups keep all of that
// (RecentSetConcurrency also runs under ThreadSanitizer, scripts/test.sh).
#include "core/recent_set.h"
#include "tests/core/counter_digest.h"

#include <atomic>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace scangate {
namespace {

Digest DigestOf(std::uint64_t n, std::uint64_t salt = 0) { return test_support::CounterDigest(n, salt); }

// The first_seen a test inserts for digest n: a pure function, so any hit can be checked.
std::int64_t TimeOf(std::uint64_t n) { return 1'764'000'000'000'000 + static_cast<std::int64_t>(n) * 7; }

// A request record derived from n (and a salt): distinct records for distinct (n, salt).
RequestRecord RecordOf(std::uint64_t n, std::uint8_t salt = 0) {
  RequestRecord r{};
  std::memcpy(r.data(), &n, sizeof n);
  r[15] = salt;
  r[14] = 0x5a;  // never all zero
  return r;
}
// The recorder a test inserts for digest n: a known request, known none or unknown by n % 3.
Recorder RecorderOf(std::uint64_t n) {
  switch (n % 3) {
    case 0:
      return Recorder::Of(RecordOf(n));
    case 1:
      return Recorder::Of(std::nullopt);
    default:
      return Recorder::Unknown();
  }
}

// The first_seen `d` is held with, if held (the entry's recorder aside).
std::optional<std::int64_t> TimeFound(RecentSet& s, const Digest& d) {
  const auto e = s.FindConcurrently(d);
  return e ? std::optional<std::int64_t>(e->first_seen_us) : std::nullopt;
}
// An insert of a record whose recorder does not matter to the test (unknown).
void Insert(RecentSet& s, const Digest& d, std::int64_t t,
            std::int64_t expired_before = std::numeric_limits<std::int64_t>::min()) {
  s.InsertConcurrently(d, t, Recorder::Unknown(), expired_before);
}

// Disabled: nothing is held, nothing is found.
TEST(RecentSet, ZeroCapacityDisables) {
  RecentSet s(0);
  EXPECT_FALSE(s.enabled());
  Insert(s, DigestOf(1), TimeOf(1));
  EXPECT_FALSE(TimeFound(s, DigestOf(1)).has_value());
  EXPECT_EQ(s.size(), 0u);
  EXPECT_EQ(s.bound(), 0u);
}

// Inserted digests are found with their first_seen; others are not; a second insert keeps the first time.
TEST(RecentSet, FindsWhatWasInsertedOnly) {
  RecentSet s(1000);
  for (std::uint64_t n = 0; n < 100; ++n) Insert(s, DigestOf(n), TimeOf(n));
  for (std::uint64_t n = 0; n < 100; ++n) {
    const auto t = TimeFound(s, DigestOf(n));
    ASSERT_TRUE(t.has_value()) << n;
    EXPECT_EQ(*t, TimeOf(n));
  }
  for (std::uint64_t n = 100; n < 10'000; ++n) EXPECT_FALSE(TimeFound(s, DigestOf(n)).has_value()) << n;
  Insert(s, DigestOf(5), TimeOf(5) + 1'000'000);
  EXPECT_EQ(TimeFound(s, DigestOf(5)), TimeOf(5)) << "a later insert replaced the first record";
  EXPECT_EQ(s.size(), 100u);
}

// A digest is known by its stored form (issue 45): the full digest finds what its stored form (as the follower reads it
// back from PostgreSQL) recorded and vice versa, with that record's first_seen; other digests are not found.
TEST(RecentSet, StoredFormIsTheSameKey) {
  RecentSet s(100'000);
  for (std::uint64_t n = 0; n < 2000; ++n) {
    const Digest full = DigestOf(n, 45);
    Insert(s, n % 2 == 0 ? StoredDigest(full) : full, TimeOf(n));
  }
  for (std::uint64_t n = 0; n < 2000; ++n) {
    const Digest full = DigestOf(n, 45);
    EXPECT_EQ(TimeFound(s, n % 2 == 0 ? full : StoredDigest(full)), TimeOf(n)) << n;
  }
  for (std::uint64_t n = 2000; n < 4000; ++n) EXPECT_FALSE(s.FindConcurrently(DigestOf(n, 45)).has_value()) << n;
  EXPECT_EQ(s.size(), 2000u);
}

// The geometry never exceeds the capacity, over small and large capacities, and loses little of it.
TEST(RecentSet, GeometryWithinCapacity) {
  for (std::uint64_t cap : {1ull, 2ull, 3ull, 10ull, 1000ull, 1791ull, 1792ull, 5000ull, 100'000ull, 1'048'576ull,
                            10'000'000ull, 123'456'789ull}) {
    RecentSet s(cap);
    SCOPED_TRACE(cap);
    EXPECT_LE(s.bound(), std::max<std::uint64_t>(cap, 2));
    if (cap >= 1792) {
      EXPECT_GE(s.shards(), 64u);
      EXPECT_LT(s.shards(), 128u);
      EXPECT_GE(s.bound(), cap - cap / 64) << "more than 1/64 of the capacity lost to rounding";
      const std::uint64_t g = s.generation_capacity();
      EXPECT_EQ(g % 7, 0u);
      EXPECT_EQ((g / 7) & (g / 7 - 1), 0u) << "generation is not 7/8 of a power of two: " << g;
    }
  }
}

// Far more inserts than the capacity: the size never exceeds the bound, every hit carries its own
// first_seen (eviction only forgets), and the most recent keys are still held.
TEST(RecentSet, BoundHoldsAndEvictionOnlyForgets) {
  for (std::uint64_t cap : {10ull, 5000ull, 50'000ull}) {
    SCOPED_TRACE(cap);
    RecentSet s(cap);
    const std::uint64_t total = cap * 20;
    for (std::uint64_t n = 0; n < total; ++n) {
      Insert(s, DigestOf(n), TimeOf(n));
      if (n % (cap / 4 + 1) == 0) {
        ASSERT_LE(s.size(), s.bound()) << "after " << n << " inserts";
      }
    }
    EXPECT_LE(s.size(), s.bound());
    EXPECT_GT(s.rotations(), 0u);
    // Checked first (a lookup promotes a hit, so the full scan below reorders the set). Generation rotation
    // keeps at least the last generation's worth per shard: the last inserted key is
    // always held, and so is (nearly) the most recent half of the capacity.
    EXPECT_TRUE(TimeFound(s, DigestOf(total - 1)).has_value());
    std::uint64_t recent_held = 0;
    const std::uint64_t recent = s.bound() / 4;
    for (std::uint64_t n = total - recent; n < total; ++n) recent_held += TimeFound(s, DigestOf(n)).has_value();
    EXPECT_GE(recent_held * 10, recent * 9) << "too few of the most recent keys held";
    std::uint64_t held = 0;
    for (std::uint64_t n = 0; n < total; ++n) {
      const auto t = TimeFound(s, DigestOf(n));
      if (!t) continue;
      ++held;
      ASSERT_EQ(*t, TimeOf(n)) << "digest " << n << " found with another digest's first_seen";
    }
    EXPECT_LE(held, s.bound());
    // Never inserted: never found, however full.
    for (std::uint64_t n = 0; n < 10'000; ++n) EXPECT_FALSE(TimeFound(s, DigestOf(n, 99)).has_value());
  }
}

// A digest that keeps being looked up survives rotations (a hit in the previous generation promotes it).
TEST(RecentSet, RepeatedKeySurvivesRotations) {
  RecentSet s(5000);
  const Digest hot = DigestOf(1, 7);
  Insert(s, hot, 42);
  for (std::uint64_t n = 0; n < 100'000; ++n) {
    Insert(s, DigestOf(n), TimeOf(n));
    if (n % 500 == 0) {
      ASSERT_EQ(TimeFound(s, hot), 42) << "after " << n << " inserts";
    }
  }
  EXPECT_GT(s.rotations(), 10u);
}

// Fills the single shard of a RecentSet(10) (one shard, generations of 5) so that the entries inserted before
// are rotated into the previous generation: returns the rotations seen (1 when it worked).
std::uint64_t RotateOnce(RecentSet& s, std::uint64_t salt) {
  EXPECT_EQ(s.shards(), 1u);
  EXPECT_EQ(s.generation_capacity(), 5u);
  const std::uint64_t before = s.rotations();
  // With 1 or 2 entries in the current generation, 5 inserts fill it and rotate it exactly once.
  for (std::uint64_t n = 0; n < 5; ++n) Insert(s, DigestOf(n, salt), TimeOf(n));
  return s.rotations() - before;
}

// expired_before_us (the horizon's edge): an entry held in the current generation with a first_seen older than
// it is replaced by the new record; one at or after it keeps its own first_seen (the first record wins).
TEST(RecentSet, ExpiredEntryInCurrentGenerationIsReplaced) {
  RecentSet s(1000);
  const std::int64_t edge = TimeOf(1000);
  const Digest old_key = DigestOf(1, 5), young_key = DigestOf(2, 5), at_edge = DigestOf(3, 5);
  Insert(s, old_key, edge - 1);
  Insert(s, young_key, edge + 1);
  Insert(s, at_edge, edge);
  const std::int64_t now = edge + 3'600'000'000;
  for (const Digest& d : {old_key, young_key, at_edge}) Insert(s, d, now, edge);
  EXPECT_EQ(TimeFound(s, old_key), now) << "an expired entry kept its first_seen";
  EXPECT_EQ(TimeFound(s, young_key), edge + 1) << "an entry within the horizon was replaced";
  EXPECT_EQ(TimeFound(s, at_edge), edge) << "an entry exactly at the edge is not older than it";
  EXPECT_EQ(s.size(), 3u);  // replaced in place, not added
  // The replacement is the first record now: a later one within the horizon does not replace it.
  Insert(s, old_key, now + 5, edge);
  EXPECT_EQ(TimeFound(s, old_key), now);
}

// The same for an entry in the previous generation (refreshed into the current one either way): expired ->
// the new record's first_seen; within the horizon -> its own.
TEST(RecentSet, ExpiredEntryInPreviousGenerationIsReplaced) {
  const std::int64_t edge = TimeOf(1000);
  const std::int64_t now = edge + 3'600'000'000;
  for (const bool expired : {true, false}) {
    SCOPED_TRACE(expired ? "expired" : "within the horizon");
    RecentSet s(10);
    const Digest d = DigestOf(42, 6);
    const std::int64_t first = expired ? edge - 1'000'000 : edge + 1'000'000;
    Insert(s, d, first);
    ASSERT_EQ(RotateOnce(s, 7), 1u);  // d is in the previous generation now (not looked up: no promotion)
    Insert(s, d, now, edge);
    EXPECT_EQ(TimeFound(s, d), expired ? now : first);
    EXPECT_EQ(s.size(), 6u) << "moved to the current generation, not copied";  // 4 previous + f5 + d
    // Held in the current generation now: another rotation keeps it (in the previous one), with that time.
    ASSERT_EQ(RotateOnce(s, 8), 1u);
    EXPECT_EQ(TimeFound(s, d), expired ? now : first);
  }
}

// Without expired_before_us (retention off) the first record wins however old it is, in either generation.
TEST(RecentSet, DefaultHorizonKeepsTheFirstRecord) {
  const std::int64_t ancient = -1'000'000'000'000'000;  // 1938: older than any horizon's edge would be
  RecentSet current(1000);
  Insert(current, DigestOf(1, 9), ancient);
  Insert(current, DigestOf(1, 9), TimeOf(1));
  EXPECT_EQ(TimeFound(current, DigestOf(1, 9)), ancient);
  RecentSet previous(10);
  Insert(previous, DigestOf(1, 9), ancient);
  ASSERT_EQ(RotateOnce(previous, 10), 1u);
  Insert(previous, DigestOf(1, 9), TimeOf(1));
  EXPECT_EQ(TimeFound(previous, DigestOf(1, 9)), ancient);
}

// A request's record, a known absence of one and an unknown recorder are three different entries: each is found
// as it was inserted, and only a known request matches its own record.
TEST(RecentSet, RecorderIsKeptKnownNoneAndUnknownApart) {
  RecentSet s(1000);
  const Digest with = DigestOf(1, 11), none = DigestOf(2, 11), unknown = DigestOf(3, 11);
  s.InsertConcurrently(with, TimeOf(1), Recorder::Of(RecordOf(1)));
  s.InsertConcurrently(none, TimeOf(2), Recorder::Of(std::nullopt));
  s.InsertConcurrently(unknown, TimeOf(3), Recorder::Unknown());
  const auto w = s.FindConcurrently(with), n = s.FindConcurrently(none), u = s.FindConcurrently(unknown);
  ASSERT_TRUE(w && n && u);
  EXPECT_EQ(w->first_seen_us, TimeOf(1));
  EXPECT_EQ(w->recorder.state, Recorder::State::kRequest);
  EXPECT_TRUE(w->recorder.Is(RecordOf(1)));
  EXPECT_FALSE(w->recorder.Is(RecordOf(2))) << "another request's record matched";
  EXPECT_EQ(n->recorder.state, Recorder::State::kNone);
  EXPECT_TRUE(n->recorder.known()) << "recorded without a record is known, not unknown";
  EXPECT_FALSE(n->recorder.Is(RecordOf(2)));
  EXPECT_EQ(u->recorder.state, Recorder::State::kUnknown);
  EXPECT_FALSE(u->recorder.known()) << "an unknown recorder read as known";
  EXPECT_FALSE(u->recorder.Is(RecordOf(3)));
  // A record of all zero bytes is a record like any other, not "none".
  const Digest zero = DigestOf(4, 11);
  s.InsertConcurrently(zero, TimeOf(4), Recorder::Of(RequestRecord{}));
  EXPECT_TRUE(s.FindConcurrently(zero)->recorder.Is(RequestRecord{}));
}

// The first record wins for the recorder as for first_seen: a later insert within the horizon — another request,
// none, unknown — never replaces a known recorder; an unknown one learns the recorder of a record with the same
// first_seen (the same row read again), never of another first_seen. In either generation.
TEST(RecentSet, FirstRecorderWinsAndUnknownLearnsOnlyFromTheSameRow) {
  for (const bool rotated : {false, true}) {
    SCOPED_TRACE(rotated ? "previous generation" : "current generation");
    RecentSet s(10);
    const Digest known = DigestOf(1, 12), unknown = DigestOf(2, 12), other_row = DigestOf(3, 12);
    s.InsertConcurrently(known, TimeOf(1), Recorder::Of(RecordOf(1)));
    s.InsertConcurrently(unknown, TimeOf(2), Recorder::Unknown());
    s.InsertConcurrently(other_row, TimeOf(3), Recorder::Unknown());
    if (rotated) {
      ASSERT_EQ(RotateOnce(s, 13), 1u);  // the three are in the previous generation now
    }
    for (const Recorder& later : {Recorder::Of(RecordOf(9)), Recorder::Of(std::nullopt), Recorder::Unknown()}) {
      s.InsertConcurrently(known, TimeOf(1), later);
      s.InsertConcurrently(known, TimeOf(1) + 5, later);
    }
    auto k = s.FindConcurrently(known);
    ASSERT_TRUE(k);
    EXPECT_EQ(k->first_seen_us, TimeOf(1));
    EXPECT_TRUE(k->recorder.Is(RecordOf(1))) << "a later request's recorder replaced the first one";
    s.InsertConcurrently(unknown, TimeOf(2), Recorder::Unknown());
    EXPECT_FALSE(s.FindConcurrently(unknown)->recorder.known());
    s.InsertConcurrently(unknown, TimeOf(2), Recorder::Of(RecordOf(2)));  // the same row, read with its record
    EXPECT_TRUE(s.FindConcurrently(unknown)->recorder.Is(RecordOf(2)));
    s.InsertConcurrently(unknown, TimeOf(2), Recorder::Of(RecordOf(7)));  // known now: the first record wins
    EXPECT_TRUE(s.FindConcurrently(unknown)->recorder.Is(RecordOf(2)));
    s.InsertConcurrently(other_row, TimeOf(3) + 1, Recorder::Of(RecordOf(3)));  // another first_seen: another row
    const auto o = s.FindConcurrently(other_row);
    EXPECT_EQ(o->first_seen_us, TimeOf(3));
    EXPECT_FALSE(o->recorder.known()) << "an unknown entry took the recorder of another row";
    if (!rotated) {
      EXPECT_EQ(s.size(), 3u);  // merged in place, never added twice
    }
    EXPECT_LE(s.size(), s.bound());
  }
}

// Rotation moves an entry whole: in the previous generation, promoted back by a lookup or by an insert (an unknown
// one, which must not erase what is known), and rotated again, it keeps its first_seen and recorder.
TEST(RecentSet, RotationKeepsTheRecorder) {
  RecentSet s(10);
  const Digest d = DigestOf(42, 14), e = DigestOf(43, 14);
  s.InsertConcurrently(d, TimeOf(42), Recorder::Of(RecordOf(42)));
  s.InsertConcurrently(e, TimeOf(43), Recorder::Of(std::nullopt));
  ASSERT_EQ(RotateOnce(s, 15), 1u);  // d, e in the previous generation
  auto fd = s.FindConcurrently(d);   // promoted by the lookup
  ASSERT_TRUE(fd);
  EXPECT_EQ(fd->first_seen_us, TimeOf(42));
  EXPECT_TRUE(fd->recorder.Is(RecordOf(42)));
  s.InsertConcurrently(e, TimeOf(43), Recorder::Unknown());  // promoted by an insert
  auto fe = s.FindConcurrently(e);
  ASSERT_TRUE(fe);
  EXPECT_EQ(fe->recorder.state, Recorder::State::kNone) << "promotion by an unknown insert lost the recorder";
  ASSERT_EQ(RotateOnce(s, 16), 1u);  // both rotated into the previous generation again
  fd = s.FindConcurrently(d);
  fe = s.FindConcurrently(e);
  ASSERT_TRUE(fd && fe) << "promoted entries were dropped by the next rotation";
  EXPECT_EQ(fd->first_seen_us, TimeOf(42));
  EXPECT_TRUE(fd->recorder.Is(RecordOf(42)));
  EXPECT_EQ(fe->first_seen_us, TimeOf(43));
  EXPECT_EQ(fe->recorder.state, Recorder::State::kNone);
}

// Past the horizon an entry is replaced whole, recorder included, by the record that took the expired one over —
// a known request, none, or an unknown recorder alike. Within the horizon it is not.
TEST(RecentSet, ExpiredEntryIsTakenOverWithItsRecorder) {
  const std::int64_t edge = TimeOf(1000);
  const std::int64_t now = edge + 3'600'000'000;
  for (const bool rotated : {false, true}) {
    SCOPED_TRACE(rotated ? "previous generation" : "current generation");
    RecentSet s(10);
    const Digest a = DigestOf(1, 18), b = DigestOf(2, 18), c = DigestOf(3, 18);
    s.InsertConcurrently(a, edge - 1, Recorder::Of(RecordOf(1)));
    s.InsertConcurrently(b, edge - 1, Recorder::Of(RecordOf(2)));
    s.InsertConcurrently(c, edge + 1, Recorder::Of(RecordOf(3)));
    if (rotated) {
      ASSERT_EQ(RotateOnce(s, 19), 1u);
    }
    s.InsertConcurrently(a, now, Recorder::Of(RecordOf(11)), edge);
    s.InsertConcurrently(b, now, Recorder::Unknown(), edge);
    s.InsertConcurrently(c, now, Recorder::Of(RecordOf(13)), edge);
    const auto fa = s.FindConcurrently(a), fb = s.FindConcurrently(b), fc = s.FindConcurrently(c);
    ASSERT_TRUE(fa && fb && fc);
    EXPECT_EQ(fa->first_seen_us, now);
    EXPECT_TRUE(fa->recorder.Is(RecordOf(11))) << "the expired record's request survived the take-over";
    EXPECT_EQ(fb->first_seen_us, now);
    EXPECT_FALSE(fb->recorder.known()) << "the expired record's request survived an unknown take-over";
    EXPECT_EQ(fc->first_seen_us, edge + 1);
    EXPECT_TRUE(fc->recorder.Is(RecordOf(3)));
  }
}

// Fact::kInsertedNow: PostgreSQL inserted (or took over) the row now. A held entry with an earlier first_seen —
// a row taken over while this clock still saw it within the horizon — is replaced, recorder included; a held
// entry with a later one (a stale report arriving late) is kept; kRecorded never replaces it.
TEST(RecentSet, InsertedNowReplacesAnEarlierRowOnly) {
  for (const bool rotated : {false, true}) {
    SCOPED_TRACE(rotated ? "previous generation" : "current generation");
    RecentSet s(10);
    const Digest d = DigestOf(1, 20);
    s.InsertConcurrently(d, TimeOf(1), Recorder::Of(RecordOf(1)));
    if (rotated) {
      ASSERT_EQ(RotateOnce(s, 21), 1u);
    }
    s.InsertConcurrently(d, TimeOf(1) + 100, Recorder::Of(RecordOf(2)));  // kRecorded: the first record wins
    EXPECT_TRUE(s.FindConcurrently(d)->recorder.Is(RecordOf(1)));
    s.InsertConcurrently(d, TimeOf(1) + 100, Recorder::Of(RecordOf(2)), std::numeric_limits<std::int64_t>::min(),
                         RecentSet::Fact::kInsertedNow);
    auto f = s.FindConcurrently(d);
    EXPECT_EQ(f->first_seen_us, TimeOf(1) + 100);
    EXPECT_TRUE(f->recorder.Is(RecordOf(2))) << "PostgreSQL's new row did not replace the taken-over one";
    s.InsertConcurrently(d, TimeOf(1), Recorder::Of(RecordOf(1)), std::numeric_limits<std::int64_t>::min(),
                         RecentSet::Fact::kInsertedNow);  // the old row's insert, reported late
    f = s.FindConcurrently(d);
    EXPECT_EQ(f->first_seen_us, TimeOf(1) + 100);
    EXPECT_TRUE(f->recorder.Is(RecordOf(2))) << "a stale insert replaced the newer row";
  }
}

// Threads insert disjoint ranges and look up everything (their own, others', never-inserted) at once: every
// hit carries the first_seen and recorder of its digest, never-inserted digests are never found, the bound holds.
TEST(RecentSetConcurrency, ConcurrentInsertAndFind) {
  constexpr int kThreads = 4;
  constexpr std::uint64_t kPerThread = 40'000;
  RecentSet s(20'000);  // smaller than what is inserted: rotations run concurrently with lookups
  std::atomic<std::uint64_t> wrong{0}, phantom{0}, hits{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<std::uint64_t>(t));
      for (std::uint64_t i = 0; i < kPerThread; ++i) {
        const std::uint64_t n = static_cast<std::uint64_t>(t) * kPerThread + i;
        s.InsertConcurrently(DigestOf(n), TimeOf(n), RecorderOf(n));
        const std::uint64_t probe = rng() % (kThreads * kPerThread);
        if (const auto f = s.FindConcurrently(DigestOf(probe))) {
          hits.fetch_add(1, std::memory_order_relaxed);  // relaxed: counted only, read after join
          if (f->first_seen_us != TimeOf(probe) || !(f->recorder == RecorderOf(probe))) {
            wrong.fetch_add(1, std::memory_order_relaxed);
          }
        }
        if (s.FindConcurrently(DigestOf(probe, 99))) phantom.fetch_add(1, std::memory_order_relaxed);
        if (i % 4096 == 0 && s.size() > s.bound()) wrong.fetch_add(1000000, std::memory_order_relaxed);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_EQ(phantom.load(), 0u);
  EXPECT_GT(hits.load(), 0u);
  EXPECT_LE(s.size(), s.bound());
}

// Threads record the same digests at once, each as recorded by its own request (the same first_seen: one row),
// some as unknown: whichever known recorder comes first is kept for good — every lookup of a digest then sees that
// one, never a mix of two records, never an unknown once a known one was seen — and rotations run meanwhile.
TEST(RecentSetConcurrency, RacingRecordersSettleOnOne) {
  constexpr int kThreads = 4;
  constexpr std::uint64_t kKeys = 2'000;
  RecentSet s(1'000'000);  // every key held: the first recorder must stick
  std::atomic<std::uint64_t> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::optional<RequestRecord>> seen(kKeys);
      for (int round = 0; round < 5; ++round) {
        for (std::uint64_t n = 0; n < kKeys; ++n) {
          const Recorder mine =
              (n + static_cast<std::uint64_t>(t)) % 4 == 0 ? Recorder::Unknown()
                                                           : Recorder::Of(RecordOf(n, static_cast<std::uint8_t>(t)));
          s.InsertConcurrently(DigestOf(n, 21), TimeOf(n), mine);
          const auto f = s.FindConcurrently(DigestOf(n, 21));
          if (!f || f->first_seen_us != TimeOf(n)) {
            wrong.fetch_add(1, std::memory_order_relaxed);  // relaxed: counted only, read after join
            continue;
          }
          if (!f->recorder.known()) {
            if (seen[n]) wrong.fetch_add(1, std::memory_order_relaxed);  // known, then unknown again
            continue;
          }
          const RequestRecord r = f->recorder.request;
          bool ours = false;  // one of the threads' records for n, whole
          for (int u = 0; u < kThreads; ++u) ours = ours || r == RecordOf(n, static_cast<std::uint8_t>(u));
          if (!ours || (seen[n] && *seen[n] != r)) wrong.fetch_add(1, std::memory_order_relaxed);
          seen[n] = r;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0u);
}

}  // namespace
}  // namespace scangate
