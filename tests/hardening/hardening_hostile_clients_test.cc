// Hostile clients against one scangate instance while a well-behaved client keeps observing keys in the
// background: slowloris headers, a body that never finishes, Content-Length lies, ~10,000 idle connections,
// oversized headers and bodies, chunked bodies over the limit, invalid UTF-8 / NUL / deep nesting / huge
// strings in JSON, garbage and a TLS ClientHello on the plain port. Every background request must succeed
// (and none may take longer than 5 s); every hostile case must end in the documented 4xx or a closed
// connection, and the server must still serve afterwards. The slow cases run concurrently (bounded ~45 s).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <random>
#include <thread>

#include "util.h"

namespace scangate::hardening {
namespace {

constexpr auto kRequestBound = std::chrono::milliseconds(5000);  // a background request must not hang longer
constexpr auto kBackgroundPause = std::chrono::milliseconds(20);
constexpr auto kHeaderTimeoutBound = std::chrono::seconds(15);  // server header-read timeout is 10 s
// A body below the server's minimum rate is closed ~5 s after its header (kBodyGrace, then 16 KiB/s on average:
// server/http/http_server.h), not at the 30 s body timeout (issue 33): 15 s leaves room for a loaded machine.
constexpr auto kBodyRateBound = std::chrono::seconds(15);
constexpr auto kGiveUp = std::chrono::seconds(45);              // slow cases stop watching after this
constexpr std::size_t kIdleTarget = 10'000;
constexpr std::uint64_t kFdReserve = 256;  // descriptors kept for everything else in this process
constexpr std::size_t kIdleProbeEvery = 100;
constexpr std::size_t kConnectBatch = 500;

using std::chrono::duration_cast;
using std::chrono::milliseconds;

std::int64_t MsSince(Clock::time_point t) { return duration_cast<milliseconds>(Clock::now() - t).count(); }

struct CaseResult {
  std::string name;
  bool ok = false;
  std::string detail;
};

class Results {
 public:
  void Add(CaseResult r) {
    Report(std::string("hostile: ") + r.name + ": " + (r.ok ? "ok" : "FAIL") + ": " + r.detail);
    std::lock_guard lock(mu_);
    all_.push_back(std::move(r));
  }
  std::vector<CaseResult> all() const {
    std::lock_guard lock(mu_);
    return all_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<CaseResult> all_;
};

std::string FirstLine(const std::string& s) {
  if (s.empty()) return "nothing";
  std::string line = s.substr(0, s.find("\r\n"));
  if (line.size() > 60) line = line.substr(0, 60) + "...";
  for (char& c : line) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) c = '?';
  }
  return "\"" + line + "\"";
}

std::string ProblemSlug(const it::HttpResponse& r) {
  boost::system::error_code ec;
  const auto v = boost::json::parse(r.body, ec);
  if (ec || !v.is_object()) return "(no JSON body)";
  const auto* t = v.as_object().if_contains("type");
  return t != nullptr && t->is_string() ? std::string(t->as_string()) : "(no type)";
}

bool IsProblemWithStatus(const it::HttpResponse& r, int status) {
  return r.status == status && r.header("content-type").rfind("application/problem+json", 0) == 0 &&
         ProblemSlug(r).rfind("urn:scangate:problem:", 0) == 0;
}

std::string PostHead(const std::string& target, const std::string& extra) {
  return "POST " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" + extra + "\r\n";
}

// ---- the well-behaved client -----------------------------------------------------------------
struct Background {
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> requests{0};
  std::atomic<std::int64_t> max_ms{0};
  std::mutex mu;
  std::vector<std::string> failures;

  void Fail(const std::string& what) {
    std::lock_guard lock(mu);
    failures.push_back(what);
  }

  void Run(std::uint16_t port) {
    std::unique_ptr<it::HttpClient> client;
    std::vector<std::string> answered;
    for (std::uint64_t i = 0; !stop; ++i) {
      const bool repeat = i % 4 == 3 && !answered.empty();
      const std::string key = repeat ? answered[i % answered.size()] : it::UniqueKey("bg");
      const int want = repeat ? 200 : 201;
      const auto start = Clock::now();
      try {
        if (!client) client = std::make_unique<it::HttpClient>(port);
        const auto r = client->Post("/observe", it::ObserveBody(key));
        const auto ms = MsSince(start);
        max_ms = std::max(max_ms.load(), ms);
        if (r.status != want) {
          Fail("expected " + std::to_string(want) + ", got HTTP " + std::to_string(r.status) + " " +
               r.body.substr(0, 200));
        } else if (!repeat) {
          answered.push_back(key);
        }
        if (ms > kRequestBound.count()) Fail("request took " + std::to_string(ms) + " ms");
        if (!r.keep_alive) client.reset();
      } catch (const std::exception& e) {
        max_ms = std::max(max_ms.load(), MsSince(start));
        Fail(std::string("request failed after ") + std::to_string(MsSince(start)) + " ms: " + e.what());
        client.reset();
      }
      ++requests;
      std::this_thread::sleep_for(kBackgroundPause);
    }
  }
};

// ---- slow cases ------------------------------------------------------------------------------

// Headers trickled one byte every 500 ms never complete: the header-read timeout must close the connection.
CaseResult Slowloris(std::uint16_t port) {
  CaseResult r{"slowloris (header bytes trickled)", false, ""};
  RawConn c(port);
  const auto start = Clock::now();
  bool gone = !c.Send("POST /observe HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ");
  int trickled = 0;
  while (!gone && !c.closed() && Clock::now() - start < kGiveUp) {
    if (!c.Send("a")) {
      gone = true;
      break;
    }
    ++trickled;
    c.Pump(milliseconds(500));
  }
  c.Pump(milliseconds(100));
  const auto ms = MsSince(start);
  const bool closed = gone || c.closed();
  r.ok = closed && ms <= duration_cast<milliseconds>(kHeaderTimeoutBound).count();
  r.detail = std::string(closed ? "closed" : "NOT closed") + " after " + std::to_string(ms) + " ms (bound " +
             std::to_string(kHeaderTimeoutBound.count()) + " s), " + std::to_string(trickled) +
             " bytes trickled, server sent " + FirstLine(c.received());
  return r;
}

// A body trickled one byte per second against Content-Length 1000: below the minimum body rate, closed in seconds.
CaseResult TrickledBody(std::uint16_t port) {
  CaseResult r{"body that never finishes (1 byte/s)", false, ""};
  RawConn c(port);
  const auto start = Clock::now();
  bool gone = !c.Send(PostHead("/observe", "Content-Length: 1000\r\n") + "{\"key\":\"");
  int trickled = 0;
  while (!gone && !c.closed() && Clock::now() - start < kGiveUp) {
    if (!c.Send("b")) {
      gone = true;
      break;
    }
    ++trickled;
    c.Pump(milliseconds(1000));
  }
  c.Pump(milliseconds(100));
  const auto ms = MsSince(start);
  const bool closed = gone || c.closed();
  r.ok = closed && ms <= duration_cast<milliseconds>(kBodyRateBound).count();
  r.detail = std::string(closed ? "closed" : "NOT closed") + " after " + std::to_string(ms) + " ms (bound " +
             std::to_string(kBodyRateBound.count()) + " s), " + std::to_string(trickled) +
             " body bytes trickled, server sent " + FirstLine(c.received());
  return r;
}

// Content-Length 100 but only 20 bytes sent, then silence: the minimum body rate closes it in seconds.
CaseResult ContentLengthOverstated(std::uint16_t port) {
  CaseResult r{"Content-Length says 100, 20 bytes sent", false, ""};
  RawConn c(port);
  const auto start = Clock::now();
  c.Send(PostHead("/observe", "Content-Length: 100\r\n") + "{\"key\":\"abcdefghijk");
  const bool closed = c.WaitClosed(start + kGiveUp);
  const auto ms = MsSince(start);
  const auto resp = ParseResponse(c.received());
  const bool acceptable_response = !resp || (resp->first.status >= 400 && resp->first.status < 500);
  r.ok = closed && ms <= duration_cast<milliseconds>(kBodyRateBound).count() && acceptable_response;
  r.detail = std::string(closed ? "closed" : "NOT closed") + " after " + std::to_string(ms) + " ms, server sent " +
             FirstLine(c.received());
  return r;
}

// ---- many idle connections -------------------------------------------------------------------

CaseResult IdleConnections(std::uint16_t port, std::size_t target) {
  CaseResult r{"idle connections", false, ""};
  std::vector<int> fds;
  std::vector<Clock::time_point> opened_at;
  fds.reserve(target);
  std::size_t connect_errors = 0;
  int socket_errno = 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const auto start = Clock::now();
  while (fds.size() < target && socket_errno == 0) {
    std::vector<pollfd> batch;
    for (std::size_t i = 0; i < kConnectBatch && fds.size() + batch.size() < target; ++i) {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (fd < 0) {
        socket_errno = errno;
        break;
      }
      if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 && errno != EINPROGRESS) {
        ++connect_errors;
        ::close(fd);
        continue;
      }
      batch.push_back(pollfd{fd, POLLOUT, 0});
    }
    // Wait (bounded) until every connect of the batch finished.
    const auto batch_deadline = Clock::now() + std::chrono::seconds(10);
    std::size_t done = 0;
    std::vector<bool> finished(batch.size(), false);
    while (done < batch.size() && Clock::now() < batch_deadline) {
      ::poll(batch.data(), batch.size(), 200);
      for (std::size_t i = 0; i < batch.size(); ++i) {
        if (finished[i] || batch[i].revents == 0) continue;
        finished[i] = true;
        ++done;
        batch[i].events = 0;
      }
    }
    for (std::size_t i = 0; i < batch.size(); ++i) {
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(batch[i].fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (finished[i] && err == 0) {
        fds.push_back(batch[i].fd);
        opened_at.push_back(Clock::now());
      } else {
        ++connect_errors;
        ::close(batch[i].fd);
      }
    }
  }
  const auto open_ms = MsSince(start);

  // Probe every 100th connection: a real request on an idle connection must be served.
  static const std::string kProbe = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  std::vector<std::size_t> probes;
  for (std::size_t i = 0; i < fds.size(); i += kIdleProbeEvery) probes.push_back(i);
  std::vector<std::string> got(probes.size());
  std::vector<int> state(probes.size(), 0);  // 0 waiting, 1 served, 2 closed without answer
  for (std::size_t p = 0; p < probes.size(); ++p) {
    if (::send(fds[probes[p]], kProbe.data(), kProbe.size(), MSG_NOSIGNAL) < 0) state[p] = 2;
  }
  const auto probe_start = Clock::now();
  const auto probe_deadline = probe_start + std::chrono::seconds(10);
  std::size_t waiting = static_cast<std::size_t>(std::count(state.begin(), state.end(), 0));
  while (waiting > 0 && Clock::now() < probe_deadline) {
    std::vector<pollfd> pfds;
    std::vector<std::size_t> which;
    for (std::size_t p = 0; p < probes.size(); ++p) {
      if (state[p] == 0) {
        pfds.push_back(pollfd{fds[probes[p]], POLLIN, 0});
        which.push_back(p);
      }
    }
    ::poll(pfds.data(), pfds.size(), 200);
    for (std::size_t i = 0; i < pfds.size(); ++i) {
      if (pfds[i].revents == 0) continue;
      const std::size_t p = which[i];
      char buf[4096];
      const ssize_t n = ::recv(pfds[i].fd, buf, sizeof buf, 0);
      if (n > 0) got[p].append(buf, static_cast<std::size_t>(n));
      if (auto resp = ParseResponse(got[p])) {
        state[p] = resp->first.status == 200 ? 1 : 2;
      } else if (n == 0 || (n < 0 && errno != EAGAIN)) {
        state[p] = 2;
      }
    }
    waiting = static_cast<std::size_t>(std::count(state.begin(), state.end(), 0));
  }
  std::size_t served = 0, unanswered = 0, expired = 0;
  for (std::size_t p = 0; p < probes.size(); ++p) {
    if (state[p] == 1) {
      ++served;
    } else if (probe_start - opened_at[probes[p]] > std::chrono::milliseconds(9500)) {
      ++expired;  // idle for longer than the 10 s header timeout before the probe: closing it is correct
    } else {
      ++unanswered;
    }
  }
  const auto probe_ms = MsSince(probe_start);
  // While all of them are still open, a brand-new connection must be served too.
  std::string fresh = "not tried";
  bool fresh_ok = false;
  try {
    it::HttpClient c(port);
    const auto resp = c.Get("/healthz");
    fresh_ok = resp.status == 200;
    fresh = "HTTP " + std::to_string(resp.status);
  } catch (const std::exception& e) {
    fresh = e.what();
  }
  for (int fd : fds) ::close(fd);

  r.ok = fds.size() == target && served > 0 && served + expired == probes.size() && fresh_ok;
  r.detail = std::to_string(fds.size()) + " of " + std::to_string(target) + " opened in " + std::to_string(open_ms) +
             " ms (connect errors " + std::to_string(connect_errors) +
             (socket_errno != 0 ? std::string(", socket(): ") + std::strerror(socket_errno) : std::string()) +
             "); probes " + std::to_string(served) + "/" + std::to_string(probes.size()) + " served in " +
             std::to_string(probe_ms) + " ms, " + std::to_string(expired) + " closed after >9.5 s idle, " +
             std::to_string(unanswered) + " unanswered; fresh connection meanwhile: " + fresh;
  return r;
}

// ---- quick cases -----------------------------------------------------------------------------

// Either a response with one of `statuses`, or a close without a response.
CaseResult StatusOrClose(std::string name, std::uint16_t port, const std::string& bytes, std::vector<int> statuses,
                         bool close_ok, std::chrono::seconds bound = std::chrono::seconds(15)) {
  CaseResult r{std::move(name), false, ""};
  RawConn c(port);
  const auto start = Clock::now();
  const bool sent = c.Send(bytes);
  const auto resp = c.ReadResponse(start + bound);
  if (resp) {
    r.ok = std::find(statuses.begin(), statuses.end(), resp->status) != statuses.end();
    r.detail = "HTTP " + std::to_string(resp->status) + " " + ProblemSlug(*resp) + " after " +
               std::to_string(MsSince(start)) + " ms";
  } else {
    r.ok = close_ok && c.closed();
    r.detail = std::string(c.closed() ? (c.reset() ? "reset" : "closed") : "NO answer and not closed") +
               " without a response after " + std::to_string(MsSince(start)) + " ms" + (sent ? "" : " (send failed)");
  }
  return r;
}

// A request with a body sent in pieces while watching for an early answer; expects a problem `status`.
CaseResult ExpectProblem(std::string name, std::uint16_t port, const std::string& head, const std::string& body,
                         int status) {
  CaseResult r{std::move(name), false, ""};
  std::string note;
  const auto start = Clock::now();
  const auto resp = SendWatching(port, head, body, note);
  if (resp) {
    r.ok = IsProblemWithStatus(*resp, status);
    r.detail = "HTTP " + std::to_string(resp->status) + " " + ProblemSlug(*resp) + " (" + note + ", " +
               std::to_string(MsSince(start)) + " ms)";
  } else {
    r.detail = "no response: " + note;
  }
  return r;
}

// JSON bodies that must be rejected with 400 problem+json.
CaseResult Expect400(std::string name, std::uint16_t port, const std::string& target, const std::string& body) {
  CaseResult r{std::move(name), false, ""};
  try {
    it::HttpClient c(port);
    const auto resp = c.Post(target, body);
    r.ok = IsProblemWithStatus(resp, 400);
    r.detail = "HTTP " + std::to_string(resp.status) + " " + ProblemSlug(resp);
  } catch (const std::exception& e) {
    r.detail = std::string("no response: ") + e.what();
  }
  return r;
}

CaseResult ContentLengthUnderstated(std::uint16_t port, bool first_valid) {
  CaseResult r{
      first_valid ? "Content-Length exact, extra bytes after the body" : "Content-Length says 12, 20-byte body + extra",
      false, ""};
  RawConn c(port);
  const auto start = Clock::now();
  std::string body, extra;
  if (first_valid) {
    body = it::ObserveBody(it::UniqueKey("cl"));
    extra = "{\"key\":\"x\"}\r\n\r\n";
  } else {
    const std::string full = "{\"key\":\"abcdefghij\"}";
    body = full.substr(0, 12);
    extra = full.substr(12) + "\r\n\r\n";
  }
  c.Send(PostHead("/observe", "Content-Length: " + std::to_string(body.size()) + "\r\n") + body + extra);
  const auto first = c.ReadResponse(start + std::chrono::seconds(5));
  const int want_first = first_valid ? 201 : 400;
  std::string detail = first ? "first HTTP " + std::to_string(first->status) + " " + ProblemSlug(*first)
                             : std::string("first: no response");
  const auto second = c.ReadResponse(start + std::chrono::seconds(15));
  if (second) {
    detail += "; extra bytes -> HTTP " + std::to_string(second->status) + " " + ProblemSlug(*second);
  } else {
    detail += c.closed() ? "; extra bytes -> connection closed" : "; extra bytes -> NO answer, not closed";
  }
  r.ok = first && first->status == want_first && ((second && second->status == 400) || (!second && c.closed()));
  r.detail = detail + " (" + std::to_string(MsSince(start)) + " ms)";
  return r;
}

std::string Chunked(const std::string& payload, std::size_t chunk) {
  std::string out;
  char size[32];
  for (std::size_t i = 0; i < payload.size(); i += chunk) {
    const std::size_t n = std::min(chunk, payload.size() - i);
    std::snprintf(size, sizeof size, "%zx\r\n", n);
    out += size;
    out += payload.substr(i, n);
    out += "\r\n";
  }
  return out + "0\r\n\r\n";
}

std::vector<CaseResult> QuickCases(std::uint16_t port) {
  std::vector<CaseResult> out;
  const std::string big_header =
      "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + std::string(16 * 1024, 'h') + "\r\n\r\n";
  out.push_back(StatusOrClose("oversized header (16 KiB field)", port, big_header, {431}, true));
  std::string many = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  for (int i = 0; i < 400; ++i) many += "X-Field-" + std::to_string(i) + ": " + std::string(40, 'm') + "\r\n";
  out.push_back(StatusOrClose("oversized header (400 fields, ~20 KiB)", port, many + "\r\n", {431}, true));

  const std::string body20k = "{\"key\":\"" + std::string(20 * 1024, 'a') + "\"}";
  out.push_back(ExpectProblem("oversized body (20 KiB to /observe)", port,
                              PostHead("/observe", "Content-Length: " + std::to_string(body20k.size()) + "\r\n"),
                              body20k, 413));
  const std::string string1m = "{\"key\":\"" + std::string(1024 * 1024, 's') + "\"}";
  out.push_back(ExpectProblem("1 MiB JSON string to /observe", port,
                              PostHead("/observe", "Content-Length: " + std::to_string(string1m.size()) + "\r\n"),
                              string1m, 413));
  const std::string batch1m = "{\"keys\":[\"" + std::string(1024 * 1024, 's') + "\"]}";
  out.push_back(ExpectProblem("1 MiB JSON string to /observe/batch", port,
                              PostHead("/observe/batch", "Content-Length: " + std::to_string(batch1m.size()) + "\r\n"),
                              batch1m, 413));
  const std::string batch2m = "{\"keys\":[\"" + std::string(2 * 1024 * 1024, 'z') + "\"]}";
  out.push_back(ExpectProblem("oversized body (2 MiB to /observe/batch)", port,
                              PostHead("/observe/batch", "Content-Length: " + std::to_string(batch2m.size()) + "\r\n"),
                              batch2m, 413));
  out.push_back(ExpectProblem("chunked body over the limit (40 KiB to /observe)", port,
                              PostHead("/observe", "Transfer-Encoding: chunked\r\n"),
                              Chunked("{\"key\":\"" + std::string(40 * 1024, 'c') + "\"}", 1024), 413));
  out.push_back(ExpectProblem("chunked body over the limit (1.5 MiB to /observe/batch)", port,
                              PostHead("/observe/batch", "Transfer-Encoding: chunked\r\n"),
                              Chunked("{\"keys\":[\"" + std::string(1536 * 1024, 'c') + "\"]}", 64 * 1024), 413));
  out.push_back(ContentLengthUnderstated(port, false));
  out.push_back(ContentLengthUnderstated(port, true));

  out.push_back(Expect400("invalid UTF-8 in key (ff fe fd)", port, "/observe", "{\"key\":\"ab\xff\xfe\xfd\"}"));
  out.push_back(Expect400("overlong UTF-8 in key (c0 af)", port, "/observe", "{\"key\":\"a\xc0\xaf\"}"));
  out.push_back(Expect400("truncated UTF-8 sequence in key", port, "/observe", "{\"key\":\"a\xe2\x82\"}"));
  out.push_back(Expect400("lone UTF-16 surrogate escape in key", port, "/observe", "{\"key\":\"a\\ud800b\"}"));
  out.push_back(Expect400("escaped NUL in key (\\u0000)", port, "/observe", "{\"key\":\"a\\u0000b\"}"));
  out.push_back(Expect400("raw NUL byte in key", port, "/observe", std::string("{\"key\":\"a\0b\"}", 13)));
  out.push_back(Expect400("invalid UTF-8 in batch key", port, "/observe/batch", "{\"keys\":[\"ok\",\"\xff\"]}"));
  out.push_back(Expect400("escaped NUL in batch key", port, "/observe/batch", "{\"keys\":[{\"key\":\"\\u0000\"}]}"));
  out.push_back(Expect400("deeply nested JSON (5000 arrays as key)", port, "/observe",
                          "{\"key\":" + std::string(5000, '[') + std::string(5000, ']') + "}"));
  out.push_back(Expect400("deeply nested JSON (5000 arrays, no object)", port, "/observe",
                          std::string(5000, '[') + std::string(5000, ']')));
  std::string nested = "\"x\"";
  for (int i = 0; i < 9; ++i) nested = "{\"a\":" + nested + "}";
  out.push_back(
      Expect400("nested JSON depth 10 (limit 8)", port, "/observe", "{\"key\":\"k\",\"source\":" + nested + "}"));
  out.push_back(Expect400("deeply nested JSON in batch (2000 arrays)", port, "/observe/batch",
                          "{\"keys\":" + std::string(2000, '[') + std::string(2000, ']') + "}"));

  std::mt19937 rng(12345);
  std::string garbage = std::string("\x00\x01\x02\xfe\xff", 5);
  for (int i = 0; i < 2000; ++i) garbage += static_cast<char>(rng() & 0xff);
  out.push_back(StatusOrClose("garbage bytes (2 KiB binary)", port, garbage + "\r\n\r\n", {400}, true));
  out.push_back(StatusOrClose("garbage text line", port, "HELLO WORLD THIS IS NOT HTTP\r\n\r\n", {400}, true));
  out.push_back(StatusOrClose("TLS ClientHello on the plain port", port, TlsClientHello(), {400}, true));
  return out;
}

// Hostile clients never break service for a well-behaved client, and each gets its documented answer.
TEST(HardeningHostileClients, ServerSurvivesAndWellBehavedClientIsServed) {
  const std::uint64_t fd_limit = RaiseFdLimit();  // before the server starts: it inherits the limit
  const std::size_t idle_target =
      static_cast<std::size_t>(std::min<std::uint64_t>(kIdleTarget, fd_limit > kFdReserve ? fd_limit - kFdReserve : 0));
  Report("hostile: RLIMIT_NOFILE soft limit " + std::to_string(fd_limit) + " (test and server), idle target " +
         std::to_string(idle_target));

  // Every connection here comes from 127.0.0.1: the per-address cap (1024 by default, tested in
  // service_routes_test's ServiceConnections) would close most of the ~10 000 idle ones at accept; this test is
  // about the server holding that many, so the cap is off.
  it::ScangateProcess server({"--ack=commit", "--max-connections-per-address=0"});
  ASSERT_TRUE(server.Start());
  const std::uint16_t port = server.port();

  Background bg;
  std::thread bg_thread([&] { bg.Run(port); });
  const auto start = Clock::now();
  Results results;
  std::vector<std::thread> cases;
  auto run = [&](auto fn) {
    cases.emplace_back([&results, fn] {
      try {
        for (auto& r : fn()) results.Add(std::move(r));
      } catch (const std::exception& e) {
        results.Add({"case threw", false, e.what()});
      }
    });
  };
  run([port] { return std::vector<CaseResult>{Slowloris(port)}; });
  run([port] { return std::vector<CaseResult>{TrickledBody(port)}; });
  run([port] { return std::vector<CaseResult>{ContentLengthOverstated(port)}; });
  run([port, idle_target] { return std::vector<CaseResult>{IdleConnections(port, idle_target)}; });
  run([port] { return QuickCases(port); });
  for (auto& t : cases) t.join();
  const auto cases_ms = MsSince(start);

  // Afterwards the server still serves.
  std::this_thread::sleep_for(milliseconds(300));
  bg.stop = true;
  bg_thread.join();
  int health = 0;
  try {
    it::HttpClient c(port);
    health = c.Get("/healthz").status;
  } catch (const std::exception&) {
  }

  Report("hostile: all cases finished in " + std::to_string(cases_ms) + " ms; background client " +
         std::to_string(bg.requests.load()) + " requests, " + std::to_string(bg.failures.size()) +
         " failures, max latency " + std::to_string(bg.max_ms.load()) + " ms; /healthz afterwards " +
         std::to_string(health));
  for (std::size_t i = 0; i < bg.failures.size() && i < 10; ++i)
    Report("hostile: background failure: " + bg.failures[i]);

  const auto all = results.all();
  EXPECT_GE(all.size(), 29u) << "a case thread died";
  for (const auto& r : all) EXPECT_TRUE(r.ok) << r.name << ": " << r.detail;
  EXPECT_GT(bg.requests.load(), 0u);
  EXPECT_TRUE(bg.failures.empty()) << bg.failures.size() << " background requests failed, first: "
                                   << (bg.failures.empty() ? "" : bg.failures.front());
  EXPECT_LE(bg.max_ms.load(), kRequestBound.count());
  EXPECT_EQ(health, 200) << "server does not answer /healthz after the hostile clients";
}

}  // namespace
}  // namespace scangate::hardening
