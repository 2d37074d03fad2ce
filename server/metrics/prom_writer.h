// PromWriter: builds a Prometheus text exposition (format 0.0.4): HELP/TYPE headers, samples, histograms
// from cumulative buckets. Invariant: writes exactly what it is given, in order (callers keep one header per
// family and label values escaped). Use: one per scrape, on the scraping thread; Take() the text at the end.
#pragma once

#include <charconv>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace scangate::server {

// Shortest round-trip decimal form of a double, as Prometheus clients write sample values.
inline std::string Num(double v) {
  char buf[32];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, p) : "NaN";
}

class PromWriter {
 public:
  void Header(std::string_view name, std::string_view type, std::string_view help) {
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    out_ += help;
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }
  void Sample(std::string_view name, std::string_view labels, std::string_view value) {
    out_ += name;
    if (!labels.empty()) {
      out_ += '{';
      out_ += labels;
      out_ += '}';
    }
    out_ += ' ';
    out_ += value;
    out_ += '\n';
  }
  void Sample(std::string_view name, std::string_view labels, std::uint64_t v) { Sample(name, labels, std::to_string(v)); }
  void Sample(std::string_view name, std::string_view labels, double v) { Sample(name, labels, Num(v)); }
  // A family of one unlabelled sample: its header, then the sample.
  void Single(std::string_view name, std::string_view type, std::string_view help, std::uint64_t v) {
    Header(name, type, help);
    Sample(name, "", v);
  }
  // A histogram from cumulative (le, count) buckets; `labels` (may be empty) precede le.
  void Histogram(std::string_view name, const std::string& labels,
                 const std::vector<std::pair<double, std::uint64_t>>& cumulative, double sum, std::uint64_t count) {
    const std::string prefix = labels.empty() ? "" : labels + ",";
    const std::string bucket = std::string(name) + "_bucket";
    bool has_inf = false;
    for (const auto& [le, c] : cumulative) {
      const bool inf = le == std::numeric_limits<double>::infinity();
      has_inf = has_inf || inf;
      Sample(bucket, prefix + "le=\"" + (inf ? std::string("+Inf") : Num(le)) + "\"", c);
    }
    if (!has_inf) Sample(bucket, prefix + "le=\"+Inf\"", count);
    Sample(std::string(name) + "_sum", labels, sum);
    Sample(std::string(name) + "_count", labels, count);
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};


}  // namespace scangate::server
