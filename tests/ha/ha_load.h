// Load, timeline and readiness probe for the high-availability tests (tests/ha/ha_failover_test.cc): steady
// POST /observe traffic of fresh and repeated keys, every attempt recorded in the hardening Ledger (which
// checks exactly-once "new", durability and false duplicates) and in a Timeline (when each answer came,
// its status and problem type) from which the gap a disruption causes is measured. Black-box: talks HTTP
// through the integration harness (tests/server/harness.h); nothing here links server code.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "util.h"

namespace scangate::ha {

using hardening::Clock;

// One finished attempt as the timeline sees it. status 0 = connection error; problem = the slug after
// "urn:scangate:problem:" of a 503 (or "-" when absent).
struct Event {
  Clock::time_point start, end;
  int status = 0;
  std::string problem;
  std::string key;
  bool retry_after = false;  // the response carried a Retry-After header
};

// Thread-safe list of events.
class Timeline {
 public:
  void Add(Event e);
  std::vector<Event> Snapshot() const;
  // End time of the last non-2xx event, if any.
  std::optional<Clock::time_point> LastFailure() const;

 private:
  mutable std::mutex mu_;
  std::vector<Event> events_;
};

// What a disruption at time `at` did to the traffic, from the events ending in [at - 2 s, until].
struct GapReport {
  double gap_ms = 0;             // longest interval without a 2xx answer
  double gap_start_ms = 0;       // when it began (last 2xx before it), relative to `at`
  double gap_end_ms = 0;         // first 2xx after it, relative to `at`
  std::uint64_t ok = 0;          // 2xx answers in the window
  std::uint64_t conn_errors = 0;
  std::map<std::string, std::uint64_t> problems;  // 503 by problem type
  std::uint64_t other = 0;       // any other status (a failure of the test)
  std::vector<std::string> outcome_unknown_keys;  // keys answered 503 outcome-unknown
  std::string Summary() const;
};
GapReport MeasureGap(const std::vector<Event>& events, Clock::time_point at, Clock::time_point until);

struct HaLoadOptions {
  int threads = 8;
  double repeat_fraction = 0.3;
  std::string key_tag = "ha";
  std::chrono::microseconds pause{2000};  // per worker between requests: a steady, not saturating, load
  // false: worker i talks to ports[i % ports.size()], so a repeat often meets another instance than its
  // first observation (--ack=commit). true: every key goes to ports[hash(key) % ports.size()], the key
  // routing --ack=filter needs behind a load balancer (deploy/haproxy.cfg hashes the key the same way).
  bool key_affinity = false;
  // When set, fresh keys are drawn until one passes (e.g. only keys of partitions that stay up), so that
  // this load's traffic never waits behind keys it does not want to measure. Unset: every fresh key.
  std::function<bool(const std::string& key)> accept_key;
};

// `threads` workers over keep-alive connections (port per worker or per key: key_affinity). Each
// iteration picks a key waiting for retransmission (last attempt ambiguous: 503 or connection error),
// else a repeat of an answered key (repeat_fraction), else a fresh one.
class HaLoad {
 public:
  HaLoad(hardening::Ledger& ledger, Timeline& timeline, HaLoadOptions options, std::vector<std::uint16_t> ports);
  ~HaLoad();
  void Start();
  // Stops fresh keys and repeats; retransmits until nothing is pending or `timeout`. Returns what is left.
  std::size_t Drain(std::chrono::seconds timeout);
  void Stop();
  std::uint64_t verdicts() const { return verdicts_.load(); }
  std::uint64_t requests() const { return requests_.load(); }
  // Waits until `n` more verdicts arrived or `timeout` passed; returns whether they did.
  bool WaitVerdicts(std::uint64_t n, std::chrono::seconds timeout) const;

 private:
  void Worker(int index);
  std::optional<std::string> NextKey(std::mt19937_64& rng, bool& retransmit);

  hardening::Ledger& ledger_;
  Timeline& timeline_;
  HaLoadOptions options_;
  std::vector<std::uint16_t> ports_;
  mutable std::mutex mu_;
  std::deque<std::string> pending_;
  std::vector<std::string> answered_;
  std::atomic<bool> stop_{false}, draining_{false};
  std::atomic<int> inflight_{0};
  std::atomic<std::uint64_t> verdicts_{0}, requests_{0};
  std::vector<std::thread> workers_;
};

// Polls GET /readyz on every port every 100 ms and records the answers (0 = no connection).
class ReadyProbe {
 public:
  explicit ReadyProbe(std::vector<std::uint16_t> ports);
  ~ReadyProbe();
  void Stop();
  // For port index i: relative to `at`, the first non-200 at or after `at` and the first 200 after that
  // (nullopt when it never went unready / never came back). Returned as a human-readable line.
  std::string Describe(std::size_t i, Clock::time_point at) const;

 private:
  struct Sample {
    Clock::time_point t;
    int status;
  };
  std::vector<std::uint16_t> ports_;
  mutable std::mutex mu_;
  std::vector<std::vector<Sample>> samples_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Slug of a problem+json body's "type" ("unavailable", "outcome-unknown", ...), "-" when absent.
std::string ProblemSlug(const std::string& body);

double Ms(Clock::duration d);

}  // namespace scangate::ha
