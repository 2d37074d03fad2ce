#include "server/verdict/service.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>


#include "core/time_format.h"
#include "server/verdict/service_call.h"

namespace scangate::server {
namespace net = boost::asio;

static_assert(std::is_same_v<storage::RequestId, RequestRecord>, "the recent set keeps storage's request records");

namespace {
std::uint64_t NextInstanceId() {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1);
}
}  // namespace

Service::Service(const Config& config, Digester digester, ShardedFilter& filter, storage::ExactStore& store,
                 Metrics& metrics, storage::JournalDrain* journal)
    : ack_(config.ack),
      request_timeout_(config.request_timeout),
      queue_wait_(std::min(config.queue_wait, config.request_timeout)),
      filter_on_(config.filter),
      filter_vouches_(config.filter && !(config.keys == KeysMode::kGs1 && config.ack == AckMode::kFilter)),
      keys_(std::move(digester), config.keys, config.expiry_grace, config.retention.count() > 0),
      filter_(filter),
      store_(store),
      metrics_(metrics),
      window_seconds_(std::chrono::duration<double>(config.window).count()),
      retention_(config.retention),
      fp_target_(config.fp_target),
      filter_telemetry_(filter),
      recent_(config.recent_keys),
      journal_(journal),
      max_commit_lag_ns_(config.following() && journal != nullptr
                             ? std::chrono::duration_cast<std::chrono::nanoseconds>(config.max_commit_lag).count()
                             : 0),
      peer_wait_(std::min(config.peer_wait, config.request_timeout)),
      instance_id_(NextInstanceId()) {}

std::int64_t Service::ExpiredBeforeUs(std::int64_t now_us) const {
  if (retention_.count() <= 0) return std::numeric_limits<std::int64_t>::min();
  return now_us - std::chrono::duration_cast<std::chrono::microseconds>(retention_).count();
}

std::optional<std::int64_t> Service::PgNowUs(const Digest& d, bool upper) const {
  if (clocks_ == nullptr) return KeyReader::SystemNowUs();
  const storage::PgClock& c = clocks_->Of(d);
  return upper ? c.ExpiryUpperUs() : c.LowerUs();
}

std::int64_t Service::ExpiredBeforeUs(const Digest& d) const {
  if (retention_.count() <= 0) return std::numeric_limits<std::int64_t>::min();  // no clock read when off
  const std::optional<std::int64_t> now_us = PgNowUs(d, /*upper=*/false);
  return now_us ? ExpiredBeforeUs(*now_us) : std::numeric_limits<std::int64_t>::min();
}

bool Service::RecentKnown(const Digest& d, const Digest& identity, std::int64_t keep_until_us,
                          const std::optional<storage::RequestId>& request, Verdict& v, ThreadCounters& counters) {
  const std::optional<RecentSet::Entry> entry = recent_.FindConcurrently(d);
  if (!entry) return false;
  // The most PostgreSQL's clock can read now: an entry is an answer only while PostgreSQL surely holds its row
  // inside the horizon (unknown clock: not an answer).
  const std::optional<std::int64_t> pg_now_us = PgNowUs(identity, /*upper=*/true);
  if (!pg_now_us) return false;
  const std::int64_t now_us = *pg_now_us;
  // Past the horizon the record counts as absent: PostgreSQL decides (it takes the row over: `new`). A pack's
  // entry (keyed by its expiry, so `keep_until_us` is the record's own) also stops answering at its horizon.
  if (entry->first_seen_us < ExpiredBeforeUs(now_us)) return false;
  if (keep_until_us != 0 && keep_until_us < now_us) return false;
  if (request) {
    // Idempotency-Key: only an entry that knows the request that recorded the key tells a retry from a second
    // scan; one that does not (a follower's row, a duplicate whose row's record was not read) asks PostgreSQL.
    if (!entry->recorder.known()) return false;
    if (entry->recorder.Is(*request)) {  // the recording request again: its answer again, as the row would say
      Replay(v, counters);
      counters.recent_replays.Inc();
      return true;
    }
  }
  v.is_new = false;
  v.via_filter = false;
  v.first_seen = Rfc3339Micros(entry->first_seen_us);
  counters.recent_hits.Inc();
  return true;
}

void Service::LearnCommitted(std::span<const Digest> digests, std::span<const std::int64_t> first_seen_us) {
  if (!recent_.enabled() || digests.empty()) return;
  const std::int64_t expired_before = ExpiredBeforeUs(digests[0]);  // one follower: one partition, one clock
  for (std::size_t i = 0; i < digests.size() && i < first_seen_us.size(); ++i) {
    // A raw key: its digest is its recent-set key. The follower does not read the row's idempotency record:
    // unknown (a request with one still asks PostgreSQL; this instance's own commit of it makes it known).
    recent_.InsertConcurrently(digests[i], first_seen_us[i], Recorder::Unknown(), expired_before);
  }
}

void Service::RememberStored(const Digest& d, const storage::Result& r) {
  if (!recent_.enabled()) return;
  if (r.outcome != storage::Outcome::kInserted && r.outcome != storage::Outcome::kDuplicate) return;
  // No first_seen: not remembered (forgetting is always safe; the next repeat asks PostgreSQL).
  if (r.first_seen.empty()) return;
  // The row's recorder (never this request's, unless it inserted the row); unknown when it was not read.
  const Recorder recorder = r.request_known ? Recorder::Of(r.recorded.request) : Recorder::Unknown();
  const RecentSet::Fact fact =
      r.outcome == storage::Outcome::kInserted ? RecentSet::Fact::kInsertedNow : RecentSet::Fact::kRecorded;
  recent_.InsertConcurrently(keys_.RecentDigest(d, r.recorded), r.first_seen_us, recorder, ExpiredBeforeUs(d), fact);
}

void Service::Observe(const Observation& obs, const net::any_io_executor& ex, ThreadCounters& counters,
                      ObserveDone done) {
  std::variant<ScanKey, Problem> read = keys_.Read(obs.key);
  if (auto* p = std::get_if<Problem>(&read)) return done(std::move(*p));  // --keys=gs1: not a pack (400)
  ScanKey& k = std::get<ScanKey>(read);
  auto call = std::make_shared<Call>(*this, ex, counters, 1, filter_vouches_ && warm(), std::move(done));
  call->at(0).verdict.digest_hex = ToHex(k.digest);
  call->at(0).attrs = std::move(k.attrs);
  call->at(0).recent_digest = k.recent_digest;
  if (!obs.idempotency_key.empty()) call->at(0).attrs.request = keys_.RequestIdOf(obs.scope, obs.idempotency_key);
  ReadPreviousDigest(*call, 0, obs.key);
  DecideKey(call, 0, k.digest, obs.source, std::nullopt);
}

void Service::ObserveBatch(const BatchRequest& batch, const net::any_io_executor& ex, ThreadCounters& counters,
                           BatchDone done) {
  const std::size_t n = batch.entries.size();
  if (n == 0) return done(std::vector<Verdict>{});  // the parser refuses empty batches; nothing to decide
  // Every key read first: a digest failure throws (-> 500), and (--keys=gs1) a key that is not a pack answers
  // the batch 400, before anything of the batch is recorded.
  std::vector<ScanKey> keys(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::variant<ScanKey, Problem> read = keys_.Read(batch.entries[i].key);
    if (auto* p = std::get_if<Problem>(&read)) {
      p->detail = "keys[" + std::to_string(i) + "]: " + p->detail;  // which entry, as the parser's problems say
      return done(std::move(*p));
    }
    keys[i] = std::move(std::get<ScanKey>(read));
  }
  std::vector<Digest> digests(n);
  for (std::size_t i = 0; i < n; ++i) digests[i] = keys[i].digest;
  auto call = std::make_shared<Call>(*this, ex, counters, n, filter_vouches_ && warm(), std::move(done));
  for (std::size_t i = 0; i < n; ++i) {
    Call::Entry& e = call->at(i);
    e.verdict.digest_hex = ToHex(digests[i]);
    e.attrs = std::move(keys[i].attrs);
    e.recent_digest = keys[i].recent_digest;
    const Observation& o = batch.entries[i];
    if (!o.idempotency_key.empty()) e.attrs.request = keys_.RequestIdOf(o.scope, o.idempotency_key);
    ReadPreviousDigest(*call, i, o.key);
  }
  // Without stripe locks (ack=commit, or filter off) the whole batch is probed at once (one pass, prefetched).
  std::vector<Probe> probes;
  if (filter_on_ && ack_ != AckMode::kFilter) {
    probes.resize(n);
    filter_.ObserveBatchConcurrently(digests, probes);
  }
  for (std::size_t i = 0; i < n; ++i) {
    // After the first failure the rest are not decided: the whole batch is answered 503 anyway.
    if (call->failed()) {
      call->Finish();
      continue;
    }
    DecideKey(call, i, digests[i], batch.entries[i].source,
              probes.empty() ? std::nullopt : std::optional<Probe>(probes[i]));
  }
}

MetricsSnapshot Service::Snapshot() const {
  MetricsSnapshot s;
  metrics_.Collect(s);
  const auto now = std::chrono::steady_clock::now();
  const auto sample = filter_telemetry_.Latest();
  s.filter_snapshot_age_seconds = std::chrono::duration<double>(now - sample->taken).count();
  s.shards = sample->shards;
  for (ShardStats& st : s.shards) st.age_seconds += s.filter_snapshot_age_seconds;  // generation age now
  s.filter_window_seconds = window_seconds_;
  s.filter_capacity_per_shard = filter_.geometry().capacity_per_shard;
  s.filter_fp_target = fp_target_;
  s.uptime_seconds = std::chrono::duration<double>(now - started_).count();
  s.filter_memory_bytes = filter_.geometry().memory_bytes;
  s.warm = warm();
  s.store = store_.Stats();
  s.recent_keys = recent_.size();
  s.recent_capacity = recent_.bound();
  if (journal_ != nullptr) s.journal = journal_->Stats();
  if (storage_stats_) storage_stats_(s);
  s.retention_seconds = retention_.count();
  return s;
}

}  // namespace scangate::server
