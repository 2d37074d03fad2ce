#!/usr/bin/env python3
"""The byte format of core/epoch_summary.h written a second time, independently of the C++: prints the SHA-256 of
the serialized summary that tests/core/epoch_summary_test.cc's KnownAnswer builds (4 lines, 10 probes, 3 digests).
Run it after any change to the format or the hashing; the two must agree, and the version byte must change."""
import hashlib
import struct

LINES, PROBES, VERSION = 4, 10, 1
words = [0] * (LINES * 8)
for i in range(3):
    d = bytes((31 * i + 7 * b + 1) & 0xFF for b in range(32))
    line = (struct.unpack('<Q', d[8:16])[0] * LINES) >> 64  # bytes 8..15, multiply-shift onto the lines
    h = struct.unpack('<I', d[0:4])[0]  # bytes 0..3: the probe sequence
    for _ in range(PROBES):
        bit = h >> 23  # top 9 bits: one of the line's 512
        words[line * 8 + (bit >> 6)] |= 1 << (bit & 63)
        h = (h * 0x9E3779B9) & 0xFFFFFFFF
head = b'SGES' + bytes([VERSION, PROBES, 0, 0]) + struct.pack('<QQ', 3, LINES)
body = b''.join(struct.pack('<Q', w) for w in words)
print(hashlib.sha256(head + hashlib.sha256(head + body).digest() + body).hexdigest())
