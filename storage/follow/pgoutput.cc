#include "storage/follow/pgoutput.h"

#include <algorithm>
#include <charconv>

#include "storage/pg/pg_binary.h"
#include "storage/pg/table_layout.h"

namespace scangate::storage {
namespace {

// Big-endian readers over a message; false when it is too short.
bool Take(std::string_view& m, std::size_t n, std::string_view& out) {
  if (m.size() < n) return false;
  out = m.substr(0, n);
  m.remove_prefix(n);
  return true;
}
template <typename T>
bool TakeInt(std::string_view& m, T& out) {
  std::string_view b;
  if (!Take(m, sizeof(T), b)) return false;
  std::uint64_t v = 0;
  for (const char c : b) v = v << 8 | static_cast<unsigned char>(c);
  out = static_cast<T>(v);
  return true;
}
bool TakeCString(std::string_view& m, std::string_view& out) {
  const auto end = m.find('\0');
  if (end == std::string_view::npos) return false;
  out = m.substr(0, end);
  m.remove_prefix(end + 1);
  return true;
}

void AppendBe64(std::string& out, std::uint64_t v) {
  for (int i = 7; i >= 0; --i) out += static_cast<char>(v >> (8 * i));
}

}  // namespace

std::optional<std::string> StreamReader::Read(std::string_view m, StreamEvent& out) {
  out = StreamEvent{};
  std::string_view tag;
  if (!Take(m, 1, tag)) return "empty replication message";
  if (tag[0] == 'k') {  // primary keepalive: walEnd, sendTime, replyRequested
    std::uint64_t end = 0;
    std::int64_t sent = 0;
    std::uint8_t reply = 0;
    if (!TakeInt(m, end) || !TakeInt(m, sent) || !TakeInt(m, reply)) return "short keepalive message";
    out.kind = StreamEvent::Kind::kKeepalive;
    out.lsn = end;
    out.reply_requested = reply != 0;
    return std::nullopt;
  }
  if (tag[0] != 'w') return "unknown replication message '" + std::string(tag) + "'";
  std::uint64_t start = 0, end = 0;
  std::int64_t sent = 0;
  if (!TakeInt(m, start) || !TakeInt(m, end) || !TakeInt(m, sent)) return "short XLogData header";
  return ReadPgoutput(m, out);
}

bool StreamReader::Followed(std::uint32_t oid) const {
  return std::find(relation_oids_.begin(), relation_oids_.end(), oid) != relation_oids_.end();
}

std::optional<std::string> StreamReader::ReadPgoutput(std::string_view m, StreamEvent& out) {
  std::string_view tag;
  if (!Take(m, 1, tag)) return "empty pgoutput message";
  switch (tag[0]) {
    case 'B':  // begin: final LSN, commit time, xid
      pending_.clear();
      return std::nullopt;
    case 'C': {  // commit: flags, commit LSN, end LSN, commit time
      std::uint8_t flags = 0;
      std::uint64_t commit_lsn = 0, end_lsn = 0;
      std::int64_t time = 0;
      if (!TakeInt(m, flags) || !TakeInt(m, commit_lsn) || !TakeInt(m, end_lsn) || !TakeInt(m, time)) {
        return "short commit message";
      }
      out.kind = StreamEvent::Kind::kCommit;
      out.lsn = end_lsn;
      out.commit_time_us = time + kPgEpochUs;
      out.digests.swap(pending_);
      pending_.clear();
      return std::nullopt;
    }
    case 'R': {  // relation: oid, namespace, name, replica identity, columns
      std::uint32_t oid = 0;
      std::string_view nspname, relname;
      if (!TakeInt(m, oid) || !TakeCString(m, nspname) || !TakeCString(m, relname)) return "short relation message";
      std::erase(relation_oids_, oid);
      if (relname == relation_) relation_oids_.push_back(oid);
      return std::nullopt;
    }
    case 'I': {  // insert: oid, 'N', the new tuple
      std::uint32_t oid = 0;
      std::string_view n;
      if (!TakeInt(m, oid) || !Take(m, 1, n) || n[0] != 'N') return "malformed insert message";
      if (!Followed(oid)) return std::nullopt;  // another table
      return ReadRow(m);
    }
    case 'U': {  // update: oid, optionally 'K'/'O' + the old tuple, then 'N' + the new tuple
      std::uint32_t oid = 0;
      std::string_view kind;
      if (!TakeInt(m, oid) || !Take(m, 1, kind)) return "malformed update message";
      if (!Followed(oid)) return std::nullopt;
      if (kind[0] == 'K' || kind[0] == 'O') {
        if (auto e = ReadRow(m)) return e;  // the old key: the same digest (the primary key is not updated)
        if (!pending_.empty()) pending_.pop_back();
        if (!Take(m, 1, kind)) return "malformed update message";
      }
      if (kind[0] != 'N') return "malformed update message";
      return ReadRow(m);
    }
    case 'D':  // delete: the horizon's expiry; the filter forgets by window, nothing to follow
    case 'T':  // truncate
    case 'Y':  // type
    case 'O':  // origin
    case 'M':  // logical decoding message
      return std::nullopt;
    default:
      return "unknown pgoutput message '" + std::string(tag) + "'";
  }
}

std::optional<std::string> StreamReader::ReadRow(std::string_view& m) {
  std::uint16_t columns = 0;
  if (!TakeInt(m, columns) || columns == 0) return "malformed tuple";
  std::string_view kind;
  if (!Take(m, 1, kind) || kind[0] != 't') return "the followed row has no digest in text form";
  std::uint32_t length = 0;
  std::string_view text;
  if (!TakeInt(m, length) || !Take(m, length, text)) return "short tuple column";
  Digest d{};
  if (!StoredDigestFromText(text, d)) return "the followed row's digest is neither bytea hex nor a uuid";
  pending_.push_back(d);
  // The other columns (none with the publication's column list): skipped.
  for (std::uint16_t i = 1; i < columns; ++i) {
    if (!Take(m, 1, kind)) return "short tuple";
    if (kind[0] == 't' || kind[0] == 'b') {
      if (!TakeInt(m, length) || !Take(m, length, text)) return "short tuple column";
    }
  }
  return std::nullopt;
}

std::string StandbyStatusUpdate(std::uint64_t lsn, std::int64_t now_us, bool reply) {
  std::string out = "r";
  AppendBe64(out, lsn);  // written
  AppendBe64(out, lsn);  // flushed: the slot may release WAL before it
  AppendBe64(out, lsn);  // applied
  AppendBe64(out, static_cast<std::uint64_t>(now_us - kPgEpochUs));
  out += static_cast<char>(reply ? 1 : 0);
  return out;
}

std::optional<std::uint64_t> ParseLsn(std::string_view text) {
  const auto slash = text.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 == text.size()) return std::nullopt;
  std::uint64_t hi = 0, lo = 0;
  const auto a = std::from_chars(text.data(), text.data() + slash, hi, 16);
  const auto b = std::from_chars(text.data() + slash + 1, text.data() + text.size(), lo, 16);
  if (a.ec != std::errc() || a.ptr != text.data() + slash || b.ec != std::errc() ||
      b.ptr != text.data() + text.size() || hi > 0xFFFFFFFFu || lo > 0xFFFFFFFFu) {
    return std::nullopt;
  }
  return hi << 32 | lo;
}

}  // namespace scangate::storage
