#include "server/log.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>

#include <boost/json/serialize.hpp>

#include "core/mutex.h"
#include "core/time_format.h"

namespace scangate::server {

std::string NowRfc3339() { return Rfc3339Micros(std::chrono::system_clock::now()); }

void Log(LogLevel level, std::string_view event, boost::json::object fields) {
  boost::json::object line;
  line.reserve(fields.size() + 3);
  line["ts"] = NowRfc3339();
  line["level"] = level == LogLevel::kInfo ? "info" : level == LogLevel::kWarn ? "warn" : "error";
  line["event"] = event;
  for (auto& kv : fields) line[kv.key()] = std::move(kv.value());
  std::string text = boost::json::serialize(line);
  text.push_back('\n');
  // The mutex keeps a line whole even when write(2) is short (pipe full, signal) and must continue.
  static Mutex mu;
  const MutexLock lock(&mu);
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t w = ::write(STDERR_FILENO, p, left);
    if (w <= 0) break;
    p += w;
    left -= static_cast<std::size_t>(w);
  }
}

namespace {
class StorageAdapter final : public storage::LogSink {
 public:
  void Write(storage::LogSeverity severity, std::string_view event, boost::json::object fields) override {
    Log(severity == storage::LogSeverity::kInfo   ? LogLevel::kInfo
        : severity == storage::LogSeverity::kWarn ? LogLevel::kWarn
                                                  : LogLevel::kError,
        event, std::move(fields));
  }
};
}  // namespace

std::shared_ptr<storage::LogSink> StorageLogSink() { return std::make_shared<StorageAdapter>(); }

}  // namespace scangate::server
