// DirectWatch (issue 42, design B, --watermark=direct): the peers' commit watermark asked of the peers themselves
// instead of read from PostgreSQL. Every `interval` it sends GET /watermark to every running journal owner of one
// database (partition) — found in scangate_instances, where each registers the URL (`watermark_url`), re-read every
// `discovery` — and each answers how long ago (its boot clock, under its journal's lock) its oldest record not yet
// committed was appended (server/verdict/service_peers.cc Service::WatermarkBody). A request sent at this host's boot
// time s and answered with age a says: every key that peer answered `new` before s - a (this host's clock: the peer
// read its journal after s) is committed, and was so before the answer arrived at r. So once every peer answered,
// the view is offered deadline = s - max(a) + W, valid once the follower applied a poll sent after r (PeerView::Offer:
// the argument of storage/peers/peer_view.h with PostgreSQL's clock replaced by the round trip to each peer).
// A peer that does not answer within `timeout` — dead, or unreachable from here while PostgreSQL is fine — leaves
// the round without an offer: the coverage lapses, new keys wait or get 503.
// Use: one per partition, instead of design A's publisher updates and PeerWatch; Start() once the view exists.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include <absl/base/thread_annotations.h>

#include "core/mutex.h"
#include "storage/log_sink.h"
#include "storage/peers/peer_view.h"

namespace scangate::storage {

struct DirectWatchOptions {
  std::string conninfo;  // the partition's database, with the caller's timeouts (discovery only)
  unsigned partition = 0;
  std::string self;      // this instance's id ("" without a journal): not a peer
  std::chrono::nanoseconds window{0};  // W
  bool after_poll = true;  // offers wait for a follower's poll (--ack=filter); false: valid at once (--ack=commit)
  std::chrono::milliseconds interval{50};     // one round of GET /watermark to every peer
  std::chrono::milliseconds discovery{1000};  // the peers' rows read again
  std::chrono::milliseconds timeout{250};     // one peer's answer (connect included)
  std::shared_ptr<LogSink> log;
};

class DirectWatch {
 public:
  DirectWatch(DirectWatchOptions options, PeerView& view);  // `view` outlives the watch
  ~DirectWatch();                                           // Stop()
  DirectWatch(const DirectWatch&) = delete;
  DirectWatch& operator=(const DirectWatch&) = delete;

  void Start();
  void Stop();  // idempotent
  void Retarget(std::string conninfo);  // the partition moved; any thread

  struct Peer;  // a peer's id, URL and kept-alive connection (direct_watch.cc)

 private:
  void Run();

  DirectWatchOptions options_;
  PeerView& view_;
  std::atomic<bool> stop_{false};
  mutable Mutex mu_;
  std::string conninfo_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace scangate::storage
