// Unit tests of storage/journal/journal.h: append/recover round trip, torn and corrupted tails (files written by the
// test) recovered as "good prefix applied, bad tail truncated", checkpoint + segment recycling, the bound,
// and directories of another database or of a running instance refused; faults (I/O error, removed folder,
// full disk on a small tmpfs when root) that make the journal unusable and heal by its probe. No PostgreSQL.
#include "storage/journal/journal.h"
#include "core/boot_clock.h"
#include "storage/partitions/partition_map.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <algorithm>
#include <iterator>
#include <string>
#include <set>
#include <vector>

namespace scangate::storage {
namespace {

namespace fs = std::filesystem;

std::string TempDir() {
  std::string tmpl = (fs::temp_directory_path() / "scangate-journal-test.XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  return tmpl;
}

JournalRecord Rec(int i) {
  JournalRecord r;
  for (std::size_t b = 0; b < r.digest.size(); ++b) r.digest[b] = static_cast<std::uint8_t>(i * 31 + b);
  r.time_us = 1'700'000'000'000'000 + i;
  r.source = i % 3 == 0 ? "" : "till-" + std::to_string(i);
  return r;
}

// Collects on_commit results; Wait() polls (bounded) until `n` records were reported.
struct Sink {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<JournalEntry> durable, rejected;
  std::size_t groups = 0;
  std::vector<JournalFate> fates;
  void operator()(std::vector<JournalEntry>& g, JournalFate fate) {
    const bool ok = fate == JournalFate::kDurable;
    std::lock_guard lk(mu);
    fates.push_back(fate);  // one per group
    ++groups;
    for (auto& e : g) (ok ? durable : rejected).push_back(e);
    cv.notify_all();
  }
  bool Wait(std::size_t n) {
    std::unique_lock lk(mu);
    return cv.wait_for(lk, std::chrono::seconds(20), [&] { return durable.size() + rejected.size() >= n; });
  }
};

struct JournalFiles : ::testing::Test {
  std::string dir = TempDir();
  Sink sink;
  ~JournalFiles() override { fs::remove_all(dir); }
  JournalOptions Options(std::string identity = "system_identifier=42 database=test") {
    JournalOptions o;
    o.dir = dir;
    o.identity = std::move(identity);
    o.on_commit = [this](std::vector<JournalEntry>& g, JournalFate fate) { sink(g, fate); };
    return o;
  }
  // Appends records [from, to) one group at a time when `per_group`, else all at once; waits for them.
  void Write(Journal& j, int from, int to, bool per_group = false) {
    const std::size_t before = sink.durable.size() + sink.rejected.size();
    for (int i = from; i < to; ++i) {
      ASSERT_TRUE(j.Append(Rec(i)));
      if (per_group) {
        ASSERT_TRUE(sink.Wait(before + static_cast<std::size_t>(i - from + 1)));
      }
    }
    ASSERT_TRUE(sink.Wait(before + static_cast<std::size_t>(to - from)));
  }
  std::vector<fs::path> Segments() {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().extension() == ".seg") out.push_back(e.path());
    }
    std::sort(out.begin(), out.end());
    return out;
  }
};

void ExpectRecords(const std::vector<JournalEntry>& got, int from, int to) {
  ASSERT_EQ(got.size(), static_cast<std::size_t>(to - from));
  for (int i = from; i < to; ++i) {
    const auto& e = got[static_cast<std::size_t>(i - from)];
    const JournalRecord want = Rec(i);
    EXPECT_EQ(e.record.digest, want.digest) << i;
    EXPECT_EQ(e.record.time_us, want.time_us) << i;
    EXPECT_EQ(e.record.source, want.source) << i;
  }
}

TEST(Journal, Crc32cCheckValue) { EXPECT_EQ(Crc32c("123456789"), 0xE3069283u); }

// Every appended record is reported durable and comes back, in order and intact, after a reopen.
TEST_F(JournalFiles, AppendRecoverRoundTrip) {
  {
    Journal j(Options());
    EXPECT_TRUE(j.TakeRecovered().empty());
    j.Start();
    Write(j, 0, 500);
    EXPECT_EQ(sink.durable.size(), 500u);
    EXPECT_LT(sink.groups, 500u) << "no group commit happened";  // 500 appends in a burst share fdatasyncs
    for (std::size_t i = 1; i < sink.durable.size(); ++i) EXPECT_GT(sink.durable[i].lsn, sink.durable[i - 1].lsn);
  }
  Journal j(Options());
  ExpectRecords(j.TakeRecovered(), 0, 500);
}

// Gathering under load (JournalOptions::max_gather): with records arriving from several threads without pause, the
// flusher waits before groups; every record is still reported durable exactly once, in LSN order, a lone record
// after the load is synced too, and stopping in the middle of a load ends (the gather's wait is cut short).
TEST_F(JournalFiles, GatheringUnderLoadKeepsEveryRecordOnceInOrder) {
  constexpr int kThreads = 4, kPerThread = 2000;
  {
    JournalOptions o = Options();
    o.max_gather = std::chrono::milliseconds(5);
    Journal j(o);
    j.Start();
    std::vector<std::thread> producers;
    for (int t = 0; t < kThreads; ++t) {
      producers.emplace_back([&j, t] {
        for (int i = 0; i < kPerThread; ++i) ASSERT_TRUE(j.Append(Rec(t * kPerThread + i)));
      });
    }
    for (auto& p : producers) p.join();
    ASSERT_TRUE(sink.Wait(kThreads * kPerThread));
    const std::size_t groups = sink.groups;
    ASSERT_TRUE(j.Append(Rec(kThreads * kPerThread)));  // alone after the load
    ASSERT_TRUE(sink.Wait(kThreads * kPerThread + 1));
    EXPECT_EQ(sink.groups, groups + 1);
    EXPECT_LT(sink.groups, static_cast<std::size_t>(kThreads * kPerThread / 4)) << "records were not grouped";
    // Stopped while records keep arriving: the destructor must not hang in a gather.
    for (int i = 0; i < 200; ++i) ASSERT_TRUE(j.Append(Rec(kThreads * kPerThread + 1 + i)));
  }
  std::set<std::uint64_t> lsns;
  std::lock_guard lk(sink.mu);
  EXPECT_TRUE(sink.rejected.empty());
  for (std::size_t i = 1; i < sink.durable.size(); ++i) EXPECT_GT(sink.durable[i].lsn, sink.durable[i - 1].lsn);
  for (const auto& e : sink.durable) EXPECT_TRUE(lsns.insert(e.lsn).second) << "reported twice: " << e.lsn;
  EXPECT_EQ(sink.durable.size(), static_cast<std::size_t>(kThreads * kPerThread + 1 + 200));
  Journal j(Options());
  EXPECT_EQ(j.TakeRecovered().size(), static_cast<std::size_t>(kThreads * kPerThread + 1 + 200));
}

// Idempotency records (issue 34): a record may carry the 16-byte request record after its source — also with a
// source of the longest length — and records without one (the format before issue 34) are read beside them.
TEST_F(JournalFiles, RequestRecordsRoundTripBesideRecordsWithout) {
  auto with_request = [](int i) {
    JournalRecord r = Rec(i);
    if (i % 2 == 1) {
      r.request.emplace();
      for (std::size_t b = 0; b < r.request->size(); ++b) r.request->at(b) = static_cast<std::uint8_t>(i + 7 * b);
    }
    if (i % 5 == 0) r.source.assign(kMaxJournalSource, 's');
    return r;
  };
  {
    Journal j(Options());
    j.Start();
    for (int i = 0; i < 40; ++i) ASSERT_TRUE(j.Append(with_request(i)));
    ASSERT_TRUE(sink.Wait(40));
    ASSERT_EQ(sink.durable.size(), 40u);
  }
  Journal j(Options());
  const std::vector<JournalEntry> got = j.TakeRecovered();
  ASSERT_EQ(got.size(), 40u);
  for (int i = 0; i < 40; ++i) {
    const JournalRecord want = with_request(i);
    const JournalRecord& r = got[static_cast<std::size_t>(i)].record;
    EXPECT_EQ(r.digest, want.digest) << i;
    EXPECT_EQ(r.source, want.source) << i;
    EXPECT_EQ(r.request, want.request) << i;
    if (i > 0) {  // 8-byte header + 41 fixed + source (+ 16 with a request)
      const JournalEntry& prev = got[static_cast<std::size_t>(i - 1)];
      EXPECT_EQ(got[static_cast<std::size_t>(i)].lsn - prev.lsn, 8 + 41 + prev.record.source.size() + (prev.record.request ? 16 : 0));
    }
  }
}

// oldest_uncommitted_ns: when (boot clock) the lowest-LSN record not yet Applied was appended (0 with none) — after
// appends, after Applied of the oldest (the next one's), of one in the middle (unchanged), of all (0), and after a
// reopen (a recovered record is uncommitted again, of unknown age: kAgeUnknown).
TEST_F(JournalFiles, OldestUncommittedFollowsApplied) {
  std::vector<std::pair<std::int64_t, std::int64_t>> appended;  // boot-clock bounds of each append
  {
    Journal j(Options());
    EXPECT_EQ(j.oldest_uncommitted_ns(Digest{}), 0);
    j.Start();
    for (int i = 0; i < 4; ++i) {
      const std::int64_t before = BootClock::NowNs();
      Write(j, i, i + 1);
      appended.emplace_back(before, BootClock::NowNs());
    }
    ASSERT_EQ(sink.durable.size(), 4u);
    auto oldest_is = [&](int i) {
      const std::int64_t t = j.oldest_uncommitted_ns(Digest{});
      return t >= appended[static_cast<std::size_t>(i)].first && t <= appended[static_cast<std::size_t>(i)].second;
    };
    EXPECT_TRUE(oldest_is(0));
    j.Applied(sink.durable[0].lsn);
    EXPECT_TRUE(oldest_is(1));
    j.Applied(sink.durable[2].lsn);
    EXPECT_TRUE(oldest_is(1));
    j.Applied(sink.durable[1].lsn);
    EXPECT_TRUE(oldest_is(3));
    const Journal::Uncommitted u = j.UncommittedOf(0);
    EXPECT_EQ(u.count, 1u);
    EXPECT_EQ(u.oldest_ns, j.oldest_uncommitted_ns(Digest{}));
    EXPECT_GE(u.now_ns, u.oldest_ns);
  }
  Journal j(Options());
  EXPECT_EQ(j.oldest_uncommitted_ns(Digest{}), Journal::kAgeUnknown) << "the recovered record is uncommitted";
  const auto recovered = j.TakeRecovered();
  ASSERT_EQ(recovered.size(), 1u);
  j.Applied(recovered[0].lsn);
  EXPECT_EQ(j.oldest_uncommitted_ns(Digest{}), 0);
  EXPECT_EQ(j.UncommittedOf(0).count, 0u);
}

// Issue 42, item 3: the oldest uncommitted record is dated by the boot clock, not by its own time (the wall clock,
// the key's first_seen). A record whose time lies an hour ahead — what every record written before a backward step
// of the wall clock by an hour looks like afterwards — still ages from its append: --max-commit-lag (now - oldest)
// acts after the bound, not an hour later. Seen failing on 1558fbb: its oldest_uncommitted_us() returned the
// record's time, and now_us - oldest stayed negative (-3.6e9 µs) for the whole test.
TEST_F(JournalFiles, OldestUncommittedAgesByTheBootClockNotTheRecordTime) {
  Journal j(Options());
  j.Start();
  JournalRecord r = Rec(7);
  r.time_us = std::chrono::duration_cast<std::chrono::microseconds>(
                  (std::chrono::system_clock::now() + std::chrono::hours(1)).time_since_epoch())
                  .count();
  ASSERT_TRUE(j.Append(r));
  ASSERT_TRUE(sink.Wait(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  const std::int64_t age_ns = BootClock::NowNs() - j.oldest_uncommitted_ns(r.digest);
  EXPECT_GE(age_ns, 60'000'000) << "the record's age does not count from its append";
  EXPECT_LT(age_ns, 60'000'000'000) << "the record's age came from its own (wall-clock) time";
}

// The owner's identity (issue 42): a UUID in `instance`, created with the journal and kept by a reopen; a journal
// without one (made before issue 42) gets one.
TEST_F(JournalFiles, InstanceIdIsCreatedOnceAndKept) {
  std::string first;
  {
    Journal j(Options());
    first = j.instance_id();
  }
  EXPECT_EQ(first.size(), 36u) << first;
  EXPECT_EQ(first[14], '4') << "not a version 4 UUID: " << first;
  {
    Journal j(Options());
    EXPECT_EQ(j.instance_id(), first) << "a reopened journal is the same instance";
  }
  fs::remove(fs::path(dir) / "instance");
  Journal j(Options());
  EXPECT_NE(j.instance_id(), first);
  EXPECT_EQ(j.instance_id().size(), 36u);
}

// With partitions (--partitions), each partition's oldest uncommitted record is its own: a partition whose
// records stay uncommitted (its server down) does not age the others', and recovery sorts recovered records into
// their partitions too.
TEST_F(JournalFiles, OldestUncommittedIsPerPartition) {
  JournalOptions o = Options();
  o.partitions = 4;
  auto in = [](unsigned p, int i) {  // record i moved into partition p (bytes 4..7, storage/partitions/partition_map.h)
    JournalRecord r = Rec(i);
    for (unsigned b = 4; b < 8; ++b) r.digest[b] = 0;
    r.digest[7] = static_cast<std::uint8_t>(p);
    EXPECT_EQ(PartitionOf(r.digest, 4), p);
    return r;
  };
  {
    Journal j(o);
    j.Start();
    ASSERT_TRUE(j.Append(in(1, 0)));  // the oldest: partition 1's
    ASSERT_TRUE(sink.Wait(1));
    const std::int64_t between = BootClock::NowNs();
    ASSERT_TRUE(j.Append(in(2, 1)));
    ASSERT_TRUE(sink.Wait(2));
    const std::int64_t between2 = BootClock::NowNs();
    ASSERT_TRUE(j.Append(in(2, 2)));
    ASSERT_TRUE(sink.Wait(3));
    EXPECT_LE(j.oldest_uncommitted_ns(in(1, 9).digest), between);
    EXPECT_GE(j.oldest_uncommitted_ns(in(2, 9).digest), between) << "partition 1's record aged partition 2";
    EXPECT_LE(j.oldest_uncommitted_ns(in(2, 9).digest), between2);
    EXPECT_EQ(j.oldest_uncommitted_ns(in(0, 9).digest), 0);
    EXPECT_EQ(j.UncommittedOf(2).count, 2u);
    EXPECT_EQ(j.UncommittedOf(0).count, 0u);
    j.Applied(sink.durable[1].lsn);
    EXPECT_GE(j.oldest_uncommitted_ns(in(2, 9).digest), between2);
    EXPECT_LE(j.oldest_uncommitted_ns(in(1, 9).digest), between);
    j.Applied(sink.durable[2].lsn);
    EXPECT_EQ(j.oldest_uncommitted_ns(in(2, 9).digest), 0);
  }
  Journal j(o);
  EXPECT_EQ(j.oldest_uncommitted_ns(in(1, 9).digest), Journal::kAgeUnknown) << "the recovered record is uncommitted";
  // Partition 2's records were applied, but the checkpoint cannot pass partition 1's older one: they are
  // recovered again (their replay is idempotent), into partition 2.
  EXPECT_EQ(j.oldest_uncommitted_ns(in(2, 9).digest), Journal::kAgeUnknown);
  EXPECT_EQ(j.oldest_uncommitted_ns(in(0, 9).digest), 0);
  o.partitions = 3;
  try {
    Journal bad(o);
    ADD_FAILURE() << "a partition count that is not a power of two was taken";
  } catch (const JournalError& e) {
    EXPECT_NE(std::string(e.what()).find("power of two"), std::string::npos) << e.what();
  }
}

// Pre-zeroed segments: after the first rotation the active segment is a zero-filled file of segment_bytes
// (the spare), records overwrite its zeros, and a copy of the directory taken while running (a crash image:
// nothing truncated) recovers every durable record, the zero tails read as clean ends (the last segment's,
// and one added to a segment before it), a leftover spare.tmp ignored. preallocate = false appends instead.
TEST_F(JournalFiles, PreZeroedSegmentsRecoverFromACrashImage) {
  JournalOptions o = Options();
  o.segment_bytes = 16 << 10;  // below one spare slice: the spare is ready after one flusher pass
  const std::string image = dir + "-image";
  {
    Journal j(o);
    j.Start();
    Write(j, 0, 2000, /*per_group=*/true);  // ~60 B a record: ~7 segments
    auto segs = Segments();
    ASSERT_GE(segs.size(), 3u);
    EXPECT_GE(fs::file_size(segs.back()), o.segment_bytes) << "the active segment was not pre-zeroed";
    fs::copy(dir, image, fs::copy_options::recursive);  // every record in it is durable (Write waited)
  }
  {
    // The image as a crash leaves it, plus a zero tail on a segment before the last and a stale spare.
    std::vector<fs::path> segs;
    for (const auto& e : fs::directory_iterator(image)) {
      if (e.path().extension() == ".seg") segs.push_back(e.path());
    }
    std::sort(segs.begin(), segs.end());
    ASSERT_GE(segs.size(), 3u);
    std::string last_segment;
    {
      std::ifstream in(segs.back(), std::ios::binary);
      last_segment.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    EXPECT_EQ(last_segment.back(), '\0') << "the crash image's last segment has no zero tail to test";
    {
      std::ofstream out(segs[1], std::ios::binary | std::ios::app);
      const std::string zeros(5000, '\0');
      out.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
    }
    std::ofstream(image + "/spare.tmp", std::ios::binary) << "stale spare";
    JournalOptions io = o;
    io.dir = image;
    Journal j(io);
    ExpectRecords(j.TakeRecovered(), 0, 2000);
    j.Start();
    Write(j, 2000, 2600, /*per_group=*/true);  // rotates again: the stale spare is rewritten and used
  }
  {
    JournalOptions io = o;
    io.dir = image;
    Journal j(io);
    ExpectRecords(j.TakeRecovered(), 0, 2600);
  }
  fs::remove_all(image);
  // Without preallocation a segment only ever holds what was written.
  fs::remove_all(dir);
  JournalOptions plain = Options();
  plain.segment_bytes = 16 << 10;
  plain.preallocate = false;
  Journal j(plain);
  j.Start();
  Write(j, 0, 1001, /*per_group=*/true);  // the last record, 1000, ends in its source "till-1000"
  EXPECT_LT(fs::file_size(Segments().back()), plain.segment_bytes + 4096);
  std::string active;
  {
    std::ifstream in(Segments().back(), std::ios::binary);
    active.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  EXPECT_NE(active.back(), '\0') << "appending segments end in a record, not zeros";
  EXPECT_FALSE(fs::exists(dir + "/spare.tmp"));
}

// A torn last record (the crash hit its write) is dropped and the file truncated; appends continue after it.
TEST_F(JournalFiles, TruncatedTailIsCutOff) {
  {
    Journal j(Options());
    j.Start();
    Write(j, 0, 10);
  }
  auto segs = Segments();
  ASSERT_EQ(segs.size(), 1u);
  const auto good_size = fs::file_size(segs[0]);
  {
    // Append a valid record's first 20 bytes: length + CRC + part of the digest.
    std::string bytes = "\x29\x00\x00\x00"  // length 41 (no source)
                        "\x01\x02\x03\x04";
    bytes.resize(20, '\x7f');
    std::ofstream out(segs[0], std::ios::binary | std::ios::app);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  {
    Journal j(Options());
    ExpectRecords(j.TakeRecovered(), 0, 10);
    EXPECT_EQ(fs::file_size(segs[0]), good_size) << "torn tail not truncated";
    j.Start();
    Write(j, 10, 15);
  }
  Journal j(Options());
  ExpectRecords(j.TakeRecovered(), 0, 15);
}

// A whole last record with a bad checksum (and a zero-filled tail) is not applied; the good prefix is.
TEST_F(JournalFiles, CorruptedTailRecordIsNotApplied) {
  {
    Journal j(Options());
    j.Start();
    Write(j, 0, 10);
  }
  auto segs = Segments();
  ASSERT_EQ(segs.size(), 1u);
  const auto size = fs::file_size(segs[0]);
  {
    std::fstream f(segs[0], std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(static_cast<std::streamoff>(size - 3));  // inside the last record's source or time
    f.put('\x55');
  }
  {
    Journal j(Options());
    ExpectRecords(j.TakeRecovered(), 0, 9);
    EXPECT_LT(fs::file_size(segs[0]), size);
  }
  {
    std::ofstream out(segs[0], std::ios::binary | std::ios::app);
    const std::string zeros(4096, '\0');  // a file extended by the crash but never written
    out.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
  }
  Journal j(Options());
  ExpectRecords(j.TakeRecovered(), 0, 9);
}

// A bad record in a segment that is not the last cannot be a torn write: refuse rather than skip it.
TEST_F(JournalFiles, CorruptionBeforeTheLastSegmentIsRefused) {
  {
    JournalOptions o = Options();
    o.segment_bytes = 512;
    Journal j(o);
    j.Start();
    Write(j, 0, 40, /*per_group=*/true);
  }
  auto segs = Segments();
  ASSERT_GE(segs.size(), 3u);
  {
    std::fstream f(segs[0], std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(40);
    f.put('\x55');
  }
  EXPECT_THROW(Journal j(Options()), JournalError);
}

// Applied records let the checkpoint pass them; wholly applied segments are deleted and not recovered.
TEST_F(JournalFiles, CheckpointRecyclesSegments) {
  JournalOptions o = Options();
  o.segment_bytes = 512;  // ~8 records per segment
  o.checkpoint_interval = std::chrono::milliseconds(0);
  {
    Journal j(o);
    j.Start();
    Write(j, 0, 80, /*per_group=*/true);
    EXPECT_GE(Segments().size(), 8u);
    for (int i = 0; i < 50; ++i) j.Applied(sink.durable[static_cast<std::size_t>(i)].lsn);
    // The flusher checkpoints when it wakes (checkpoint_interval 0); one more group wakes it.
    Write(j, 80, 81);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (j.Stats().segments_deleted == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_GT(j.Stats().segments_deleted, 0u);
    EXPECT_EQ(j.Stats().outstanding, 31u);
  }
  const auto before = Segments().size();
  {
    Journal j(o);
    ExpectRecords(j.TakeRecovered(), 50, 81);
    j.Start();
    for (int i = 50; i < 81; ++i) j.Applied(sink.durable[static_cast<std::size_t>(i)].lsn);
    j.Stop();
    j.Close();
  }
  EXPECT_LT(Segments().size(), before);
  EXPECT_LE(Segments().size(), 1u) << "applied segments not deleted";
  Journal j(o);
  EXPECT_TRUE(j.TakeRecovered().empty()) << "applied records replayed again";
}

// Applied() of a span marks every LSN of it applied, under one call: the checkpoint passes them up to the
// first record not applied (4 here), and exactly the records from there on are recovered.
TEST_F(JournalFiles, AppliedSpanCheckpointsUpToTheFirstUnapplied) {
  JournalOptions o = Options();
  o.checkpoint_interval = std::chrono::milliseconds(0);
  {
    Journal j(o);
    j.Start();
    Write(j, 0, 10);
    std::vector<std::uint64_t> lsns;
    for (int i = 0; i < 10; ++i) {
      if (i != 4) lsns.push_back(sink.durable[static_cast<std::size_t>(i)].lsn);
    }
    j.Applied(lsns);
    EXPECT_EQ(j.Stats().outstanding, 1u);
    j.Stop();
    j.Close();
  }
  Journal j(o);
  ExpectRecords(j.TakeRecovered(), 4, 10);
}

// Bounded: past max_bytes (nothing applied) a record waits full_wait, then is reported not durable.
TEST_F(JournalFiles, FullJournalRejectsAfterBoundedWait) {
  JournalOptions o = Options();
  o.max_bytes = 1024;  // ~15 records
  o.full_wait = std::chrono::milliseconds(50);
  Journal j(o);
  j.Start();
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(j.Append(Rec(i)));
  ASSERT_TRUE(sink.Wait(40));
  EXPECT_GT(sink.rejected.size(), 0u);
  EXPECT_GT(sink.durable.size(), 0u);
  EXPECT_NE(std::find(sink.fates.begin(), sink.fates.end(), JournalFate::kRefused), sink.fates.end());
  EXPECT_EQ(std::find(sink.fates.begin(), sink.fates.end(), JournalFate::kIoError), sink.fates.end());
  EXPECT_LE(sink.durable.size() * 49, 1024u);
}

// Records parked behind a full journal are admitted as soon as Applied() lets the checkpoint pass the records
// before them: while records wait, Applied() wakes the flusher, which checkpoints at once instead of waiting out
// its interval (an hour here). full_wait is far longer than the test, so a refusal means the room never came.
TEST_F(JournalFiles, ParkedRecordsAreAdmittedOnceAppliedMakesRoom) {
  JournalOptions o = Options();
  o.max_bytes = 1024;  // ~20 records: 40 cannot all fit without a checkpoint
  o.full_wait = std::chrono::minutes(10);
  o.checkpoint_interval = std::chrono::hours(1);
  Journal j(o);
  j.Start();
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(j.Append(Rec(i)));
  std::size_t applied = 0;
  bool all = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!all && std::chrono::steady_clock::now() < deadline) {
    std::vector<std::uint64_t> lsns;
    {
      std::lock_guard lk(sink.mu);
      for (; applied < sink.durable.size(); ++applied) lsns.push_back(sink.durable[applied].lsn);
      all = sink.durable.size() + sink.rejected.size() == 40;
    }
    if (!lsns.empty()) j.Applied(lsns);  // as the drain does once PostgreSQL committed them
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::lock_guard lk(sink.mu);
  EXPECT_EQ(sink.durable.size(), 40u);
  EXPECT_TRUE(sink.rejected.empty());
  EXPECT_GT(j.Stats().checkpoints, 0u);
  EXPECT_LE(j.Stats().disk_bytes, 1024u);
}

// The records of `entries` by their first-seen times, in order (a recovered journal against what on_commit
// reported durable; Rec(i)'s time ends in i, so a failure message reads as indexes).
std::vector<std::int64_t> DigestsOf(const std::vector<JournalEntry>& entries) {
  std::vector<std::int64_t> out;
  for (const auto& e : entries) out.push_back(e.record.time_us - 1'700'000'000'000'000);
  return out;
}

// Polls `pred` every 10 ms up to `bound`.
template <typename Pred>
bool Within(std::chrono::milliseconds bound, Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// An I/O error (here: the next segment cannot be created) reports the group kIoError and makes the journal
// unusable (Append refused, the cause named); it stays so while the obstacle stays, and its probe heals it
// once it is gone, without a restart. Every record reported durable, before and after, is recoverable.
TEST_F(JournalFiles, IoErrorMakesTheJournalUnusableUntilAProbeHeals) {
  JournalOptions o = Options();
  o.segment_bytes = 16;  // every group after the first starts a new segment
  {
    Journal j(o);
    j.Start();
    Write(j, 0, 1);  // record 0 (49 bytes, no source) in segment 0; the next one starts at LSN 49 = 0x31
    fs::create_directory(dir + "/0000000000000031.seg");  // occupies the next segment's name
    ASSERT_TRUE(j.Append(Rec(1)));
    ASSERT_TRUE(sink.Wait(2));
    ASSERT_EQ(sink.fates.size(), 2u);
    EXPECT_EQ(sink.fates[1], JournalFate::kIoError);
    EXPECT_FALSE(j.usable());
    EXPECT_NE(j.unusable_cause().find("EEXIST"), std::string::npos) << j.unusable_cause();
    EXPECT_FALSE(j.Append(Rec(2))) << "an unusable journal accepted a record";
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // probes run and fail: the name is taken
    EXPECT_FALSE(j.usable());
    EXPECT_EQ(j.Stats().faults, 1u);
    fs::remove(dir + "/0000000000000031.seg");
    ASSERT_TRUE(Within(std::chrono::seconds(3), [&] { return j.usable(); })) << j.unusable_cause();
    EXPECT_EQ(j.Stats().heals, 1u);
    EXPECT_TRUE(j.unusable_cause().empty());
    Write(j, 3, 5);
    EXPECT_EQ(sink.durable.size(), 3u);
  }
  Journal j(o);
  EXPECT_EQ(DigestsOf(j.TakeRecovered()), DigestsOf(sink.durable));
}

// A journal folder removed under a running journal: a group written after the removal is never reported
// durable (the segment is unlinked), the removal is noticed within ~1 s even when idle, and the probe
// recreates the folder with every live segment copied from the open descriptors, so the records durable
// before the removal and those after the heal are all recoverable (nothing acknowledged is lost).
TEST_F(JournalFiles, RemovedFolderIsNoticedAndRebuilt) {
  JournalOptions o = Options();
  o.segment_bytes = 200;  // a few records per segment: several live segments to copy
  {
    Journal j(o);
    j.Start();
    Write(j, 0, 10, true);
    fs::remove_all(dir);
    const auto removed = std::chrono::steady_clock::now();
    if (j.Append(Rec(10))) {  // the flusher may have noticed already (then the append is refused)
      ASSERT_TRUE(sink.Wait(11));
      EXPECT_NE(sink.fates.back(), JournalFate::kDurable) << "acknowledged into an unlinked file";
    }
    ASSERT_TRUE(Within(std::chrono::seconds(2), [&] { return j.Stats().faults == 1; }));
    EXPECT_LT(std::chrono::steady_clock::now() - removed, std::chrono::milliseconds(1200));
    ASSERT_TRUE(Within(std::chrono::seconds(4), [&] { return j.usable(); })) << j.unusable_cause();
    EXPECT_TRUE(fs::exists(dir + "/meta"));
    Write(j, 11, 14);
    EXPECT_EQ(sink.durable.size(), 13u);
    // Idle: removed again, noticed by the periodic check alone.
    fs::remove_all(dir);
    ASSERT_TRUE(Within(std::chrono::seconds(2), [&] { return j.Stats().faults == 2; }));
    ASSERT_TRUE(Within(std::chrono::seconds(4), [&] { return j.usable(); })) << j.unusable_cause();
  }
  Journal j(o);
  EXPECT_EQ(DigestsOf(j.TakeRecovered()), DigestsOf(sink.durable));
}

// A full disk (a 1 MiB tmpfs filled by another file): the group that hits ENOSPC is kIoError and the
// journal unusable, named "ENOSPC"; freeing the space heals it within ~1 s; its failed bytes are cut off, so
// a restart recovers exactly the records reported durable. Needs root (mount); skipped otherwise.
TEST_F(JournalFiles, FullDiskHealsOnceSpaceIsFreed) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to mount a tmpfs";
  const std::string mnt = TempDir();
  if (std::system(("mount -t tmpfs -o size=1m tmpfs " + mnt).c_str()) != 0) {
    fs::remove(mnt);
    GTEST_SKIP() << "mount -t tmpfs failed";
  }
  struct Unmount {
    std::string m;
    ~Unmount() {
      (void)!std::system(("umount " + m).c_str());
      fs::remove(m);
    }
  } unmount{mnt};
  JournalOptions o = Options();
  o.dir = mnt + "/journal";
  o.preallocate = false;  // segments grow by appending: the disk fills under a group write
  {
    Journal j(o);
    j.Start();
    Write(j, 0, 5);
    (void)!std::system(("dd if=/dev/zero of=" + mnt + "/fill bs=64k 2>/dev/null").c_str());  // to ENOSPC
    int i = 5;
    for (; i < 5000 && j.usable(); ++i) {  // the segment's last page may still hold a few records
      if (!j.Append(Rec(i))) break;
      ASSERT_TRUE(sink.Wait(static_cast<std::size_t>(i + 1)));
    }
    ASSERT_FALSE(j.usable()) << "the full disk was never noticed";
    EXPECT_EQ(sink.fates.back(), JournalFate::kIoError);
    EXPECT_NE(j.unusable_cause().find("ENOSPC"), std::string::npos) << j.unusable_cause();
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    EXPECT_FALSE(j.usable()) << "healed while the disk is still full";
    fs::remove(mnt + "/fill");
    ASSERT_TRUE(Within(std::chrono::seconds(3), [&] { return j.usable(); })) << j.unusable_cause();
    const std::size_t before = sink.durable.size();
    Write(j, i + 1, i + 4);
    EXPECT_EQ(sink.durable.size(), before + 3);
  }
  Journal j(o);
  EXPECT_EQ(DigestsOf(j.TakeRecovered()), DigestsOf(sink.durable));
}

// The directory belongs to one database (meta) and one running instance (flock).
TEST_F(JournalFiles, ForeignOrBusyDirectoryIsRefused) {
  {
    Journal j(Options("system_identifier=1 database=a"));
    try {
      Journal second(Options("system_identifier=1 database=a"));
      ADD_FAILURE() << "a second instance opened a locked journal";
    } catch (const JournalError& e) {
      EXPECT_NE(std::string(e.what()).find("in use"), std::string::npos) << e.what();
    }
  }
  try {
    Journal j(Options("system_identifier=2 database=a"));
    ADD_FAILURE() << "a journal of another database was opened";
  } catch (const JournalError& e) {
    EXPECT_NE(std::string(e.what()).find("belongs to another database"), std::string::npos) << e.what();
  }
  Journal j(Options("system_identifier=1 database=a"));  // the right one still opens
}

}  // namespace
}  // namespace scangate::storage
