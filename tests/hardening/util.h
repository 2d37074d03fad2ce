// Helpers for the black-box hardening tests of scangate (tests/hardening/*_test.cc): a verdict ledger that
// checks the exactly-once promises across crashes and outages, a multi-threaded keep-alive load generator,
// and raw-socket probes for hostile clients. Builds on the integration harness in tests/server/harness.h
// (process launcher, HttpClient, Pg); nothing here links server code. Every figure a test wants quoted is
// printed through Report() with the prefix "hardening:".
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
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "harness.h"

namespace scangate::hardening {

using Clock = std::chrono::steady_clock;

// Prints "hardening: <line>" to stdout (flushed) so figures can be quoted from the ctest log.
void Report(const std::string& line);

// Raises RLIMIT_NOFILE's soft limit to the hard limit; returns the new soft limit. Child processes
// (the scangate server) inherit it, so call it before starting the server.
std::uint64_t RaiseFdLimit();

// Runs `command` through /bin/sh, returns {exit status, stdout+stderr}.
struct CommandResult {
  int status = -1;
  std::string output;
};
CommandResult RunCommand(const std::string& command);

// A real TLS 1.2/1.3 ClientHello record as a client would send it first (OpenSSL, memory BIOs).
std::string TlsClientHello();

// HMAC-SHA256(secret, key) as 64 lowercase hex chars (OpenSSL, independent of core/).
std::string HmacSha256Hex(std::string_view secret, std::string_view key);

// -------------------------------------------------------------------------------------------------
// Ledger: every attempt to observe a key and what came back. A response is "definitive" when it is a
// verdict (201 new / 200 duplicate) or a 503 of type urn:scangate:problem:unavailable (the attempt recorded
// nothing). Only a connection cut off after the request may have been sent, and a 503 of type
// urn:scangate:problem:outcome-unknown, are "ambiguous": the key may or may not have been committed. Any
// other 503 (no or another problem type) counts as kOther, a violation.
enum class AttemptOutcome : std::uint8_t { kNew, kDuplicate, kUnavailable, kConnectionError, kOther, kOutcomeUnknown };
inline constexpr std::size_t kAttemptOutcomes = 6;
inline constexpr std::string_view kProblemUnavailable = "urn:scangate:problem:unavailable";
inline constexpr std::string_view kProblemOutcomeUnknown = "urn:scangate:problem:outcome-unknown";

struct Attempt {
  AttemptOutcome outcome;
  int status;               // HTTP status, 0 for a connection error
  Clock::time_point start;  // before the first byte was written
  Clock::time_point end;    // after the response (or the error)
  int instance;             // which server instance answered (index chosen by the test)
  std::string detail;       // for kOther and verdict mismatches: what came back
};

struct LedgerCheck {
  std::uint64_t keys = 0, attempts = 0;
  std::uint64_t answered_new = 0, answered_duplicate = 0, unavailable = 0, connection_errors = 0, other = 0;
  std::uint64_t outcome_unknown = 0;              // 503 outcome-unknown answers (ambiguous)
  std::uint64_t keys_new_twice = 0;               // violation: a key answered 201 more than once
  std::uint64_t duplicates_without_witness = 0;   // violation: 200 with no earlier 201/ambiguous attempt
  std::uint64_t definitive_keys_without_new = 0;  // violation: only definitive answers, none 201
  std::uint64_t verdict_keys_missing_in_pg = 0;   // violation: answered 201/200 but no row in PostgreSQL
  std::uint64_t keys_without_verdict = 0;         // never got a 201/200 (reported; the test decides)
  std::uint64_t ambiguous_then_duplicate = 0;     // keys with an ambiguous attempt resolved as duplicate later
  std::uint64_t ambiguous_then_new = 0;           // keys with an ambiguous attempt resolved as new later
  std::uint64_t bad_bodies = 0;                   // violation: verdict body malformed / wrong digest
  // violation: a 200 whose only earlier attempts were definite 503s (unavailable: "recorded nothing")
  std::uint64_t duplicate_after_definite_503 = 0;
  // violation: a key in PostgreSQL whose every attempt was a definite 503
  std::uint64_t definite_503_keys_in_pg = 0;
  std::vector<std::string> examples;              // up to 20 human-readable violations (digests only)
  bool ok() const {
    return keys_new_twice == 0 && duplicates_without_witness == 0 && definitive_keys_without_new == 0 &&
           verdict_keys_missing_in_pg == 0 && bad_bodies == 0 && other == 0 && duplicate_after_definite_503 == 0 &&
           definite_503_keys_in_pg == 0;
  }
  std::string Summary() const;
};

// Thread-safe record of attempts per key. Keys are test-generated and unique to the run; only their
// digests ever appear in failure messages.
class Ledger {
 public:
  // Records one finished attempt. Validates the body of 201/200 (verdict, digest == SHA-256(key)).
  void Record(const std::string& key, const it::HttpResponse* response, Clock::time_point start, Clock::time_point end,
              int instance, const std::string& error = {});
  // Keys that have at least one 201/200 answer (for picking repeats).
  std::vector<std::string> AnsweredKeys() const;
  // How many of `hexes` (SHA-256 digests, lowercase hex) the exact store holds; one call per chunk of at most
  // a few thousand digests, and per single digest when a chunk comes up short. Lets a check run against a
  // store that is not one database (tests/partitions: each digest looked up on the partition its hash names).
  using DigestCounter = std::function<std::int64_t(const std::vector<std::string>& hexes)>;
  // Checks every invariant; `count` answers whether the keys with a verdict (and those that only got
  // definite 503s) are in the store.
  LedgerCheck Check(const DigestCounter& count) const;
  // The same against one PostgreSQL (pg.CountDigests).
  LedgerCheck Check(it::Pg& pg) const;
  std::uint64_t attempts() const;
  std::uint64_t CountOutcome(AttemptOutcome o) const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::vector<Attempt>> by_key_;
  std::uint64_t outcome_counts_[kAttemptOutcomes] = {};
  std::uint64_t bad_bodies_ = 0;
  std::vector<std::string> body_examples_;
};

// -------------------------------------------------------------------------------------------------
// LoadGenerator: `threads` workers, each with its own keep-alive connection(s), sending POST /observe.
// Each iteration picks, in order of preference: a key waiting for retransmission (its last attempt was
// ambiguous), a repeat of an already answered key (probability repeat_fraction), or a fresh key.
// Ports can change at run time (SetPorts) — e.g. after a crash and restart on a new port; a worker whose
// connection fails reconnects to the current port with a short backoff, without consuming a key.
struct LoadOptions {
  int threads = 8;
  double repeat_fraction = 0.3;
  std::string key_tag = "load";
  // Delay between requests of one worker (0 = as fast as possible).
  std::chrono::microseconds pause{0};
  // Idempotency-Key (issue 34): every scan (a fresh key or a repeat) carries a fresh idempotency key, and every
  // retransmission of a scan the same one, as a till would.
  bool idempotency_keys = false;
};

class LoadGenerator {
 public:
  LoadGenerator(Ledger& ledger, LoadOptions options, std::vector<std::uint16_t> ports);
  ~LoadGenerator();
  void Start();
  void SetPorts(std::vector<std::uint16_t> ports);  // bumps the generation: workers reconnect
  // Stop generating fresh keys and repeats; keep retransmitting until every pending key got a verdict
  // or `timeout` passes. Returns the number of keys still pending.
  std::size_t Drain(std::chrono::seconds timeout);
  void Stop();  // joins the workers
  std::uint64_t requests() const { return requests_.load(); }
  std::uint64_t verdicts() const { return verdicts_.load(); }
  std::size_t pending() const;
  std::uint64_t retransmissions() const { return retransmissions_.load(); }
  std::uint64_t connect_failures() const { return connect_failures_.load(); }
  std::uint64_t retry_after_missing() const { return retry_after_missing_.load(); }
  std::uint64_t replays() const { return replays_.load(); }  // answers with Idempotent-Replayed: true

 private:
  void Worker(int index);
  // The next key to send; `idempotency_key` (LoadOptions::idempotency_keys) its scan's.
  std::optional<std::string> NextKey(std::mt19937_64& rng, bool& retransmit, std::string& idempotency_key);

  Ledger& ledger_;
  LoadOptions options_;
  mutable std::mutex mu_;
  std::vector<std::uint16_t> ports_;
  std::uint64_t generation_ = 0;
  std::deque<std::string> pending_;    // ambiguous keys waiting for retransmission
  std::vector<std::string> answered_;  // keys with a verdict (repeat pool)
  std::map<std::string, std::string> scan_id_;  // key -> the idempotency key of its latest scan
  std::atomic<bool> stop_{false};
  std::atomic<bool> draining_{false};
  std::atomic<std::uint64_t> requests_{0}, verdicts_{0}, retransmissions_{0}, connect_failures_{0},
      retry_after_missing_{0}, replays_{0};
  std::atomic<int> inflight_{0};
  std::vector<std::thread> workers_;
};

// Polls GET /readyz on `port` until 200 or `timeout`; returns the time it took, nullopt on timeout.
std::optional<std::chrono::milliseconds> WaitReady(std::uint16_t port, std::chrono::seconds timeout);

// -------------------------------------------------------------------------------------------------
// Raw sockets for hostile clients (blocking fd with poll-based deadlines).
class RawConn {
 public:
  // To 127.0.0.1:port, from `source` (another local IPv4 address, e.g. "127.0.0.2") when given. Throws
  // std::runtime_error on connect failure.
  explicit RawConn(std::uint16_t port, const std::string& source = "");
  ~RawConn();
  RawConn(const RawConn&) = delete;
  RawConn& operator=(const RawConn&) = delete;
  // Sends all bytes; false when the peer closed/reset (EPIPE, ECONNRESET).
  bool Send(std::string_view bytes);
  // Reads whatever arrives within `wait` (appends to received()). Returns false once the peer closed
  // (EOF or reset) — then closed() is true.
  bool Pump(std::chrono::milliseconds wait);
  // Reads until the peer closes or `deadline`; true when it closed.
  bool WaitClosed(Clock::time_point deadline);
  // Reads until one complete response (Content-Length framed) is in received() or deadline / close.
  std::optional<it::HttpResponse> ReadResponse(Clock::time_point deadline);
  bool closed() const { return closed_; }
  bool reset() const { return reset_; }
  const std::string& received() const { return in_; }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  bool closed_ = false, reset_ = false;
  std::string in_;
  std::size_t consumed_ = 0;
};

// Parses one HTTP/1.1 response at the start of `bytes` (Content-Length framing, or until the end when
// absent). Returns the response and the bytes it used, nullopt when incomplete or not HTTP.
std::optional<std::pair<it::HttpResponse, std::size_t>> ParseResponse(std::string_view bytes);

// Sends `head` (request line + headers + blank line) and then `body` in pieces, watching for an early
// response between pieces (a server may answer 413 from the header alone and close). Returns the first
// response, or nullopt when the connection closed without one; `note` says what happened.
std::optional<it::HttpResponse> SendWatching(std::uint16_t port, const std::string& head, const std::string& body,
                                             std::string& note,
                                             std::chrono::seconds timeout = std::chrono::seconds(10));

}  // namespace scangate::hardening
