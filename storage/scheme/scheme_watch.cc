#include "storage/scheme/scheme_watch.h"

#include <utility>

#include <pqxx/pqxx>

#include "core/boot_clock.h"
#include "storage/partitions/partition_map.h"

namespace scangate::storage {
namespace {
constexpr auto kPollPeriod = kSchemeLease / 4;  // three polls may fail before a lease runs out
}  // namespace

SchemeWatch::SchemeWatch(std::vector<std::string> conninfos, DigestScheme current, std::shared_ptr<LogSink> log)
    : current_(std::move(current)), log_(log ? std::move(log) : StderrLogSink()) {
  for (auto& c : conninfos) {
    auto part = std::make_unique<Part>();
    part->conninfo = std::move(c);
    parts_.push_back(std::move(part));
  }
  MutexLock lock(&mu_);
  recorded_.resize(parts_.size());
}

SchemeWatch::~SchemeWatch() { Shutdown(); }

void SchemeWatch::Start() {
  // The first reads before serving, on the caller's thread: an instance that answers its first requests with its
  // lease already confirmed, not from PostgreSQL until the thread's first poll lands (a slow start under load).
  // A database that cannot be read now is read again by the thread.
  conns_.resize(parts_.size());
  PollOnce();
  thread_ = std::thread([this] { Run(); });
}

void SchemeWatch::Shutdown() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
    wake_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
}

bool SchemeWatch::Current(const Digest& d) const {
  const Part& p = *parts_[parts_.size() == 1 ? 0 : PartitionOf(d, parts_.size())];
  // acquire: pairs with the release store after the confirming read (nothing else is published with it; the load
  // orders the clock read after it).
  if (p.fenced.load(std::memory_order_acquire)) return false;
  return BootClock::NowNs() < p.confirmed_until_ns.load(std::memory_order_acquire);
}

SchemeWatchSample SchemeWatch::Sample(unsigned partition) const {
  SchemeWatchSample s;
  const Part& p = *parts_[partition];
  s.fenced = p.fenced.load(std::memory_order_acquire);
  s.confirmed = !s.fenced && BootClock::NowNs() < p.confirmed_until_ns.load(std::memory_order_acquire);
  MutexLock lock(&mu_);
  s.recorded = recorded_[partition];
  return s;
}

void SchemeWatch::Run() {
  for (;;) {
    PollOnce();
    MutexLock lock(&mu_);
    if (stop_) return;
    wake_.WaitFor(&mu_, kPollPeriod);
    if (stop_) return;
  }
}

void SchemeWatch::PollOnce() {
  auto& conns = conns_;
  for (std::size_t i = 0; i < parts_.size(); ++i) {
    Part& part = *parts_[i];
    // The lease counts from before the read was sent: the row it finds was current at some instant after this.
    const std::int64_t sent_ns = BootClock::NowNs();
    try {
      if (!conns[i]) conns[i] = std::make_unique<pqxx::connection>(part.conninfo);
      pqxx::read_transaction tx(*conns[i], "scangate_scheme_watch");
      std::optional<RecordedScheme> row = ReadDigestScheme(tx);
      tx.commit();
      const bool mine = row && row->current.fingerprint == current_.fingerprint;
      if (mine) {
        // release: pairs with Current()'s acquire.
        part.confirmed_until_ns.store(sent_ns + std::chrono::nanoseconds(kSchemeLease).count(),
                                      std::memory_order_release);
      } else if (row && !part.fenced.exchange(true, std::memory_order_acq_rel)) {
        boost::json::object f{{"partition", static_cast<std::uint64_t>(i)},
                              {"fingerprint", ToHex(current_.fingerprint).substr(0, 12)},
                              {"recorded_fingerprint", ToHex(row->current.fingerprint).substr(0, 12)},
                              {"note", "another instance rotated this database's digest secret: this instance "
                                       "answers no key new any more (its inserts are refused: 503); restart it "
                                       "with the new secret in --digest-secret-file and this one in "
                                       "--digest-secret-previous-file"}};
        log_->Write(LogSeverity::kError, "digest_scheme_changed", std::move(f));
      }
      MutexLock lock(&mu_);
      recorded_[i] = std::move(row);
    } catch (const std::exception&) {
      conns[i].reset();  // the lease runs out by itself; reconnect at the next poll
    }
  }
}

}  // namespace scangate::storage
