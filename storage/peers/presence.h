// InstancePresence (issue 55): which kinds of scangate instance serve a database (one logical partition with
// --partitions), told by one PostgreSQL advisory lock held on a session of its own for the instance's whole run.
// Why: an --ack=filter instance with --journal=off answers a key `new` once its row is queued in memory (the
// write-behind) — not durable anywhere another instance could read, so it has no commit watermark to publish and no
// peer could wait for it (storage/peers/peer_view.h: a peer that cannot prove its state is not trusted). Publishing
// one under a per-process identity would not help: when it dies, its unwritten keys are gone, and its row would hold
// every peer's new keys until an operator retired it. So such an instance is REFUSED BESIDE ANY OTHER instance:
//   every other instance (--ack=commit, --ack=filter with a journal) holds pg_try_advisory_lock_shared(kClass, p);
//   an --ack=filter --journal=off instance holds pg_try_advisory_lock(kClass, p), the exclusive form.
// Each try-form is refused while the other is held, so whichever starts second — in either order — is refused at
// start (exit 2 and an `instance_presence` event naming the holders and what to do). A lock lives as long as its
// session: a crashed instance's is released when PostgreSQL notices the session gone (at once for a killed process,
// after TCP keepalives for a lost host) — a stale lock refuses too much, never too little.
// At run time the session is pinged every kPing; held() is false from kFence after the last good ping until the lock
// is taken again — the --journal=off instance then decides its new keys in PostgreSQL (Service::PeerHooks::published).
// What is not proven: if PostgreSQL ends the session while the --journal=off instance runs (pg_terminate_backend,
// idle_session_timeout) and another instance starts within kFence, before the ping notices, both serve; and keys it
// answered `new` before and had not committed stay invisible to the newcomer. The refusal is for an operator's
// mistake, not a fence against an adversary.
// Use: Acquire() once at start (synchronously), then Start(); Stop() at shutdown. One per partition.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include <absl/base/thread_annotations.h>

#include "core/boot_clock.h"
#include "core/mutex.h"
#include "storage/log_sink.h"

namespace scangate::storage {

struct InstancePresenceOptions {
  std::string conninfo;     // the partition's connection string, with the caller's timeouts
  unsigned partition = 0;   // the advisory lock's second key: logical partitions sharing a database stay apart
  std::string label;        // "p0", or "" for one database
  bool exclusive = false;   // --ack=filter --journal=off
  std::shared_ptr<LogSink> log;
};

class InstancePresence {
 public:
  // The advisory lock's first key: "SG" + 55 — not the migrations' pg_advisory_xact_lock key (one bigint).
  static constexpr std::int32_t kClass = 0x5347'0037;
  static constexpr std::chrono::milliseconds kPing{250};
  static constexpr std::chrono::milliseconds kFence{1000};  // held() lapses this long after the last good ping
  static_assert(kFence > 2 * kPing, "a fence shorter than two pings would flap on one slow ping");

  explicit InstancePresence(InstancePresenceOptions options);
  ~InstancePresence();  // Stop()
  InstancePresence(const InstancePresence&) = delete;
  InstancePresence& operator=(const InstancePresence&) = delete;

  enum class Acquired { kHeld, kConflict, kUnreachable };
  // Connects and tries the lock once. kConflict: the other form is held (conflict() says by whom). Call once,
  // before Start(); the caller's thread.
  Acquired Acquire();
  std::string conflict() const;  // "" unless Acquire() or a re-take found the other form held
  void Start();                  // the ping thread (reconnects and re-takes the lock on a lost session)
  void Stop();                   // ends the thread and the session (releasing the lock). Idempotent.
  void Retarget(std::string conninfo);  // the partition moved: take the lock there. Any thread.

  // The lock is held and was confirmed less than kFence ago. Lock-free; any thread.
  bool held() const { return BootClock::NowNs() < held_until_ns_.load(std::memory_order_relaxed); }  // a deadline

 private:
  struct Session;
  bool TryLock(Session& s);  // false: the other form is held (conflict_ set). Throws on a lost connection.
  void Run();

  InstancePresenceOptions options_;
  std::unique_ptr<Session> session_;  // Acquire's, handed to the thread
  std::atomic<bool> stop_{false}, retarget_{false};
  std::atomic<std::int64_t> held_until_ns_{0};
  mutable Mutex mu_;
  std::string conninfo_ ABSL_GUARDED_BY(mu_);
  std::string conflict_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace scangate::storage
