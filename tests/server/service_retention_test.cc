// Black-box exactness tests of the de-duplication horizon (--retention, issue 22), with horizons of seconds,
// each in both ack modes where it applies: a repeat within the horizon is `duplicate` with the first
// observation's first_seen (also across the expiry's passes); a key past horizon + slack is `new` again and
// PostgreSQL keeps one row with the new first_seen, whether the expiry deleted the old row or the batch INSERT
// took it over; two instances racing on expired keys give exactly one `new` per key; /lookup answers
// not-recorded for an expired row still present; the journal's replay and the warm start skip expired records.
// Rows are backdated behind the service's back and held locked (SELECT ... FOR UPDATE: the expiry skips locked
// rows) where a case must not depend on whether the expiry got there first. Every wait is bounded.
#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <future>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "harness.h"

namespace scangate::it {
namespace {

namespace json = boost::json;
using Clock = std::chrono::steady_clock;

// The slack past the horizon after which a record may be forgotten (docs/design.md "The de-duplication horizon":
// clock offset + 1 s; one host here), with half a second more for the expiry's scheduling.
constexpr std::int64_t kSlackUs = 1'500'000;

std::int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// "YYYY-MM-DDTHH:MM:SS.ffffffZ" (the service's and to_char's shape) -> µs since the epoch; -1 when malformed.
std::int64_t ParseFirstSeenUs(const std::string& s) {
  std::tm tm{};
  const char* rest = ::strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (rest == nullptr) return -1;
  std::int64_t us = 0;
  int digits = 0;
  if (*rest == '.') {
    for (++rest; *rest >= '0' && *rest <= '9'; ++rest, ++digits) {
      if (digits < 6) us = us * 10 + (*rest - '0');
    }
  }
  if (*rest != 'Z') return -1;
  for (; digits < 6; ++digits) us *= 10;
  return static_cast<std::int64_t>(::timegm(&tm)) * 1'000'000 + us;
}

// Sleeps until the system clock reaches `target_us` (bounded: the targets here are seconds away).
void SleepUntilUs(std::int64_t target_us) {
  const std::int64_t left = target_us - NowUs();
  ASSERT_LT(left, 60'000'000) << "a wait of more than a minute: the test's clock arithmetic is wrong";
  if (left > 0) std::this_thread::sleep_for(std::chrono::microseconds(left));
}

std::string TempDir(const char* tag) {
  std::string tmpl = std::string("/tmp/scangate-") + tag + ".XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  return tmpl;
}

// PostgreSQL's first_seen of a digest in the service's shape; nullopt when there is no row.
std::optional<std::string> PgFirstSeen(Pg& pg, const std::string& hex) {
  pqxx::nontransaction tx(pg.conn());
  const pqxx::result r = tx.exec_params(
      "SELECT to_char(first_seen AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') FROM scan_keys "
      "WHERE digest = scangate_stored_digest(decode($1, 'hex'))",
      hex);
  if (r.empty()) return std::nullopt;
  return std::string(r[0][0].c_str());
}

// Polls (up to 20 s) until PostgreSQL holds exactly one row of `hex` with first_seen `want` (ack=filter writes
// behind, so the row arrives after the answer). Returns what it saw last when it gives up.
::testing::AssertionResult PgRowBecomes(Pg& pg, const std::string& hex, const std::string& want) {
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  std::optional<std::string> seen;
  std::int64_t count = 0;
  for (;;) {
    count = pg.CountDigest(hex);
    seen = PgFirstSeen(pg, hex);
    if (count == 1 && seen == want) return ::testing::AssertionSuccess();
    if (Clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return ::testing::AssertionFailure() << "PostgreSQL holds " << count << " row(s) of " << hex << ", first_seen "
                                       << seen.value_or("(none)") << ", want one with " << want;
}

// A row older than the horizon, written behind the service's back (never observed through it).
void InsertBackdated(Pg& pg, const std::string& hex, const std::string& age) {
  pqxx::work tx(pg.conn());
  tx.exec_params(
      "INSERT INTO scan_keys (digest, seen_by, first_seen) VALUES (scangate_stored_digest(decode($1, 'hex')), 'backdated', now() - "
      "$2::interval)",
      hex, age);
  tx.commit();
}

// Locks the rows of `hexes` in `tx` (the expiry skips locked rows; a writer taking one over waits). False when
// one of them is gone already (the expiry deleted it between the insert and the lock).
bool LockRows(pqxx::work& tx, const std::vector<std::string>& hexes) {
  for (const auto& hex : hexes) {
    if (tx.exec_params("SELECT 1 FROM scan_keys WHERE digest = scangate_stored_digest(decode($1, 'hex')) FOR UPDATE", hex).size() != 1) {
      return false;
    }
  }
  return true;
}

using Seen = ObserveAnswer;
Seen Observe(HttpClient& c, const std::string& key) { return ObserveKey(c, key); }

// Observes a fresh key (201) and repeats it once (200): returns the first_seen the service recorded.
std::string RecordFresh(HttpClient& c, const std::string& key) {
  const Seen n = Observe(c, key);
  EXPECT_EQ(n.status, 201) << n.text;
  EXPECT_EQ(n.verdict, "new") << n.text;
  const Seen d = Observe(c, key);
  EXPECT_EQ(d.status, 200) << d.text;
  EXPECT_EQ(d.verdict, "duplicate") << d.text;
  EXPECT_GT(ParseFirstSeenUs(d.first_seen), 0) << d.text;
  return d.first_seen;
}

double Metric(HttpClient& c, std::string_view name) { return ScrapeMetric(c, name); }


// Both ack modes. ack=filter runs with the journal (the harness gives each process its own --journal-dir).
class Retention : public ::testing::TestWithParam<const char*> {
 protected:
  bool filter() const { return std::string(GetParam()) == "filter"; }
  std::vector<std::string> Flags(const std::string& retention, std::vector<std::string> more = {}) const {
    std::vector<std::string> f{std::string("--ack=") + GetParam(), "--capacity=1000000", "--retention=" + retention};
    f.insert(f.end(), more.begin(), more.end());
    return f;
  }
};

// 1. Within the horizon a repeat is `duplicate` with the first observation's first_seen — also for keys first
// seen just before an expiry pass. A fresh key every 200 ms, each repeated every ~50 ms until it is 2 s old (the
// horizon is 3 s, the expiry's pass interval 1 s), until the expiry has passed at least twice meanwhile. The
// recent set is off, so once the row is committed every repeat is PostgreSQL's ON CONFLICT ... WHERE.
TEST_P(Retention, RepeatsWithinTheHorizonAreDuplicates) {
  constexpr std::int64_t kRepeatUntilAgeUs = 2'000'000;
  ScangateProcess server(Flags("3s", {"--recent-keys=0"}));
  ASSERT_TRUE(server.Start());
  HttpClient c(server.port());
  Pg pg;
  const double passes0 = Metric(c, "scangate_expiry_passes_total");
  struct Live {
    std::string key, first_seen;
    std::int64_t first_seen_us = 0;
    int repeats = 0;
  };
  std::vector<Live> live;
  int keys = 0, repeats = 0;
  const auto started = Clock::now();
  const auto deadline = started + std::chrono::seconds(30);
  auto last_fresh = started - std::chrono::seconds(1);
  for (;;) {
    // At least 10 keys, however slowly a loaded machine runs each round (a fixed 3 s gave 8 on CI's).
    const bool enough = Clock::now() - started > std::chrono::seconds(3) && keys >= 10 &&
                        Metric(c, "scangate_expiry_passes_total") >= passes0 + 2;
    if (enough && live.empty()) break;
    ASSERT_LT(Clock::now(), deadline) << "the expiry did not pass twice within 30 s";
    if (!enough && Clock::now() - last_fresh >= std::chrono::milliseconds(200)) {
      last_fresh = Clock::now();
      Live l{UniqueKey("ret-within"), "", 0, 0};
      l.first_seen = RecordFresh(c, l.key);
      l.first_seen_us = ParseFirstSeenUs(l.first_seen);
      ASSERT_GT(l.first_seen_us, 0);
      live.push_back(std::move(l));
      ++keys;
    }
    for (auto it = live.begin(); it != live.end();) {
      const std::int64_t sent_us = NowUs();
      if (sent_us - it->first_seen_us >= kRepeatUntilAgeUs) {
        // Retired at ~2 s old: within the horizon, so the expiry must not have deleted its row (ack=commit: the
        // row is committed before `new`; ack=filter: it may still be written behind).
        if (!filter()) {
          EXPECT_EQ(pg.CountDigest(Sha256Hex(it->key)), 1) << "a row within the horizon is gone";
        }
        EXPECT_GE(it->repeats, 1);
        it = live.erase(it);
        continue;
      }
      const Seen d = Observe(c, it->key);
      EXPECT_EQ(d.status, 200) << "a repeat " << (sent_us - it->first_seen_us) / 1000 << " ms after the first "
                               << "observation (horizon 3 s): " << d.text;
      EXPECT_EQ(d.first_seen, it->first_seen) << d.text;
      ++it->repeats;
      ++repeats;
      ++it;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  RecordProperty("keys", keys);
  RecordProperty("repeats", repeats);
  EXPECT_EQ(server.Stop(), 0);
}

// 2a. Past horizon + slack, after the expiry deleted the row: /lookup says not-recorded, the key is `new` again,
// then `duplicate` with the new first_seen, and PostgreSQL holds one row with it.
TEST_P(Retention, PastTheHorizonTheExpiredKeyIsNewAgain) {
  ScangateProcess server(Flags("3s"));
  ASSERT_TRUE(server.Start());
  HttpClient c(server.port());
  Pg pg;
  const std::string key = UniqueKey("ret-expired");
  const std::string hex = Sha256Hex(key);
  const std::string first = RecordFresh(c, key);
  ASSERT_TRUE(PgRowBecomes(pg, hex, first));
  SleepUntilUs(ParseFirstSeenUs(first) + 3'000'000 + kSlackUs);
  // The expiry deletes it within a pass interval (1 s) or so; bounded.
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (pg.CountDigest(hex) != 0) {
    ASSERT_LT(Clock::now(), deadline) << "the expiry did not delete a row past the horizon within 20 s";
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_GE(Metric(c, "scangate_expiry_rows_total"), 1.0);
  EXPECT_TRUE(IsProblem(c.Post("/lookup", ObserveBody(key)), 404, "not-recorded"));
  const Seen again = Observe(c, key);
  ASSERT_EQ(again.status, 201) << "a key past the horizon was not new again: " << again.text;
  EXPECT_EQ(again.verdict, "new");
  const Seen d = Observe(c, key);
  ASSERT_EQ(d.status, 200) << d.text;
  EXPECT_GE(ParseFirstSeenUs(d.first_seen), ParseFirstSeenUs(first) + 3'000'000) << d.text << " vs " << first;
  EXPECT_TRUE(PgRowBecomes(pg, hex, d.first_seen));
  const HttpResponse l = c.Post("/lookup", ObserveBody(key));
  ASSERT_EQ(l.status, 200) << l;
  EXPECT_EQ(l.json().at("first_seen"), d.first_seen.c_str());
  EXPECT_EQ(server.Stop(), 0);
}

// 2b. An expired row still present (backdated by an hour, held locked so the expiry cannot delete it first) is
// taken over by the batch INSERT: the key is `new` (ack=commit: only once PostgreSQL took the row over; the
// writer waits for the lock), then `duplicate` with the new first_seen, and the one row carries that first_seen.
// Several keys, so the COPY path's conflict (a row present) and its fallback to the INSERT are on the way.
TEST_P(Retention, AnExpiredRowStillPresentIsTakenOver) {
  ScangateProcess server(Flags("3s"));
  ASSERT_TRUE(server.Start());
  HttpClient c(server.port());
  Pg pg, locker;
  for (int k = 0; k < 3; ++k) {
    SCOPED_TRACE("key " + std::to_string(k));
    std::string key, hex;
    std::optional<pqxx::work> lock;
    for (int attempt = 0; attempt < 5 && !lock; ++attempt) {
      key = UniqueKey("ret-takeover");
      hex = Sha256Hex(key);
      InsertBackdated(pg, hex, "1 hour");
      lock.emplace(locker.conn());
      if (!LockRows(*lock, {hex})) lock.reset();  // the expiry was quicker; another key
    }
    ASSERT_TRUE(lock.has_value()) << "could not lock a backdated row in 5 attempts";
    const std::string backdated = PgFirstSeen(pg, hex).value_or("");
    auto answer = std::async(std::launch::async, [&] {
      HttpClient own(server.port());
      return Observe(own, key);
    });
    // The writer taking the row over waits for our lock (ack=commit: the answer with it; ack=filter: the
    // write-behind, the answer came from the journal).
    ASSERT_TRUE(pg.WaitForLockWaiter()) << "no writer came for the expired row";
    EXPECT_EQ(pg.CountDigest(hex), 1);
    lock->commit();
    lock.reset();
    const Seen n = answer.get();
    ASSERT_EQ(n.status, 201) << "an expired row present in PostgreSQL made its key a duplicate: " << n.text;
    const Seen d = Observe(c, key);
    ASSERT_EQ(d.status, 200) << d.text;
    EXPECT_NE(d.first_seen, backdated);
    EXPECT_GT(ParseFirstSeenUs(d.first_seen), NowUs() - 60'000'000) << d.text;
    EXPECT_TRUE(PgRowBecomes(pg, hex, d.first_seen));
    EXPECT_EQ(PgFirstSeen(pg, hex).value_or(""), d.first_seen);
  }
  EXPECT_EQ(server.Stop(), 0);
}

// 4. /lookup: not-recorded for an expired row the expiry has not deleted (held locked), found for a fresh key.
TEST_P(Retention, LookupAnswersNotRecordedForAnExpiredKey) {
  ScangateProcess server(Flags("3s"));
  ASSERT_TRUE(server.Start());
  HttpClient c(server.port());
  Pg pg, locker;
  std::string key, hex;
  std::optional<pqxx::work> lock;
  for (int attempt = 0; attempt < 5 && !lock; ++attempt) {
    key = UniqueKey("ret-lookup-old");
    hex = Sha256Hex(key);
    InsertBackdated(pg, hex, "1 hour");
    lock.emplace(locker.conn());
    if (!LockRows(*lock, {hex})) lock.reset();
  }
  ASSERT_TRUE(lock.has_value()) << "could not lock a backdated row in 5 attempts";
  const HttpResponse old = c.Post("/lookup", ObserveBody(key));
  EXPECT_TRUE(IsProblem(old, 404, "not-recorded")) << old;
  EXPECT_EQ(pg.CountDigest(hex), 1) << "the row was gone: the lookup proved nothing";
  lock->commit();
  const std::string fresh = UniqueKey("ret-lookup-fresh");
  const std::string first_seen = RecordFresh(c, fresh);
  ASSERT_TRUE(PgRowBecomes(pg, Sha256Hex(fresh), first_seen));
  const HttpResponse found = c.Post("/lookup", ObserveBody(fresh));
  ASSERT_EQ(found.status, 200) << found;
  EXPECT_EQ(found.json().at("first_seen"), first_seen.c_str());
  EXPECT_EQ(server.Stop(), 0);
}

// 6. The warm start loads only rows within the horizon: with --window=1h and --retention=30s, rows 10 minutes
// old (held locked so the expiry leaves them in place) are not in the filter after a restart — their keys are
// `new` with "via":"filter" (a Bloom negative) — while a key recorded just before the restart is `duplicate`.
TEST_P(Retention, WarmStartSkipsExpiredRows) {
  const auto flags = Flags("30s", {"--window=1h"});
  const std::string recent = UniqueKey("ret-warm-recent");
  std::string recent_first_seen;
  {
    ScangateProcess first(flags);
    ASSERT_TRUE(first.Start());
    HttpClient c(first.port());
    recent_first_seen = RecordFresh(c, recent);
    ASSERT_EQ(first.Stop(), 0);
  }
  Pg pg, locker;
  ASSERT_TRUE(PgRowBecomes(pg, Sha256Hex(recent), recent_first_seen));
  std::vector<std::string> old_keys, old_hexes;
  for (int i = 0; i < 5; ++i) {
    old_keys.push_back(UniqueKey("ret-warm-old"));
    old_hexes.push_back(Sha256Hex(old_keys.back()));
    InsertBackdated(pg, old_hexes.back(), "10 minutes");
  }
  pqxx::work lock(locker.conn());
  ASSERT_TRUE(LockRows(lock, old_hexes));  // no instance runs: nothing deletes them
  ScangateProcess second(flags);
  ASSERT_TRUE(second.Start());
  HttpClient c(second.port());
  ASSERT_TRUE(WaitWarm(c));
  EXPECT_EQ(pg.CountDigests(old_hexes), 5) << "the backdated rows were gone before the warm start";
  lock.commit();  // the writers may take them over now
  for (const auto& key : old_keys) {
    const Seen n = Observe(c, key);
    EXPECT_EQ(n.status, 201) << n.text;
    EXPECT_EQ(n.via, "filter") << "an expired row was loaded into the filter at the warm start: " << n.text;
  }
  const Seen d = Observe(c, recent);
  EXPECT_EQ(d.status, 200) << d.text;
  EXPECT_EQ(d.first_seen, recent_first_seen) << d.text;
  EXPECT_EQ(second.Stop(), 0);
}

INSTANTIATE_TEST_SUITE_P(AckModes, Retention, ::testing::Values("commit", "filter"),
                         [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

// Fires `singles` at both instances at once, key by key, then the whole of `batched` at both at once. Per key
// exactly one `new` across both and the other `duplicate`; PostgreSQL then holds one row per key with the first_seen
// the loser was told, newer than `older_than_us` (the expired record's time).
void RaceBoth(const ScangateProcess& a, const ScangateProcess& b, const std::vector<std::string>& singles,
              const std::vector<std::string>& batched, std::int64_t older_than_us) {
  const std::size_t n = singles.size();
  std::vector<Seen> from_a(n), from_b(n);
  {
    std::barrier step(2);
    auto run = [&](std::uint16_t port, std::vector<Seen>& out) {
      HttpClient c(port);
      for (std::size_t i = 0; i < n; ++i) {
        step.arrive_and_wait();
        out[i] = Observe(c, singles[i]);
      }
    };
    std::thread ta(run, a.port(), std::ref(from_a));
    std::thread tb(run, b.port(), std::ref(from_b));
    ta.join();
    tb.join();
  }
  std::vector<std::string> hexes;
  std::vector<std::string> told_first_seen;
  for (std::size_t i = 0; i < n; ++i) {
    SCOPED_TRACE("single key " + std::to_string(i));
    const int news = (from_a[i].status == 201) + (from_b[i].status == 201);
    ASSERT_EQ(news, 1) << "A: " << from_a[i].text << "\nB: " << from_b[i].text;
    const Seen& dup = from_a[i].status == 200 ? from_a[i] : from_b[i];
    ASSERT_EQ(dup.status, 200) << dup.text;
    hexes.push_back(Sha256Hex(singles[i]));
    told_first_seen.push_back(dup.first_seen);
  }
  {
    auto send = [&](std::uint16_t port) {
      HttpClient c(port);
      return c.Post("/observe/batch", BatchBody(batched));
    };
    auto fa = std::async(std::launch::async, send, a.port());
    auto fb = std::async(std::launch::async, send, b.port());
    const HttpResponse ra = fa.get(), rb = fb.get();
    ASSERT_EQ(ra.status, 200) << ra;
    ASSERT_EQ(rb.status, 200) << rb;
    const json::object oa = ra.json(), ob = rb.json();
    const json::array& va = oa.at("results").as_array();
    const json::array& vb = ob.at("results").as_array();
    ASSERT_EQ(va.size(), batched.size());
    ASSERT_EQ(vb.size(), batched.size());
    for (std::size_t i = 0; i < batched.size(); ++i) {
      SCOPED_TRACE("batched key " + std::to_string(i));
      const bool a_new = va[i].at("verdict") == "new", b_new = vb[i].at("verdict") == "new";
      ASSERT_EQ(a_new + b_new, 1) << json::serialize(va[i]) << " / " << json::serialize(vb[i]);
      hexes.push_back(Sha256Hex(batched[i]));
      told_first_seen.push_back(std::string((a_new ? vb[i] : va[i]).at("first_seen").as_string()));
    }
  }
  Pg pg;
  EXPECT_EQ(pg.CountDigests(hexes), static_cast<std::int64_t>(hexes.size()));
  for (std::size_t i = 0; i < hexes.size(); ++i) {
    ASSERT_EQ(PgFirstSeen(pg, hexes[i]).value_or("(none)"), told_first_seen[i]) << "key " << i;
    EXPECT_GT(ParseFirstSeenUs(told_first_seen[i]), older_than_us) << "an expired first_seen was kept";
  }
}

std::vector<std::string> Keys(const char* tag, int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back(UniqueKey(tag));
  return out;
}

// 3a. Two ack=commit instances on one database race on keys recorded through one of them and now past the
// horizon (10 s) + slack, across the expiry's passes (rows deleted or not yet: either way). The horizon is also how
// long the race and the check may take before the expiry may delete the rows the race wrote (on a loaded machine,
// under ASan, a 3 s horizon was too short: 21 of the 200 rows had expired before the check).
TEST(RetentionTwoInstances, ExactlyOneNewPerKeyAcrossTheHorizon) {
  constexpr int kKeys = 100;
  constexpr std::int64_t kHorizonUs = 10'000'000;
  const std::vector<std::string> flags{"--ack=commit", "--capacity=1000000", "--retention=10s"};
  ScangateProcess a(flags), b(flags);
  ASSERT_TRUE(a.Start());
  ASSERT_TRUE(b.Start());
  const std::vector<std::string> singles = Keys("ret-race-one", kKeys), batched = Keys("ret-race-batch", kKeys);
  std::vector<std::string> all = singles;
  all.insert(all.end(), batched.begin(), batched.end());
  std::int64_t newest_us = 0;
  {
    HttpClient c(a.port());
    const HttpResponse r = c.Post("/observe/batch", BatchBody(all));
    ASSERT_EQ(r.status, 200) << r;
    const json::object o = r.json();
    for (const auto& v : o.at("results").as_array()) ASSERT_EQ(v.at("verdict"), "new") << r;
    Pg pg;
    for (const auto& k : all) {
      newest_us = std::max(newest_us, ParseFirstSeenUs(PgFirstSeen(pg, Sha256Hex(k)).value_or("")));
    }
  }
  SleepUntilUs(newest_us + kHorizonUs + kSlackUs);
  RaceBoth(a, b, singles, batched, newest_us + kHorizonUs);
  EXPECT_EQ(a.Stop(), 0);
  EXPECT_EQ(b.Stop(), 0);
}

// 3b. The same race on expired rows that are certainly still present, so the batch INSERT's take-over (ON
// CONFLICT DO UPDATE ... WHERE expired) is what both instances meet: --retention=1h, rows backdated by 2 h after
// both instances' first expiry pass (the next one is 60 s away).
TEST(RetentionTwoInstances, ExactlyOneNewPerKeyTakingOverExpiredRows) {
  constexpr int kKeys = 100;
  const std::vector<std::string> flags{"--ack=commit", "--capacity=1000000", "--retention=1h"};
  ScangateProcess a(flags), b(flags);
  ASSERT_TRUE(a.Start());
  ASSERT_TRUE(b.Start());
  HttpClient ca(a.port()), cb(b.port());
  for (HttpClient* c : {&ca, &cb}) {
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    while (Metric(*c, "scangate_expiry_passes_total") < 1) {
      ASSERT_LT(Clock::now(), deadline) << "no expiry pass within 20 s of the start";
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  // Rows other tests left older than an hour went in the first passes; none may go from here on.
  const double expired_before = Metric(ca, "scangate_expiry_rows_total") + Metric(cb, "scangate_expiry_rows_total");
  const std::vector<std::string> singles = Keys("ret-race-old-one", kKeys), batched = Keys("ret-race-old-batch", kKeys);
  std::vector<std::string> hexes;
  Pg pg;
  const std::int64_t before_us = NowUs();
  for (const auto* keys : {&singles, &batched}) {
    for (const auto& k : *keys) {
      hexes.push_back(Sha256Hex(k));
      InsertBackdated(pg, hexes.back(), "2 hours");
    }
  }
  ASSERT_EQ(pg.CountDigests(hexes), 2 * kKeys);
  RaceBoth(a, b, singles, batched, before_us - 1'000'000);
  EXPECT_EQ(Metric(ca, "scangate_expiry_rows_total") + Metric(cb, "scangate_expiry_rows_total"), expired_before)
      << "the expiry deleted rows during the race: the take-over was not what the instances met";
  EXPECT_EQ(a.Stop(), 0);
  EXPECT_EQ(b.Stop(), 0);
}

// 5. ack=filter: the journal's replay skips records past the horizon. Keys E are journalled, then keys F 5.5 s
// later; their rows are held back (--flush-interval=10s) and the process is killed, so both stay past the
// journal's checkpoint. Restarted once E is past the horizon (8 s) and F is not (~3 s old): E is counted as
// recovered_expired (/stats, log), not replayed (no row) and `new` again (a Bloom negative: not put into the
// filter); F is recovered, replayed and `duplicate` with its first_seen.
TEST(RetentionJournal, ReplaySkipsExpiredRecords) {
  constexpr int kKeys = 5;
  constexpr std::int64_t kRetentionUs = 8'000'000;
  const std::string dir = TempDir("retention-journal");
  std::vector<std::string> expired, kept, expired_hex, kept_hex, kept_first_seen;
  std::int64_t expired_newest_us = 0;
  Pg pg;
  {
    ScangateProcess first({"--ack=filter", "--capacity=1000000", "--retention=8s", "--flush-interval=10s",
                           "--max-commit-lag=0", "--journal-dir=" + dir + "/j"});  // rows held in the journal
    ASSERT_TRUE(first.Start());
    HttpClient c(first.port());
    std::int64_t expired_oldest_us = 0;
    for (int i = 0; i < kKeys; ++i) {
      expired.push_back(UniqueKey("ret-journal-expired"));
      expired_hex.push_back(Sha256Hex(expired.back()));
      const std::int64_t us = ParseFirstSeenUs(RecordFresh(c, expired.back()));
      expired_newest_us = std::max(expired_newest_us, us);
      if (i == 0) expired_oldest_us = us;
    }
    SleepUntilUs(expired_newest_us + kRetentionUs - 2'500'000);
    for (int i = 0; i < kKeys; ++i) {
      kept.push_back(UniqueKey("ret-journal-kept"));
      kept_hex.push_back(Sha256Hex(kept.back()));
      kept_first_seen.push_back(RecordFresh(c, kept.back()));
    }
    // The write-behind flushes 10 s after the first row it holds: past that, the test proves nothing.
    ASSERT_LT(NowUs(), expired_oldest_us + 9'000'000) << "too slow to keep the records in the journal";
    ASSERT_EQ(pg.CountDigests(expired_hex) + pg.CountDigests(kept_hex), 0)
        << "rows were written before the kill: nothing is tested";
    first.Kill();
  }
  // The journal judges its records by the local clock that wrote them (no clock offset to allow for): a
  // small margin past E's horizon leaves F the most room for the restart.
  SleepUntilUs(expired_newest_us + kRetentionUs + 300'000);
  // Ready = replay committed: the restart's write-behind is not held back.
  ScangateProcess second({"--ack=filter", "--capacity=1000000", "--retention=8s", "--journal-dir=" + dir + "/j"});
  ASSERT_TRUE(second.Start());
  HttpClient c(second.port());
  const std::int64_t kept_age_us = NowUs() - ParseFirstSeenUs(kept_first_seen.front());
  const json::object stats = c.Get("/stats").json();
  ASSERT_TRUE(stats.contains("journal")) << json::serialize(stats);
  const json::object& j = stats.at("journal").as_object();
  EXPECT_EQ(j.at("recovered_expired").to_number<std::int64_t>(), kKeys) << json::serialize(j);
  EXPECT_EQ(j.at("recovered").to_number<std::int64_t>(), kKeys) << json::serialize(j);
  const auto logged = second.LogEvents("journal");
  ASSERT_FALSE(logged.empty());
  EXPECT_EQ(logged.back().at("recovered_expired").to_number<std::int64_t>(), kKeys) << json::serialize(logged.back());
  EXPECT_EQ(pg.CountDigests(expired_hex), 0) << "an expired journal record was replayed";
  for (int i = 0; i < kKeys; ++i) {
    EXPECT_EQ(PgFirstSeen(pg, kept_hex[i]).value_or("(none)"), kept_first_seen[i])
        << "a journal record within the horizon was not replayed with its first_seen";
  }
  ASSERT_LT(kept_age_us, kRetentionUs - 1'000'000) << "the restart took too long to test the kept keys";
  for (int i = 0; i < kKeys; ++i) {
    const Seen d = Observe(c, kept[i]);
    EXPECT_EQ(d.status, 200) << d.text;
    EXPECT_EQ(d.first_seen, kept_first_seen[i]) << d.text;
  }
  std::vector<std::string> reborn_first_seen;
  for (const auto& key : expired) {
    const Seen n = Observe(c, key);
    EXPECT_EQ(n.status, 201) << "an expired journal record still answered: " << n.text;
    EXPECT_EQ(n.via, "filter") << "an expired journal record was put into the filter: " << n.text;
    const Seen d = Observe(c, key);
    EXPECT_EQ(d.status, 200) << d.text;
    reborn_first_seen.push_back(d.first_seen);
  }
  ASSERT_EQ(second.Stop(), 0);  // flushes the write-behind
  for (int i = 0; i < kKeys; ++i) {
    EXPECT_EQ(PgFirstSeen(pg, expired_hex[i]).value_or("(none)"), reborn_first_seen[i]);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace scangate::it
