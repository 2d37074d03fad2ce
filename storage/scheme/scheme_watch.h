// SchemeWatch: an --ack=filter instance's lease on its digest scheme (issue 55; the argument:
// storage/scheme/scheme_record.h "Concurrent instances"). One thread reads every database's (partition's) scheme row
// every kSchemeLease / 4 on a connection of its own; a read that finds this instance's current fingerprint there
// confirms the scheme until kSchemeLease after the read was sent (boot clock). Current(d) — may d's key be answered
// `new` from the filter? — is true only within that lease and never again once a read found another fingerprint
// (the database rotated: the instance is fenced until restarted; digest_scheme_changed is logged once).
// Use: one per process with --ack=filter, Start() before serving (it reads every database once before it returns),
// Shutdown() at exit.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <pqxx/connection>

#include <absl/base/thread_annotations.h>

#include "core/digest_scheme.h"
#include "core/mutex.h"
#include "storage/log_sink.h"
#include "storage/scheme/scheme_record.h"

namespace scangate::storage {

struct SchemeWatchSample {
  bool confirmed = false;  // within the lease now
  bool fenced = false;     // the database records another scheme
  std::optional<RecordedScheme> recorded;  // the row as last read
};

class SchemeWatch {
 public:
  // `conninfos`: one per partition (index = partition), connection defaults applied.
  SchemeWatch(std::vector<std::string> conninfos, DigestScheme current, std::shared_ptr<LogSink> log);
  ~SchemeWatch();  // calls Shutdown()
  SchemeWatch(const SchemeWatch&) = delete;
  SchemeWatch& operator=(const SchemeWatch&) = delete;

  void Start();
  void Shutdown();  // idempotent
  // d's partition's scheme is confirmed now. Thread-safe, lock-free (one acquire load and a clock read).
  bool Current(const Digest& d) const;
  SchemeWatchSample Sample(unsigned partition) const;  // thread-safe
  std::size_t partitions() const { return parts_.size(); }

 private:
  struct Part {
    std::string conninfo;
    std::atomic<std::int64_t> confirmed_until_ns{0};  // boot clock
    std::atomic<bool> fenced{false};
  };
  void Run();
  void PollOnce();  // one read of every database's row; Start()'s thread, then Run()'s only

  // One connection per database, used by one thread at a time: Start()'s until it starts Run()'s thread, then that
  // thread's (std::thread's start orders the two).
  std::vector<std::unique_ptr<pqxx::connection>> conns_;
  const DigestScheme current_;
  const std::shared_ptr<LogSink> log_;
  std::vector<std::unique_ptr<Part>> parts_;
  mutable Mutex mu_;
  std::vector<std::optional<RecordedScheme>> recorded_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  CondVar wake_;
  std::thread thread_;
};

}  // namespace scangate::storage
