// PeerWatch (issue 42): --ack=commit's reader of the peers' watermark in one database (one logical partition with
// --partitions). An --ack=commit instance decides every key by an insert, but an insert cannot see a key a journal
// owner (--ack=filter) answered `new` and PostgreSQL has not committed; so before an insert may answer `new`, every
// running journal owner's watermark must cover the request (storage/peers/peer_view.h, the argument). This thread
// reads the peers table every `interval` on a connection of its own into a PeerView. A --ack=filter instance needs
// none: its follower reads the same rows in the snapshot its keys come from.
// Use: one per partition; Start() before serving, Stop() at shutdown.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <absl/base/thread_annotations.h>

#include "core/mutex.h"
#include "storage/log_sink.h"
#include "storage/peers/peer_view.h"

namespace scangate::storage {

struct PeerWatchOptions {
  std::string conninfo;  // the database's (partition's) connection string, with the caller's timeouts
  unsigned partition = 0;
  // One small SELECT per interval. A sample covers requests for W minus the peers' lag after it was sent, so 100 ms
  // is a twentieth of the default 2 s window.
  std::chrono::milliseconds interval{100};
  std::chrono::milliseconds reconnect_delay{500};
  std::shared_ptr<LogSink> log;
};

class PeerWatch {
 public:
  PeerWatch(PeerWatchOptions options, PeerView& view);  // `view` outlives the watch
  ~PeerWatch();                                         // Stop()
  PeerWatch(const PeerWatch&) = delete;
  PeerWatch& operator=(const PeerWatch&) = delete;

  void Start();
  void Stop();  // idempotent
  void Retarget(std::string conninfo);  // the partition moved; any thread
  std::string error() const;            // the last failure ("" while reading)

 private:
  void Run();
  void Serve();

  PeerWatchOptions options_;
  PeerView& view_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> retarget_{false};
  mutable Mutex mu_;
  std::string conninfo_ ABSL_GUARDED_BY(mu_);
  std::string error_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace scangate::storage
