#include "server/http/json_members.h"

#include <cstddef>
#include <cstdint>
#include <vector>

#include <absl/container/flat_hash_set.h>
#include <absl/container/inlined_vector.h>
#include <boost/json/basic_parser_impl.hpp>

namespace scangate::server {
namespace json = boost::json;

namespace {

// Names the service reads; any other is never echoed in a problem.
bool IsServiceMember(std::string_view name) {
  return name == "key" || name == "source" || name == "keys" || name == "request_id";
}

// An object's names are compared linearly up to this many, then moved into a hash set: a hostile object of
// 100 000 members stays linear, not quadratic.
constexpr std::size_t kLinearNames = 16;
// Names and nesting levels held in place before the heap is used: a typical body ({"key", "source"}, or a batch
// entry's three members inside "keys") checks without an allocation (three fewer per request: issue 44).
constexpr std::size_t kInlineNames = 4;
constexpr std::size_t kInlineFrames = 3;

class Handler {
 public:
  // Limits: the service's own parser already checked depth, size and syntax; these only bound this pass.
  static constexpr std::size_t max_object_size = static_cast<std::size_t>(-1);
  static constexpr std::size_t max_array_size = static_cast<std::size_t>(-1);
  static constexpr std::size_t max_key_size = static_cast<std::size_t>(-1);
  static constexpr std::size_t max_string_size = static_cast<std::size_t>(-1);

  std::optional<DuplicateMember> found;

  bool on_document_begin(json::error_code&) { return true; }
  bool on_document_end(json::error_code&) { return true; }
  bool on_array_begin(json::error_code&) {
    Value();
    frames_.push_back(Frame{});
    return true;
  }
  bool on_array_end(std::size_t, json::error_code&) {
    frames_.pop_back();
    return true;
  }
  bool on_object_begin(json::error_code&) {
    Value();
    frames_.push_back(Frame{});
    frames_.back().object = true;
    return true;
  }
  bool on_object_end(std::size_t, json::error_code&) {
    frames_.pop_back();
    return true;
  }
  bool on_string_part(json::string_view, std::size_t, json::error_code&) { return true; }
  bool on_string(json::string_view, std::size_t, json::error_code&) { return Value(); }
  bool on_key_part(json::string_view s, std::size_t, json::error_code&) {
    key_.append(s.data(), s.size());
    return true;
  }
  bool on_key(json::string_view s, std::size_t, json::error_code& ec) {
    key_.append(s.data(), s.size());
    Frame& f = frames_.back();
    if (!f.Insert(key_)) {
      found = DuplicateMember{IsServiceMember(key_) ? key_ : std::string(), Pointer()};
      ec = json::error::extra_data;  // stops the parse; the caller reads `found`
      return false;
    }
    f.key = std::move(key_);
    key_.clear();
    return true;
  }
  bool on_number_part(json::string_view, json::error_code&) { return true; }
  bool on_int64(std::int64_t, json::string_view, json::error_code&) { return Value(); }
  bool on_uint64(std::uint64_t, json::string_view, json::error_code&) { return Value(); }
  bool on_double(double, json::string_view, json::error_code&) { return Value(); }
  bool on_bool(bool, json::error_code&) { return Value(); }
  bool on_null(json::error_code&) { return Value(); }
  bool on_comment_part(json::string_view, json::error_code&) { return true; }
  bool on_comment(json::string_view, json::error_code&) { return true; }

 private:
  struct Frame {
    bool object = false;
    std::size_t next_index = 0;  // arrays: elements begun so far
    std::string key;             // objects: the member whose value is being read
    absl::InlinedVector<std::string, kInlineNames> names;
    absl::flat_hash_set<std::string> set;  // once names.size() reaches kLinearNames

    // False when `name` is already a member of this object.
    bool Insert(const std::string& name) {
      if (!set.empty()) return set.insert(name).second;
      for (const auto& n : names) {
        if (n == name) return false;
      }
      names.push_back(name);
      if (names.size() == kLinearNames) {
        set.insert(names.begin(), names.end());
        names.clear();
      }
      return true;
    }
  };

  // A value begins in the innermost container: an array counts it.
  bool Value() {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().next_index;
    return true;
  }

  // Pointer of the innermost object (the one holding the duplicate): the path through the enclosing frames.
  std::string Pointer() const {
    std::string p;
    for (std::size_t i = 0; i + 1 < frames_.size(); ++i) {
      const Frame& f = frames_[i];
      p += '/';
      if (f.object) {
        p += IsServiceMember(f.key) ? f.key : "*";
      } else {
        p += std::to_string(f.next_index - 1);
      }
    }
    return p;
  }

  absl::InlinedVector<Frame, kInlineFrames> frames_;
  std::string key_;  // the member name being read (it may arrive in parts)
};

}  // namespace

std::optional<DuplicateMember> FindDuplicateMember(std::string_view body) {
  json::basic_parser<Handler> parser(json::parse_options{});
  json::error_code ec;
  parser.write_some(false, body.data(), body.size(), ec);
  return std::move(parser.handler().found);
}

}  // namespace scangate::server
