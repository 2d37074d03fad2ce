#!/usr/bin/env python3
# bench/fsync_prezero.py — fdatasync latency and CPU per sync on this disk: appending to a growing file vs
# overwriting pre-zeroed blocks vs posix_fallocate()d space (storage/README.md "Journal", pre-zeroed
# segments). Writes a scratch file /work/.fsync_test (or argv[1]); run on a quiet machine.
import os, time, sys
PATH = sys.argv[1] if len(sys.argv) > 1 else '/work/.fsync_test'
def run(prealloc, n=3000, chunk=2500, path=PATH):
    try: os.unlink(path)
    except FileNotFoundError: pass
    fd = os.open(path, os.O_WRONLY|os.O_CREAT, 0o644)
    size = n*chunk
    if prealloc == 'zero':
        z = b'\0'*(1<<20)
        for _ in range(size // len(z) + 1): os.write(fd, z)
        os.fsync(fd); os.lseek(fd, 0, 0)
    elif prealloc == 'fallocate':
        os.posix_fallocate(fd, 0, size); os.fsync(fd)
    buf = b'x'*chunk
    t = []
    c0 = time.process_time(); w0=time.time()
    for i in range(n):
        a = time.perf_counter()
        os.write(fd, buf); os.fdatasync(fd)
        t.append(time.perf_counter()-a)
    w1=time.time(); c1=time.process_time()
    os.close(fd); os.unlink(path)
    t.sort()
    print(f"{prealloc:10s} mean {sum(t)/n*1e3:.3f} ms  p50 {t[n//2]*1e3:.3f}  p99 {t[int(n*.99)]*1e3:.3f}  cpu/op {(c1-c0)/n*1e6:.1f} us (process)")
for r in range(2):
    for m in ['append','zero','fallocate']: run(m)
