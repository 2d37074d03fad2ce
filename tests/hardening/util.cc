// Helpers for the hardening tests (see util.h).
#include "util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <sstream>
#include <stdexcept>

namespace scangate::hardening {
namespace {

constexpr std::size_t kMaxExamples = 20;
constexpr auto kReconnectBackoff = std::chrono::milliseconds(20);
constexpr auto kUnavailableBackoff = std::chrono::milliseconds(50);  // the client honours Retry-After loosely
constexpr std::size_t kPgCheckChunk = 5000;                          // digests per CountDigests query

std::string ToHexBytes(const unsigned char* p, std::size_t n) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    out += kHex[p[i] >> 4];
    out += kHex[p[i] & 0xf];
  }
  return out;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

const char* OutcomeName(AttemptOutcome o) {
  switch (o) {
    case AttemptOutcome::kNew:
      return "201";
    case AttemptOutcome::kDuplicate:
      return "200";
    case AttemptOutcome::kUnavailable:
      return "503-unavailable";
    case AttemptOutcome::kOutcomeUnknown:
      return "503-outcome-unknown";
    case AttemptOutcome::kConnectionError:
      return "conn-error";
    case AttemptOutcome::kOther:
      return "other";
  }
  return "?";
}

// May have recorded the key: a cut-off connection or a 503 outcome-unknown. A 503 unavailable is definite.
bool Ambiguous(AttemptOutcome o) {
  return o == AttemptOutcome::kOutcomeUnknown || o == AttemptOutcome::kConnectionError;
}

// The problem "type" of a 503 body; "" when the body is not a problem object.
std::string ProblemType(const std::string& body) {
  boost::system::error_code ec;
  const boost::json::value v = boost::json::parse(body, ec);
  if (ec || !v.is_object()) return "";
  const auto* t = v.as_object().if_contains("type");
  return t != nullptr && t->is_string() ? std::string(t->as_string()) : "";
}

std::string DescribeAttempts(const std::vector<Attempt>& attempts, Clock::time_point origin) {
  std::ostringstream os;
  for (const auto& a : attempts) {
    os << " [" << OutcomeName(a.outcome) << " inst=" << a.instance
       << " t=" << std::chrono::duration_cast<std::chrono::milliseconds>(a.start - origin).count() << ".."
       << std::chrono::duration_cast<std::chrono::milliseconds>(a.end - origin).count() << "ms";
    if (!a.detail.empty()) os << " " << a.detail.substr(0, 200);
    os << "]";
  }
  return os.str();
}

}  // namespace

void Report(const std::string& line) { std::cout << "hardening: " << line << std::endl; }

std::uint64_t RaiseFdLimit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return 0;
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
    ::getrlimit(RLIMIT_NOFILE, &rl);
  }
  return rl.rlim_cur;
}

CommandResult RunCommand(const std::string& command) {
  CommandResult r;
  FILE* f = ::popen((command + " 2>&1").c_str(), "r");
  if (f == nullptr) return r;
  char buf[65536];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) r.output.append(buf, n);
  const int st = ::pclose(f);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::string HmacSha256Hex(std::string_view secret, std::string_view key) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
           reinterpret_cast<const unsigned char*>(key.data()), key.size(), md, &len) == nullptr ||
      len != 32) {
    throw std::runtime_error("HMAC failed");
  }
  return ToHexBytes(md, len);
}

std::string TlsClientHello() {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) throw std::runtime_error("SSL_CTX_new failed");
  SSL* ssl = SSL_new(ctx);
  BIO* rbio = BIO_new(BIO_s_mem());
  BIO* wbio = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl, rbio, wbio);  // ssl owns both BIOs now
  SSL_set_tlsext_host_name(ssl, "scangate.test");
  SSL_connect(ssl);  // no peer: writes the ClientHello into wbio and wants to read
  char* data = nullptr;
  const long n = BIO_get_mem_data(wbio, &data);
  std::string out(data, n > 0 ? static_cast<std::size_t>(n) : 0);
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  if (out.size() < 5 || out[0] != 0x16) throw std::runtime_error("no ClientHello produced");
  return out;
}

// -------------------------------------------------------------------------------------------------
// Ledger

std::string LedgerCheck::Summary() const {
  std::ostringstream os;
  os << "keys=" << keys << " attempts=" << attempts << " answered_201=" << answered_new
     << " answered_200=" << answered_duplicate << " answered_503_unavailable=" << unavailable
     << " answered_503_outcome_unknown=" << outcome_unknown
     << " connection_errors=" << connection_errors << " other_status=" << other
     << " | ambiguous_then_200=" << ambiguous_then_duplicate << " ambiguous_then_201=" << ambiguous_then_new
     << " keys_without_verdict=" << keys_without_verdict << " | violations: new_twice=" << keys_new_twice
     << " dup_without_earlier_send=" << duplicates_without_witness
     << " only_dups_no_new=" << definitive_keys_without_new << " verdict_missing_in_pg=" << verdict_keys_missing_in_pg
     << " bad_bodies=" << bad_bodies << " dup_after_only_definite_503=" << duplicate_after_definite_503
     << " definite_503_in_pg=" << definite_503_keys_in_pg;
  return os.str();
}

void Ledger::Record(const std::string& key, const it::HttpResponse* response, Clock::time_point start,
                    Clock::time_point end, int instance, const std::string& error) {
  Attempt a{AttemptOutcome::kConnectionError, 0, start, end, instance, error};
  std::string bad;
  if (response != nullptr) {
    a.status = response->status;
    a.detail.clear();
    if (response->status == 201 || response->status == 200) {
      a.outcome = response->status == 201 ? AttemptOutcome::kNew : AttemptOutcome::kDuplicate;
      boost::system::error_code ec;
      boost::json::value v = boost::json::parse(response->body, ec);
      const std::string want_verdict = response->status == 201 ? "new" : "duplicate";
      if (ec || !v.is_object()) {
        bad = "body is not JSON: " + response->body.substr(0, 200);
      } else {
        const auto& o = v.as_object();
        const auto* verdict = o.if_contains("verdict");
        const auto* digest = o.if_contains("digest");
        if (verdict == nullptr || !verdict->is_string() || verdict->as_string() != want_verdict) {
          bad = "verdict field does not match status " + std::to_string(response->status) + ": " + response->body;
        } else if (digest == nullptr || !digest->is_string() || digest->as_string() != it::Sha256Hex(key)) {
          bad = "digest is not SHA-256(key): " + response->body;
        } else if (response->status == 200 && o.if_contains("first_seen") == nullptr) {
          bad = "duplicate without first_seen: " + response->body;
        }
      }
    } else if (response->status == 503 && ProblemType(response->body) == kProblemUnavailable) {
      a.outcome = AttemptOutcome::kUnavailable;
    } else if (response->status == 503 && ProblemType(response->body) == kProblemOutcomeUnknown) {
      a.outcome = AttemptOutcome::kOutcomeUnknown;
    } else {
      a.outcome = AttemptOutcome::kOther;
      a.detail = "HTTP " + std::to_string(response->status) + " " + response->body.substr(0, 200);
    }
  }
  std::lock_guard lock(mu_);
  ++outcome_counts_[static_cast<int>(a.outcome)];
  if (!bad.empty()) {
    ++bad_bodies_;
    if (body_examples_.size() < kMaxExamples) body_examples_.push_back(bad);
  }
  by_key_[key].push_back(std::move(a));
}

std::vector<std::string> Ledger::AnsweredKeys() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& [k, v] : by_key_) {
    for (const auto& a : v) {
      if (a.outcome == AttemptOutcome::kNew || a.outcome == AttemptOutcome::kDuplicate) {
        out.push_back(k);
        break;
      }
    }
  }
  return out;
}

std::uint64_t Ledger::attempts() const {
  std::lock_guard lock(mu_);
  std::uint64_t n = 0;
  for (auto c : outcome_counts_) n += c;
  return n;
}

std::uint64_t Ledger::CountOutcome(AttemptOutcome o) const {
  std::lock_guard lock(mu_);
  return outcome_counts_[static_cast<int>(o)];
}

LedgerCheck Ledger::Check(it::Pg& pg) const {
  return Check([&pg](const std::vector<std::string>& hexes) { return pg.CountDigests(hexes); });
}

LedgerCheck Ledger::Check(const DigestCounter& count) const {
  std::lock_guard lock(mu_);
  LedgerCheck c;
  c.bad_bodies = bad_bodies_;
  for (const auto& e : body_examples_) c.examples.push_back("bad body: " + e);
  Clock::time_point origin = Clock::time_point::max();
  for (const auto& [k, v] : by_key_) {
    for (const auto& a : v) origin = std::min(origin, a.start);
  }
  auto example = [&](const std::string& what, const std::string& key, const std::vector<Attempt>& v) {
    if (c.examples.size() < kMaxExamples) {
      c.examples.push_back(what + " digest=" + it::Sha256Hex(key) + DescribeAttempts(v, origin));
    }
  };
  std::vector<const std::string*> with_verdict, only_definite_503;
  for (const auto& [key, attempts] : by_key_) {
    ++c.keys;
    std::uint64_t n_new = 0, n_dup = 0, n_amb = 0, n_unavailable = 0;
    for (const auto& a : attempts) {
      ++c.attempts;
      switch (a.outcome) {
        case AttemptOutcome::kNew:
          ++n_new;
          ++c.answered_new;
          break;
        case AttemptOutcome::kDuplicate:
          ++n_dup;
          ++c.answered_duplicate;
          break;
        case AttemptOutcome::kUnavailable:  // definite: this attempt recorded nothing
          ++n_unavailable;
          ++c.unavailable;
          break;
        case AttemptOutcome::kOutcomeUnknown:
          ++n_amb;
          ++c.outcome_unknown;
          break;
        case AttemptOutcome::kConnectionError:
          ++n_amb;
          ++c.connection_errors;
          break;
        case AttemptOutcome::kOther:
          ++c.other;
          example("unexpected status:", key, attempts);
          break;
      }
    }
    if (n_new > 1) {
      ++c.keys_new_twice;
      example("answered 201 more than once:", key, attempts);
    }
    // A 200 is only right if some other attempt that could have inserted the key (a 201, or an attempt
    // whose fate is unknown) had started before this 200 was delivered.
    for (std::size_t i = 0; i < attempts.size(); ++i) {
      if (attempts[i].outcome != AttemptOutcome::kDuplicate) continue;
      bool witness = false, definite_503_before = false;
      for (std::size_t j = 0; j < attempts.size() && !witness; ++j) {
        if (j == i) continue;
        const auto& b = attempts[j];
        witness = (b.outcome == AttemptOutcome::kNew || Ambiguous(b.outcome)) && b.start < attempts[i].end;
        definite_503_before = definite_503_before ||
                              (b.outcome == AttemptOutcome::kUnavailable && b.start < attempts[i].end);
      }
      if (!witness) {
        ++c.duplicates_without_witness;
        if (definite_503_before) {
          ++c.duplicate_after_definite_503;
          example("answered 200 after only definite 503s (a 503 unavailable recorded the key):", key, attempts);
        } else {
          example("answered 200 without an earlier send:", key, attempts);
        }
      }
    }
    if (n_new == 0 && n_amb == 0 && n_dup > 0) {
      ++c.definitive_keys_without_new;
      example("only 200s, never 201, no ambiguous attempt:", key, attempts);
    }
    if (n_amb > 0 && n_new == 0 && n_dup > 0) ++c.ambiguous_then_duplicate;
    if (n_amb > 0 && n_new > 0) ++c.ambiguous_then_new;
    if (n_new + n_dup == 0) {
      ++c.keys_without_verdict;
      if (n_amb == 0 && n_unavailable > 0) only_definite_503.push_back(&key);
    } else {
      with_verdict.push_back(&key);
    }
  }
  // Every key that got a verdict (201 or 200) must have its row in PostgreSQL.
  for (std::size_t i = 0; i < with_verdict.size(); i += kPgCheckChunk) {
    std::vector<std::string> hexes;
    const std::size_t end = std::min(with_verdict.size(), i + kPgCheckChunk);
    for (std::size_t j = i; j < end; ++j) hexes.push_back(it::Sha256Hex(*with_verdict[j]));
    const auto present = count(hexes);
    if (present == static_cast<std::int64_t>(hexes.size())) continue;
    for (std::size_t j = i; j < end; ++j) {
      if (count({hexes[j - i]}) == 0) {
        ++c.verdict_keys_missing_in_pg;
        example("answered but not in PostgreSQL:", *with_verdict[j], by_key_.at(*with_verdict[j]));
      }
    }
  }
  // A definite 503 (unavailable) recorded nothing: a key whose every attempt was one must be absent.
  for (std::size_t i = 0; i < only_definite_503.size(); i += kPgCheckChunk) {
    std::vector<std::string> hexes;
    const std::size_t end = std::min(only_definite_503.size(), i + kPgCheckChunk);
    for (std::size_t j = i; j < end; ++j) hexes.push_back(it::Sha256Hex(*only_definite_503[j]));
    if (count(hexes) == 0) continue;
    for (std::size_t j = i; j < end; ++j) {
      if (count({hexes[j - i]}) != 0) {
        ++c.definite_503_keys_in_pg;
        example("in PostgreSQL although every attempt was a definite 503:", *only_definite_503[j],
                by_key_.at(*only_definite_503[j]));
      }
    }
  }
  return c;
}

// -------------------------------------------------------------------------------------------------
// LoadGenerator

LoadGenerator::LoadGenerator(Ledger& ledger, LoadOptions options, std::vector<std::uint16_t> ports)
    : ledger_(ledger), options_(std::move(options)), ports_(std::move(ports)) {}

LoadGenerator::~LoadGenerator() { Stop(); }

void LoadGenerator::Start() {
  for (int i = 0; i < options_.threads; ++i) workers_.emplace_back([this, i] { Worker(i); });
}

void LoadGenerator::SetPorts(std::vector<std::uint16_t> ports) {
  std::lock_guard lock(mu_);
  ports_ = std::move(ports);
  ++generation_;
}

std::size_t LoadGenerator::pending() const {
  std::lock_guard lock(mu_);
  return pending_.size();
}

std::size_t LoadGenerator::Drain(std::chrono::seconds timeout) {
  draining_ = true;
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    {
      std::lock_guard lock(mu_);
      if (pending_.empty() && inflight_.load() == 0) return 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pending();
}

void LoadGenerator::Stop() {
  stop_ = true;
  for (auto& t : workers_) {
    if (t.joinable()) t.join();
  }
  workers_.clear();
}

std::optional<std::string> LoadGenerator::NextKey(std::mt19937_64& rng, bool& retransmit,
                                                  std::string& idempotency_key) {
  std::lock_guard lock(mu_);
  retransmit = false;
  if (!pending_.empty()) {
    std::string k = std::move(pending_.front());
    pending_.pop_front();
    retransmit = true;
    ++inflight_;
    if (options_.idempotency_keys) idempotency_key = scan_id_[k];  // the retransmitted scan's own
    return k;
  }
  if (draining_) return std::nullopt;
  ++inflight_;
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::string k = !answered_.empty() && u(rng) < options_.repeat_fraction
                      ? answered_[std::uniform_int_distribution<std::size_t>(0, answered_.size() - 1)(rng)]
                      : it::UniqueKey(options_.key_tag);
  if (options_.idempotency_keys) idempotency_key = scan_id_[k] = it::RandomHex(12);  // a new scan
  return k;
}

void LoadGenerator::Worker(int index) {
  std::mt19937_64 rng(0x5ca9'9a7e'0000'0000ull + static_cast<std::uint64_t>(index));
  std::unique_ptr<it::HttpClient> client;
  std::uint64_t client_generation = ~0ull;
  int instance = 0;
  while (!stop_) {
    std::uint16_t port = 0;
    std::uint64_t generation = 0;
    {
      std::lock_guard lock(mu_);
      generation = generation_;
      instance = static_cast<int>(index % ports_.size());
      port = ports_[static_cast<std::size_t>(instance)];
    }
    if (!client || client_generation != generation) {
      try {
        client.reset();
        client = std::make_unique<it::HttpClient>(port);
        client_generation = generation;
      } catch (const std::exception&) {
        ++connect_failures_;
        client.reset();
        std::this_thread::sleep_for(kReconnectBackoff);
        continue;
      }
    }
    bool retransmit = false;
    std::string idempotency_key;
    std::optional<std::string> key = NextKey(rng, retransmit, idempotency_key);
    if (!key) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    if (retransmit) ++retransmissions_;
    ++requests_;
    const auto start = Clock::now();
    bool requeue = false;
    std::chrono::milliseconds backoff{0};
    try {
      it::HttpResponse r =
          idempotency_key.empty()
              ? client->Post("/observe", it::ObserveBody(*key))
              : client->Request("POST", "/observe", it::ObserveBody(*key), "application/json",
                                {{"Idempotency-Key", idempotency_key}});
      if (r.header("idempotent-replayed") == "true") ++replays_;
      const auto end = Clock::now();
      ledger_.Record(*key, &r, start, end, static_cast<int>(generation * 16 + static_cast<std::uint64_t>(instance)));
      if (r.status == 201 || r.status == 200) {
        ++verdicts_;
        if (r.status == 201 || retransmit) {
          std::lock_guard lock(mu_);
          answered_.push_back(*key);
        }
      } else if (r.status == 503) {
        if (!r.has_header("retry-after")) ++retry_after_missing_;
        requeue = true;
        backoff = kUnavailableBackoff;
      }
      if (!r.keep_alive) client.reset();
    } catch (const std::exception& e) {
      const auto end = Clock::now();
      ledger_.Record(*key, nullptr, start, end,
                     static_cast<int>(generation * 16 + static_cast<std::uint64_t>(instance)), e.what());
      requeue = true;
      client.reset();
      backoff = kReconnectBackoff;
    }
    if (requeue) {
      std::lock_guard lock(mu_);
      pending_.push_back(*key);
    }
    --inflight_;
    if (backoff.count() > 0) std::this_thread::sleep_for(backoff);
    if (options_.pause.count() > 0) std::this_thread::sleep_for(options_.pause);
  }
}

std::optional<std::chrono::milliseconds> WaitReady(std::uint16_t port, std::chrono::seconds timeout) {
  const auto start = Clock::now();
  const auto deadline = start + timeout;
  while (Clock::now() < deadline) {
    try {
      it::HttpClient c(port);
      if (c.Get("/readyz").status == 200) {
        return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
      }
    } catch (const std::exception&) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return std::nullopt;
}

// -------------------------------------------------------------------------------------------------
// Raw sockets

RawConn::RawConn(std::uint16_t port, const std::string& source) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  if (!source.empty()) {
    sockaddr_in from{};
    from.sin_family = AF_INET;
    if (::inet_pton(AF_INET, source.c_str(), &from.sin_addr) != 1 ||
        ::bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0) {
      ::close(fd_);
      fd_ = -1;
      throw std::runtime_error("bind to " + source + " failed");
    }
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const int e = errno;
    ::close(fd_);
    fd_ = -1;
    throw std::runtime_error(std::string("connect: ") + std::strerror(e));
  }
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval tv{10, 0};  // a send never blocks longer than this
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

RawConn::~RawConn() {
  if (fd_ >= 0) ::close(fd_);
}

bool RawConn::Send(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

bool RawConn::Pump(std::chrono::milliseconds wait) {
  if (closed_) return false;
  pollfd p{fd_, POLLIN, 0};
  const int r = ::poll(&p, 1, static_cast<int>(wait.count()));
  if (r <= 0) return true;
  char buf[65536];
  while (true) {
    const ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      in_.append(buf, static_cast<std::size_t>(n));
      continue;
    }
    if (n == 0) {
      closed_ = true;
      return false;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
    closed_ = true;
    reset_ = errno == ECONNRESET;
    return false;
  }
}

bool RawConn::WaitClosed(Clock::time_point deadline) {
  while (!closed_) {
    const auto now = Clock::now();
    if (now >= deadline) return false;
    Pump(std::min(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now),
                  std::chrono::milliseconds(200)));
  }
  return true;
}

std::optional<it::HttpResponse> RawConn::ReadResponse(Clock::time_point deadline) {
  while (true) {
    if (auto parsed = ParseResponse(std::string_view(in_).substr(consumed_))) {
      // Without Content-Length a response runs to the close: only complete once closed.
      if (parsed->first.has_header("content-length") || closed_) {
        consumed_ += parsed->second;
        return parsed->first;
      }
    }
    if (closed_) return std::nullopt;
    const auto now = Clock::now();
    if (now >= deadline) return std::nullopt;
    Pump(std::min(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now),
                  std::chrono::milliseconds(200)));
  }
}

std::optional<std::pair<it::HttpResponse, std::size_t>> ParseResponse(std::string_view bytes) {
  const auto head_end = bytes.find("\r\n\r\n");
  if (head_end == std::string_view::npos) return std::nullopt;
  if (bytes.substr(0, 5) != "HTTP/") return std::nullopt;
  it::HttpResponse r;
  const auto line_end = bytes.find("\r\n");
  const std::string_view status_line = bytes.substr(0, line_end);
  const auto sp = status_line.find(' ');
  if (sp == std::string_view::npos) return std::nullopt;
  try {
    r.status = std::stoi(std::string(status_line.substr(sp + 1, 3)));
  } catch (const std::exception&) {
    return std::nullopt;
  }
  std::size_t pos = line_end + 2;
  while (pos < head_end) {
    const auto eol = bytes.find("\r\n", pos);
    const std::string_view line = bytes.substr(pos, eol - pos);
    const auto colon = line.find(':');
    if (colon != std::string_view::npos) {
      std::string value(line.substr(colon + 1));
      while (!value.empty() && value.front() == ' ') value.erase(value.begin());
      r.headers[Lower(line.substr(0, colon))] = value;
    }
    pos = eol + 2;
  }
  std::size_t body_start = head_end + 4;
  std::size_t body_len = bytes.size() - body_start;
  if (r.has_header("content-length")) {
    body_len = std::stoul(r.header("content-length"));
    if (bytes.size() < body_start + body_len) return std::nullopt;
  }
  r.body = std::string(bytes.substr(body_start, body_len));
  r.keep_alive = Lower(r.header("connection")) != "close";
  return std::make_pair(std::move(r), body_start + body_len);
}

std::optional<it::HttpResponse> SendWatching(std::uint16_t port, const std::string& head, const std::string& body,
                                             std::string& note, std::chrono::seconds timeout) {
  constexpr std::size_t kPiece = 16 * 1024;
  const auto deadline = Clock::now() + timeout;
  RawConn c(port);
  if (!c.Send(head)) note = "send of the header failed (peer closed)";
  // The server may answer from the header alone (e.g. 413 on Content-Length).
  if (auto r = c.ReadResponse(Clock::now() + std::chrono::milliseconds(500))) {
    note = "answered after the header";
    return r;
  }
  std::size_t sent = 0;
  while (sent < body.size() && !c.closed()) {
    const std::size_t n = std::min(kPiece, body.size() - sent);
    if (!c.Send(std::string_view(body).substr(sent, n))) {
      note = "send failed after " + std::to_string(sent) + " body bytes";
      break;
    }
    sent += n;
    c.Pump(std::chrono::milliseconds(0));
    if (auto parsed = ParseResponse(c.received())) {
      note = "answered after " + std::to_string(sent) + " body bytes";
      return c.ReadResponse(deadline);
    }
  }
  if (auto r = c.ReadResponse(deadline)) {
    if (note.empty()) note = "answered after the whole body";
    return r;
  }
  note += c.reset()    ? " ; connection reset without a response"
          : c.closed() ? " ; closed without a response"
                       : " ; no response before the deadline";
  return std::nullopt;
}

}  // namespace scangate::hardening
