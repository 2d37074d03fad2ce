#include "storage/log_sink.h"

#include <unistd.h>

#include <chrono>
#include <string>

#include <boost/json/serialize.hpp>

#include "core/mutex.h"
#include "core/time_format.h"

namespace scangate::storage {
namespace {

class StderrSink final : public LogSink {
 public:
  void Write(LogSeverity severity, std::string_view event, boost::json::object fields) override {
    WriteLogLine(severity, event, std::move(fields));
  }
};

}  // namespace

void WriteLogLine(LogSeverity severity, std::string_view event, boost::json::object fields) {
  boost::json::object line;
  line.reserve(fields.size() + 3);
  line["ts"] = Rfc3339Micros(std::chrono::system_clock::now());
  line["level"] = severity == LogSeverity::kInfo ? "info" : severity == LogSeverity::kWarn ? "warn" : "error";
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

std::shared_ptr<LogSink> StderrLogSink() {
  static const std::shared_ptr<LogSink> sink = std::make_shared<StderrSink>();
  return sink;
}

}  // namespace scangate::storage
