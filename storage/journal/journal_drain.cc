#include "storage/journal/journal_drain.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <utility>

#include <pqxx/pqxx>

#include "core/thread_name.h"
#include "core/time_format.h"
#include "storage/clock/pg_clock.h"

namespace scangate::storage {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kRetryChunk = 1024;  // records handed over per pass without retry_mu_ (one Store batch)
// HandOff builds the Store's rows this many records at a time (bounds the row buffer when start hands over a
// large recovered journal; a group commit is usually far smaller).
constexpr std::size_t kHandOffChunk = 4096;
constexpr auto kRetryPause = std::chrono::milliseconds(10);  // Store queue full: retry the backlog after this

std::int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The Store route of a digest: its first four bytes, as the server routes its own Submit()s.
std::uint32_t RouteOf(const Digest& d) {
  std::uint32_t r = 0;
  std::memcpy(&r, d.data(), sizeof r);
  return r;
}

// The Store's view of a durable record: its LSN and whether it was recovered come back in Done().
WriteBehindRow RowOf(const JournalEntry& e, bool recovered) {
  return WriteBehindRow{RouteOf(e.record.digest), e.record.digest, e.record.source, e.record.time_us, e.lsn,
                        recovered, e.record.request};
}

constexpr const char* kIdentitySql =
    "SELECT (SELECT system_identifier FROM pg_control_system())::text, current_database()";

}  // namespace

std::string FormatTimeUs(std::int64_t time_us) { return Rfc3339Micros(time_us); }

std::optional<std::int64_t> JournalDrain::ClockUs(const Digest& d, bool upper) const {
  if (options_.clocks == nullptr) return NowUs();
  const PgClock& c = options_.clocks->Of(d);
  return upper ? c.ExpiryUpperUs() : c.LowerUs();
}

std::int64_t JournalDrain::AheadUs(const Digest& d) const {
  return options_.clocks == nullptr ? 0 : options_.clocks->Of(d).AheadUs();
}

std::int64_t JournalDrain::RetentionUs() const {
  return std::chrono::duration_cast<std::chrono::microseconds>(options_.retention).count();
}

std::string JournalDrain::QueryIdentity(const std::string& url, const ConnectionDefaults& defaults) {
  pqxx::connection conn(WithConnectionDefaults(url, defaults));
  pqxx::nontransaction tx(conn);
  const pqxx::result r = tx.exec(kIdentitySql);
  return "system_identifier=" + std::string(r[0][0].c_str()) + " database=" + r[0][1].c_str();
}

JournalDrain::JournalDrain(WriteBehindTarget& store, JournalOptions options) : store_(store), options_(std::move(options)) {
  options_.on_commit = [this](std::vector<JournalEntry>& group, JournalFate fate) { OnCommit(group, fate); };
}

JournalDrain::~JournalDrain() {
  StopAppends();
  Close();
}

void JournalDrain::Start(const std::function<void(std::span<const Digest>)>& recovered) {
  journal_ = std::make_unique<Journal>(options_);
  std::vector<JournalEntry> entries = journal_->TakeRecovered();
  if (options_.retention.count() > 0) {
    // Expired while scangate was down (by PostgreSQL's clock, at the least it can read now, less every forward step
    // of it recorded (sql/017): surely past the horizon there too): their key's next observation is `new`, so they
    // are not pending, not the filter's and not replayed; the checkpoint passes them. A partition whose clock is
    // unknown keeps its records (replayed: a row PostgreSQL already counts as expired is taken over by the key's
    // next observation).
    std::vector<std::uint64_t> expired;
    std::erase_if(entries, [&](const JournalEntry& e) {
      const std::optional<std::int64_t> now = ClockUs(e.record.digest, /*upper=*/false);
      if (!now || e.record.time_us >= *now - RetentionUs() - AheadUs(e.record.digest)) return false;
      expired.push_back(e.lsn);
      return true;
    });
    recovered_expired_ = expired.size();
    if (!expired.empty()) journal_->Applied(expired);
  }
  recovered_ = entries.size();
  replay_left_.store(entries.size());
  std::vector<Digest> digests;
  digests.reserve(entries.size());
  for (const auto& e : entries) {
    digests.push_back(e.record.digest);
    Shard& s = ShardOf(e.record.digest);
    const MutexLock lk(&s.mu);
    Pending& p = s.map[e.record.digest];
    // A digest journalled twice (filter forgot it between): the first record's time is the first sighting.
    if (p.durable && p.time_us <= e.record.time_us) continue;
    p.time_us = e.record.time_us;
    p.lsn = e.lsn;
    p.durable = true;
    p.request = e.record.request;
  }
  if (!digests.empty() && recovered) recovered(digests);
  retry_ = std::thread([this] {
    SetThreadName("sg-journal-rtry");
    RunRetry();
  });
  HandOff(entries, true);
  journal_->Start();
}

bool JournalDrain::Append(const Digest& d, std::string source, WaiterGroup& group, Waiter done,
                          std::int64_t time_us, const std::optional<RequestId>& request) {
  const std::int64_t now = time_us != 0 ? time_us : ClockUs(d, /*upper=*/false).value_or(NowUs());
  Shard& s = ShardOf(d);
  {
    const MutexLock lk(&s.mu);
    Pending& p = s.map[d];
    p.time_us = now;
    p.durable = false;
    p.request = request;
    p.waiters.emplace_back(&group, std::move(done));
  }
  if (journal_->Append(JournalRecord{d, now, std::move(source), request})) return true;
  const MutexLock lk(&s.mu);
  s.map.erase(d);
  return false;
}

bool JournalDrain::Holds(const Digest& d) {
  Shard& s = ShardOf(d);
  const MutexLock lk(&s.mu);
  return s.map.contains(d);
}

JournalDrain::LookupResult JournalDrain::Lookup(const Digest& d, WaiterGroup& group, Waiter done) {
  LookupResult r;
  Shard& s = ShardOf(d);
  const MutexLock lk(&s.mu);
  const auto it = s.map.find(d);
  if (it == s.map.end()) return r;
  r.first_seen = FormatTimeUs(it->second.time_us);
  r.request = it->second.request;
  // Past the horizon by PostgreSQL's clock at the most it can read now, as ages go (PgClock::ExpiryUpperUs; unknown:
  // past it): PostgreSQL decides.
  const auto expired = [&] {
    const std::optional<std::int64_t> now = ClockUs(d, /*upper=*/true);
    return !now || it->second.time_us < *now - RetentionUs();
  };
  if (it->second.durable && options_.retention.count() > 0 && expired()) {
    r.state = LookupResult::kExpired;
  } else if (it->second.durable) {
    r.state = LookupResult::kDurable;
  } else {
    r.state = LookupResult::kFollowing;
    it->second.waiters.emplace_back(&group, std::move(done));
  }
  return r;
}

void JournalDrain::OnCommit(std::vector<JournalEntry>& group, JournalFate fate) {
  const bool durable = fate == JournalFate::kDurable;
  // Wake the waiters, batched per group (executor): one post per I/O thread per commit. Every record of
  // `group` shares `fate`, so the waiters travel as they are (no per-waiter wrapper).
  std::vector<std::pair<WaiterGroup*, std::vector<Waiter>>> batches;
  for (const auto& e : group) {
    absl::InlinedVector<std::pair<WaiterGroup*, Waiter>, 1> waiters;
    {
      Shard& s = ShardOf(e.record.digest);
      const MutexLock lk(&s.mu);
      const auto it = s.map.find(e.record.digest);
      if (it == s.map.end()) continue;
      waiters.swap(it->second.waiters);
      if (durable) {
        it->second.durable = true;
        it->second.lsn = e.lsn;
      } else {
        s.map.erase(it);
      }
    }
    for (auto& [g, w] : waiters) {
      auto b = std::find_if(batches.begin(), batches.end(), [g = g](const auto& x) { return x.first == g; });
      if (b == batches.end()) b = batches.emplace(batches.end(), g, std::vector<Waiter>{});
      b->second.push_back(std::move(w));
    }
  }
  for (auto& [g, waiters] : batches) g->Deliver(std::move(waiters), fate);
  if (durable) HandOff(group, false);
}

void JournalDrain::HandOff(std::vector<JournalEntry>& entries, bool recovered) {
  bool behind_backlog;
  {
    const MutexLock lk(&retry_mu_);
    behind_backlog = !backlog_.empty();
  }
  std::size_t i = 0;
  // Behind an existing backlog records queue up in order (trying the full Store first would only fail).
  // Otherwise whole groups go to the Store, until its queue is full (it accepts a prefix).
  while (!behind_backlog && i < entries.size()) {
    const std::size_t n = std::min(entries.size() - i, kHandOffChunk);
    handoff_rows_.clear();
    for (std::size_t j = i; j < i + n; ++j) handoff_rows_.push_back(RowOf(entries[j], recovered));
    const std::size_t accepted = store_.SubmitWriteBehindGroup(handoff_rows_, *this);
    i += accepted;
    if (accepted < n) break;
  }
  if (i == entries.size()) return;
  {
    const MutexLock lk(&retry_mu_);
    for (; i < entries.size(); ++i) backlog_.push_back(Backlogged{std::move(entries[i]), recovered});
  }
  retry_cv_.Signal();
}

void JournalDrain::Done(std::span<const WriteBehindDone> rows) {
  // kUnavailable for a write-behind row: given up at Shutdown() (PostgreSQL down too long) -> it stays in
  // the journal and is replayed at the next start; or dead-lettered while running (PostgreSQL rejected the
  // row repeatedly, logged by the Store) -> applied, or it would hold the checkpoint back for ever.
  const bool stopping = stopping_.load();
  thread_local std::vector<std::uint64_t> lsns;  // reused: one per writer thread
  lsns.clear();
  std::uint64_t replayed = 0;
  for (const WriteBehindDone& r : rows) {
    if (r.outcome == Outcome::kUnavailable && stopping) continue;
    {
      Shard& s = ShardOf(r.digest);
      const MutexLock lk(&s.mu);
      const auto it = s.map.find(r.digest);
      if (it != s.map.end() && it->second.durable && it->second.lsn == r.tag) s.map.erase(it);
    }
    lsns.push_back(r.tag);
    replayed += r.flag ? 1 : 0;
  }
  if (!lsns.empty()) journal_->Applied(lsns);  // once per batch: the journal's mutex is shared with Append()
  if (replayed > 0) replay_left_.fetch_sub(replayed);
}

// Feeds the backlog to the Store from its front, in order, while the Store accepts, a chunk at a time and
// without holding retry_mu_ while submitting (the flusher's HandOff takes it after every group commit): each
// pass costs what it hands over, never a pass over the whole backlog (~1 M records when PostgreSQL lags).
void JournalDrain::RunRetry() {
  std::vector<Backlogged> chunk;
  std::vector<WriteBehindRow> rows;
  UniqueMutexLock lk(&retry_mu_);
  for (;;) {
    while (!retry_stop_ && backlog_.empty()) retry_cv_.Wait(&retry_mu_);
    if (retry_stop_) return;
    const std::size_t n = std::min(backlog_.size(), kRetryChunk);
    chunk.assign(std::make_move_iterator(backlog_.begin()),
                 std::make_move_iterator(backlog_.begin() + static_cast<std::ptrdiff_t>(n)));
    backlog_.erase(backlog_.begin(), backlog_.begin() + static_cast<std::ptrdiff_t>(n));
    lk.Unlock();
    rows.clear();
    for (const auto& b : chunk) rows.push_back(RowOf(b.entry, b.recovered));
    const std::size_t k = store_.SubmitWriteBehindGroup(rows, *this);  // a prefix, in order
    lk.Lock();
    for (std::size_t j = chunk.size(); j-- > k;) backlog_.push_front(std::move(chunk[j]));  // refused: in order
    chunk.clear();
    if (k < n) {  // the Store is full: pause (StopAppends ends the pause)
      const auto until = Clock::now() + kRetryPause;
      while (!retry_stop_ && !retry_cv_.WaitUntil(&retry_mu_, until)) {
      }
    }
  }
}

void JournalDrain::StopAppends() {
  if (stopped_) return;
  stopped_ = true;
  stopping_.store(true);  // from here on a kUnavailable hand-off is the Store giving up at shutdown
  if (journal_) journal_->Stop();
  {
    const MutexLock lk(&retry_mu_);
    retry_stop_ = true;
  }
  retry_cv_.SignalAll();
  if (retry_.joinable()) retry_.join();
}

void JournalDrain::Close() {
  if (closed_) return;
  closed_ = true;
  if (journal_) journal_->Close();
}

JournalDrainStats JournalDrain::Stats() const {
  JournalDrainStats s;
  if (journal_) s.journal = journal_->Stats();
  for (auto& shard : shards_) {
    const MutexLock lk(&shard.mu);
    s.pending += shard.map.size();
  }
  {
    const MutexLock lk(&retry_mu_);
    s.backlog = backlog_.size();
  }
  s.replay_left = replay_left_.load();
  s.recovered = recovered_;
  s.recovered_expired = recovered_expired_;
  return s;
}

}  // namespace scangate::storage
