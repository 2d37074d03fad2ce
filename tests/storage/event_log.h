// EventLog: a LogSink for storage/ tests that records every event (name + fields) so a test can ask what was
// logged: Has() (an event, optionally with a "state" field), Count() (such events), size().
// Thread-safe: storage logs from its writer, expiry and journal threads.
#pragma once

#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/json/object.hpp>

#include "storage/log_sink.h"

namespace scangate::storage {

struct EventLog final : LogSink {
  std::mutex mu;
  std::vector<std::pair<std::string, boost::json::object>> events;
  void Write(LogSeverity, std::string_view event, boost::json::object fields) override {
    std::lock_guard lk(mu);
    events.emplace_back(std::string(event), std::move(fields));
  }
  // True when an event `event` was logged with state `state` (any state when empty).
  bool Has(std::string_view event, std::string_view state = "") {
    std::lock_guard lk(mu);
    for (const auto& [e, fields] : events) {
      if (e == event && (state.empty() || HasState(fields, state))) return true;
    }
    return false;
  }
  // Events `event` with state `state` (any state when empty).
  int Count(std::string_view event, std::string_view state = "") {
    std::lock_guard lk(mu);
    int n = 0;
    for (const auto& [e, fields] : events) n += e == event && (state.empty() || HasState(fields, state)) ? 1 : 0;
    return n;
  }
  std::size_t size() {
    std::lock_guard lk(mu);
    return events.size();
  }

 private:
  static bool HasState(const boost::json::object& fields, std::string_view state) {
    return fields.contains("state") && fields.at("state").as_string() == state;
  }
};

}  // namespace scangate::storage
