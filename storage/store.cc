#include "storage/store.h"

#include <absl/container/inlined_vector.h>

#include <stdexcept>
#include <utility>

#include "core/utf8.h"
#include "storage/epochs/catalog.h"
#include "storage/pg/conninfo.h"
#include "storage/start/startup.h"
#include "storage/write/writer.h"
#include "storage/write/writer_context.h"

namespace scangate::storage {
namespace {

// The first reconnect / start-up pause; doubles up to reconnect_backoff_max.
constexpr std::chrono::milliseconds kBackoffMin{50};

// Sources go into a binary text[] parameter; invalid UTF-8 or NUL would fail the whole batch (and a
// write-behind item would then be retried forever), so such a source is stored as NULL instead.
bool ValidUtf8NoNul(std::string_view s) { return IsValidUtf8(s, /*allow_nul=*/false); }

// The connection strings of `url` (writers: statement_timeout; warm load and migrations: the long bound).
// Throws std::invalid_argument when libpq cannot parse it.
StoreTarget TargetOf(const StoreOptions& o, const std::string& url) {
  ConnectionDefaults defaults;
  defaults.statement_timeout = o.statement_timeout;
  defaults.tcp_user_timeout = o.tcp_user_timeout;
  // sql/014's fence (the writers' scheme) and sql/019's: this scangate checks the closed epochs.
  defaults.extra_options = o.digest_scheme_option;
  if (!defaults.extra_options.empty()) defaults.extra_options += ' ';
  defaults.extra_options += kEpochWriterOption;
  StoreTarget t;
  t.writer_conninfo = WithConnectionDefaults(url, defaults);
  defaults.statement_timeout = o.warm_statement_timeout;
  t.warm_conninfo = WithConnectionDefaults(url, defaults);
  return t;
}

// Adds {"partition": label} to every line of the store (StoreOptions::label).
class LabelledLogSink final : public LogSink {
 public:
  LabelledLogSink(std::shared_ptr<LogSink> inner, std::string label)
      : inner_(std::move(inner)), label_(std::move(label)) {}
  void Write(LogSeverity severity, std::string_view event, boost::json::object fields) override {
    fields["partition"] = label_;
    inner_->Write(severity, event, std::move(fields));
  }

 private:
  const std::shared_ptr<LogSink> inner_;
  const std::string label_;
};

}  // namespace

Store::Store(StoreOptions options) : options_(std::move(options)) {
  if (options_.writers == 0) throw std::invalid_argument("StoreOptions.writers must be at least 1");
  if (options_.batch_limit == 0) throw std::invalid_argument("StoreOptions.batch_limit must be at least 1");
  if (options_.queue_limit == 0) throw std::invalid_argument("StoreOptions.queue_limit must be at least 1");
  if (options_.reconnect_backoff_max < kBackoffMin) options_.reconnect_backoff_max = kBackoffMin;
  std::shared_ptr<LogSink> log = options_.log ? options_.log : StderrLogSink();
  if (!options_.label.empty()) log = std::make_shared<LabelledLogSink>(std::move(log), options_.label);
  shared_ = std::make_unique<StoreShared>(options_, TargetOf(options_, options_.url), std::move(log));
}

void Store::Retarget(std::string url) {
  shared_->target.Set(TargetOf(options_, url));  // TargetOf throws std::invalid_argument before anything changes
}

void Store::AttachClock(const PgClock* clock) { shared_->clock.store(clock); }

Store::~Store() { Shutdown(); }

void Store::Start() {
  if (started_.exchange(true)) throw std::logic_error("Store::Start called twice");
  // The long statement bound: a future migration may build an index over millions of rows.
  MigrateWithRetry(shared_->target.Get().warm_conninfo, RetryPolicy{kBackoffMin, options_.reconnect_backoff_max,
                                               std::chrono::steady_clock::now() + options_.start_timeout});
  for (unsigned i = 0; i < options_.writers; ++i) {
    auto w = std::make_unique<Writer>(*shared_, i);
    w->ConnectFirst();
    writers_.push_back(std::move(w));
  }
  accepting_.store(true);
  for (auto& w : writers_) w->Start();
}

bool Store::Enqueue(std::uint32_t route, const Digest& d, std::string source, Completion done,
                    bool write_behind, std::shared_ptr<Ticket> ticket, std::int64_t first_seen_us,
                    Expect expect, PackAttrs attrs) {
  if (!accepting_.load() || writers_.empty()) return false;
  WriterQueue& q = writers_[route % writers_.size()]->queue();
  if (!write_behind && !q.up()) return false;  // fail fast, without touching the lock
  if (!shared_->pending.TryAdd()) return false;
  if (!ValidUtf8NoNul(source)) source.clear();
  if (!q.Push(QueuedItem{d, std::move(source), std::move(done), write_behind, StoreClock::now(), first_seen_us,
                         std::move(ticket), expect, 0, nullptr, 0, false, attrs},
              options_.batch_limit)) {
    shared_->pending.Release(1);
    return false;
  }
  return true;
}

bool Store::Submit(std::uint32_t route, const Digest& d, std::string source, Completion done,
                   std::shared_ptr<Ticket> ticket, Expect expect, PackAttrs attrs) {
  if (!done) done = [](const Result&) {};
  return Enqueue(route, d, std::move(source), std::move(done), false, std::move(ticket), 0, expect, attrs);
}

bool Store::SubmitWriteBehind(std::uint32_t route, const Digest& d, std::string source, Completion done,
                              std::int64_t first_seen_us, const std::optional<RequestId>& request) {
  PackAttrs attrs;
  attrs.request = request;
  return Enqueue(route, d, std::move(source), std::move(done), true, nullptr, first_seen_us, Expect::kUnknown,
                 attrs);
}

std::size_t Store::SubmitWriteBehindGroup(std::span<const WriteBehindRow> rows, WriteBehindSink& sink) {
  if (rows.empty()) return 0;
  const std::size_t n = ReserveWriteBehind(rows.size());
  if (n == 0) return 0;
  return SubmitWriteBehindGroupReserved(rows.first(n), sink) ? n : 0;
}

std::size_t Store::ReserveWriteBehind(std::size_t n) {
  if (n == 0 || !accepting_.load() || writers_.empty()) return 0;
  return shared_->pending.TryAddUpTo(n);
}

void Store::ReleaseReserved(std::size_t n) {
  if (n > 0) shared_->pending.Release(n);
}

// Not analysed: it holds a varying set of writer locks at once (those the group's rows route to, taken in index
// order), which clang's thread-safety analysis cannot express; each PushLocked / *_locked call below is made
// between its queue's Lock() and Unlock(), which the loops pair by `involved`.
bool Store::SubmitWriteBehindGroupReserved(std::span<const WriteBehindRow> rows, WriteBehindSink& sink)
    ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (rows.empty()) return true;
  if (!accepting_.load() || writers_.empty()) {
    shared_->pending.Release(rows.size());
    return false;
  }
  const std::size_t n = rows.size();
  const std::size_t nw = writers_.size();
  // The writers the rows route to are locked together, in index order (nothing else holds two writer
  // locks), so a Shutdown() racing this call refuses the whole group rather than a row in its middle.
  absl::InlinedVector<std::uint8_t, 8> involved(nw, 0);  // 1 = locked; 2 = to be notified afterwards
  for (std::size_t i = 0; i < n; ++i) involved[rows[i].route % nw] = 1;
  bool stopped = false;
  for (std::size_t k = 0; k < nw; ++k) {
    if (involved[k] == 0) continue;
    WriterQueue& q = writers_[k]->queue();
    q.Lock();
    stopped = stopped || q.stopped_locked();
    // As in WriterQueue::Push: a write-behind row wakes its writer only to start the flush timer (queue empty)...
    if (q.empty_locked()) involved[k] = 2;
  }
  if (!stopped) {
    const auto now = StoreClock::now();
    for (std::size_t i = 0; i < n; ++i) {
      const WriteBehindRow& row = rows[i];
      std::string source = ValidUtf8NoNul(row.source) ? std::string(row.source) : std::string();
      PackAttrs attrs;
      attrs.request = row.request;
      writers_[row.route % nw]->queue().PushLocked(QueuedItem{row.digest, std::move(source), Completion{}, true, now,
                                                              row.first_seen_us, nullptr, Expect::kUnknown, 0,
                                                              &sink, row.tag, row.flag, attrs});
    }
  }
  for (std::size_t k = 0; k < nw; ++k) {
    if (involved[k] == 0) continue;
    WriterQueue& q = writers_[k]->queue();
    // ...or when it completes a batch.
    if (!stopped && q.fifo_size_locked() >= options_.batch_limit) involved[k] = 2;
    q.Unlock();
  }
  if (stopped) {
    shared_->pending.Release(n);
    return false;
  }
  for (std::size_t k = 0; k < nw; ++k) {
    if (involved[k] == 2) writers_[k]->queue().Notify();
  }
  return true;
}

bool Store::up() const {
  if (writers_.empty()) return false;
  for (const auto& w : writers_) {
    if (!w->queue().up()) return false;
  }
  return true;
}

bool Store::full() const { return shared_->pending.full(); }

void Store::Shutdown() {
  std::call_once(shutdown_once_, [this] {
    accepting_.store(false);
    for (auto& w : writers_) w->Stop();
    for (auto& w : writers_) w->Join();
  });
}

StoreStats Store::Stats() const {
  StoreStats s{};
  s.up = up();
  s.queue_depth = shared_->pending.count();
  shared_->metrics.Snapshot(s);
  s.last_warm_streams = last_warm_streams_.load();
  s.cancelled = shared_->cancelled.load();
  return s;
}

}  // namespace scangate::storage
