// The replication stream of a follower (storage/follow/follower.h), read: the CopyBoth messages of a logical
// replication connection (XLogData 'w', primary keepalive 'k') and, inside XLogData, the pgoutput plugin's
// protocol version 1 messages (PostgreSQL docs "Logical Replication Message Formats"). Only what a follower needs
// is decoded: the digest column of every row inserted into or updated in scan_keys (the publication names that
// column alone, sql/009), the end of every transaction, and the server's progress. Invariant: a message that does
// not parse is reported as an error (the follower reconnects and reloads), never skipped as if it held no key.
// Pure: no I/O; one StreamReader per connection, on the follower's thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/digest.h"

namespace scangate::storage {

// What one CopyData message of the stream said.
struct StreamEvent {
  enum class Kind : std::uint8_t {
    kNone,       // a message that carries nothing for the follower (begin, relation, type, origin, truncate...)
    kCommit,     // a transaction ended: its rows (collected since its begin) are `digests`
    kKeepalive,  // the server's progress; `reply_requested` when it asks for a status update now
  };
  Kind kind = Kind::kNone;
  std::uint64_t lsn = 0;  // kCommit: the transaction's end LSN; kKeepalive: the server's sent position
  std::int64_t commit_time_us = 0;  // kCommit: the commit's time, µs since the Unix epoch
  bool reply_requested = false;
  std::vector<Digest> digests;  // kCommit: the digests inserted or updated by the transaction
};

class StreamReader {
 public:
  // `relation` is the table whose rows are followed ("scan_keys"); its digest column must be the first of the
  // columns the publication sends.
  explicit StreamReader(std::string relation = "scan_keys") : relation_(std::move(relation)) {}

  // One CopyData payload ('w' or 'k' first). Returns the event or, for a message that does not parse or a row
  // of the followed table without a 32-byte digest, an error text (the stream cannot be trusted any more).
  std::optional<std::string> Read(std::string_view message, StreamEvent& out);

 private:
  std::optional<std::string> ReadPgoutput(std::string_view m, StreamEvent& out);
  std::optional<std::string> ReadRow(std::string_view& m);

  std::string relation_;
  // The oids of the tables named `relation_` in their latest Relation message: the epochs' open table changes at a
  // switch (sql/019), and a table renamed away (a closed epoch) is not followed. A handful at most.
  std::vector<std::uint32_t> relation_oids_;
  bool Followed(std::uint32_t oid) const;
  std::vector<Digest> pending_;                // rows of the open transaction
};

// A standby status update ('r') reporting `lsn` as written, flushed and applied; `reply` asks the server for a
// keepalive at once (the follower's progress probe). `now_us`: µs since the Unix epoch.
std::string StandbyStatusUpdate(std::uint64_t lsn, std::int64_t now_us, bool reply);

// "X/Y" (pg_lsn's text form) as a number; nullopt when malformed.
std::optional<std::uint64_t> ParseLsn(std::string_view text);

}  // namespace scangate::storage
