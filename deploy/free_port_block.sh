#!/usr/bin/env bash
# Prints the first port of a block of COUNT consecutive free loopback ports, below the kernel's ephemeral range
# (ip_local_port_range, 32768+ by default): scangate instances under test listen on ephemeral ports and every
# client connection takes one, so a fixed port in that range can be taken before a cluster starts on it.
# Used by deploy/ha_test.sh and deploy/partitions_fault_test.sh.
#   deploy/free_port_block.sh COUNT
set -euo pipefail
count=${1:?usage: free_port_block.sh COUNT}
python3 - "$count" <<'PY'
import random, socket, sys
count = int(sys.argv[1])
step = 10 * ((count + 9) // 10)
for _ in range(200):
    base = random.randrange(20000, 32000 - count, step)
    socks = []
    try:
        for p in range(base, base + count):
            s = socket.socket(); s.bind(("127.0.0.1", p)); socks.append(s)
        print(base); break
    except OSError:
        pass
    finally:
        for s in socks: s.close()
else:
    sys.exit("free_port_block.sh: no block of %d free ports found" % count)
PY
