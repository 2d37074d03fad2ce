#include "storage/peers/direct_watch.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/json/parse.hpp>

#include "core/boot_clock.h"
#include "core/thread_name.h"
#include "storage/peers/peer_connection.h"

namespace scangate::storage {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

// The running peers, and those retired within the last minute (the view counts a retirement, as with design A).
constexpr const char* kDiscoverySql =
    "SELECT instance_id::text, coalesce(watermark_url, ''), coalesce(host, ''), state FROM scangate_instances "
    "WHERE partition = $1::int AND (state = 'running' OR retired_at > now() - interval '1 minute')";

// "http://host:port[/...]" -> host, port; false otherwise.
bool SplitUrl(const std::string& url, std::string& host, std::string& port) {
  constexpr std::string_view kScheme = "http://";
  if (url.rfind(kScheme, 0) != 0) return false;
  const std::string rest = url.substr(kScheme.size(), url.find('/', kScheme.size()) - kScheme.size());
  const auto colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == rest.size()) return false;
  host = rest.substr(0, colon);
  port = rest.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return true;
}

}  // namespace

struct DirectWatch::Peer {
  std::string id, state, url, host_label, host, port;
  std::unique_ptr<beast::tcp_stream> stream;
  beast::flat_buffer buffer;
  std::int64_t last_answer_ns = 0;
};

DirectWatch::DirectWatch(DirectWatchOptions options, PeerView& view) : options_(std::move(options)), view_(view) {
  if (!options_.log) options_.log = StderrLogSink();
  MutexLock lock(&mu_);
  conninfo_ = options_.conninfo;
}

DirectWatch::~DirectWatch() { Stop(); }

void DirectWatch::Start() {
  thread_ = std::thread([this] {
    SetThreadName("sg-peer-direct");
    Run();
  });
}

void DirectWatch::Stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

void DirectWatch::Retarget(std::string conninfo) {
  MutexLock lock(&mu_);
  conninfo_ = std::move(conninfo);
}

namespace {

// One GET /watermark on `p`'s kept-alive connection (made when absent), bounded by `timeout`; the body, or nullopt.
std::optional<std::string> Fetch(asio::io_context& ioc, DirectWatch::Peer& p, std::chrono::milliseconds timeout);

}  // namespace

void DirectWatch::Run() {
  asio::io_context ioc;
  std::map<std::string, Peer> peers;
  peers_detail::ConnPtr db;
  std::string db_conninfo;
  std::int64_t next_discovery = 0;
  std::int64_t discovered_sent = 0;  // the last successful discovery's send time: later peers answered nothing before
  std::string last_error;
  auto note = [&](const std::string& error) {
    if (error == last_error) return;
    last_error = error;
    if (error.empty()) return;
    boost::json::object f{{"state", "down"}, {"error", error}};
    if (!view_.label().empty()) f["partition"] = view_.label();
    options_.log->Write(LogSeverity::kWarn, "peer_watch", std::move(f));
  };
  while (!stop_.load()) {
    const std::int64_t round = BootClock::NowNs();
    if (round >= next_discovery) {
      next_discovery = round + std::chrono::nanoseconds(options_.discovery).count();
      try {
        std::string conninfo;
        {
          MutexLock lock(&mu_);
          conninfo = conninfo_;
        }
        if (!db || conninfo != db_conninfo) {
          db = peers_detail::Open(conninfo, "scangate-peer-direct", "peer discovery connection");
          db_conninfo = conninfo;
        }
        const std::int64_t sent = BootClock::NowNs();
        const peers_detail::ResultPtr r =
            peers_detail::Exec(db.get(), kDiscoverySql, {std::to_string(options_.partition)}, "peer discovery");
        std::map<std::string, Peer> next;
        for (int i = 0; i < PQntuples(r.get()); ++i) {
          const std::string id = PQgetvalue(r.get(), i, 0);
          if (id == options_.self) continue;
          auto it = peers.find(id);
          Peer p = it != peers.end() ? std::move(it->second) : Peer{};
          p.id = id;
          p.host_label = PQgetvalue(r.get(), i, 2);
          p.state = PQgetvalue(r.get(), i, 3);
          if (const std::string url = PQgetvalue(r.get(), i, 1); url != p.url) {
            p.url = url;
            p.stream.reset();
            if (!SplitUrl(url, p.host, p.port)) p.host.clear();
          }
          next.emplace(id, std::move(p));
        }
        peers = std::move(next);
        discovered_sent = sent;
      } catch (const std::exception& e) {
        db.reset();
        note(e.what());
      }
    }
    // One round: every peer's age; an offer only when all answered.
    bool all = discovered_sent != 0;
    std::int64_t worst_age = 0;
    std::vector<PeerInfo> infos;
    for (auto& [id, p] : peers) {
      PeerInfo info;
      info.id = id;
      info.state = p.state;
      info.host = p.host_label;
      if (p.state != "running") {  // retired: not asked, not waited for
        infos.push_back(std::move(info));
        continue;
      }
      std::optional<std::string> body;
      if (!p.host.empty()) body = Fetch(ioc, p, options_.timeout);
      std::int64_t age = -1;
      if (body) {
        try {
          const boost::json::value v = boost::json::parse(*body);
          const auto& ages = v.at("age_ns").as_array();
          if (v.at("instance").as_string() == id && options_.partition < ages.size()) {
            age = ages[options_.partition].to_number<std::int64_t>();
          }
        } catch (const std::exception&) {
          age = -1;
        }
      }
      const std::int64_t now = BootClock::NowNs();
      if (age >= 0) p.last_answer_ns = now;
      info.lag_seconds = age >= 0 ? static_cast<double>(age) * 1e-9 : -1;
      info.heartbeat_age_seconds = p.last_answer_ns == 0 ? -1 : static_cast<double>(now - p.last_answer_ns) * 1e-9;
      infos.push_back(std::move(info));
      if (age < 0) {
        all = false;  // unreachable, no URL (a peer on --watermark=postgresql), or a recovered record of unknown age
      } else {
        worst_age = std::max(worst_age, age);
      }
    }
    const std::int64_t answered = BootClock::NowNs();
    if (all) {
      note("");
      // Every key a peer answered before round - age is committed (it read its journal after `round`), and so was
      // every key of a peer registered after the discovery sent at discovered_sent.
      const std::int64_t covered = std::min(round - worst_age, discovered_sent);
      view_.Offer(covered + options_.window.count(), options_.after_poll ? answered : 0, std::move(infos));
    }
    peers_detail::SleepUnlessStopped(std::chrono::nanoseconds(options_.interval) -
                                         std::chrono::nanoseconds(BootClock::NowNs() - round),
                                     stop_);
  }
}

namespace {

std::optional<std::string> Fetch(asio::io_context& ioc, DirectWatch::Peer& p, std::chrono::milliseconds timeout) {
  beast::error_code ec;
  if (!p.stream) {
    asio::ip::tcp::resolver resolver(ioc);
    const auto endpoints = resolver.resolve(p.host, p.port, ec);
    if (ec) return std::nullopt;
    p.stream = std::make_unique<beast::tcp_stream>(ioc);
    p.buffer.clear();
    p.stream->expires_after(timeout);
    p.stream->async_connect(endpoints, [&ec](beast::error_code e, const asio::ip::tcp::endpoint&) { ec = e; });
    ioc.restart();
    ioc.run();  // the stream's timer ends it within `timeout`
    if (ec) {
      p.stream.reset();
      return std::nullopt;
    }
  }
  http::request<http::empty_body> req{http::verb::get, "/watermark", 11};
  req.set(http::field::host, p.host + ":" + p.port);
  req.keep_alive(true);
  http::response<http::string_body> res;
  p.stream->expires_after(timeout);
  http::async_write(*p.stream, req, [&](beast::error_code e, std::size_t) {
    ec = e;
    if (!e) http::async_read(*p.stream, p.buffer, res, [&ec](beast::error_code e2, std::size_t) { ec = e2; });
  });
  ioc.restart();
  ioc.run();
  if (ec || res.result() != http::status::ok) {
    p.stream.reset();
    return std::nullopt;
  }
  if (!res.keep_alive()) p.stream.reset();
  return std::move(res.body());
}

}  // namespace

}  // namespace scangate::storage
