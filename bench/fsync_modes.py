#!/usr/bin/env python3
# bench/fsync_modes.py — what a journal group commit can cost on this disk, whatever the syscall (issue 12):
#   part 1: one 2 500-byte record per sync into pre-zeroed blocks, by write + fdatasync, pwritev2(RWF_DSYNC),
#           an O_DSYNC file, and O_DIRECT|O_DSYNC (4 KiB aligned);
#   part 2: overlapping syncs — 1 or 2 threads each writing a record (900 or 2 500 bytes) and calling
#           fdatasync, the records back to back in one file (threads share pages) or each on a page of its own.
# Prints mean / p50 / p99 latency per sync and the process's CPU per sync. Scratch file: argv[1] (default
# /work/.fsync_modes); run on a quiet machine. Results: bench/RESULTS.md "Journal syncs" (the full
# tables: bench/RESULTS-history.md "Journal syncs: no cheaper call").
import mmap, os, sys, threading, time

PATH = sys.argv[1] if len(sys.argv) > 1 else '/work/.fsync_modes'
N = 3000


def prezeroed(size):
    try:
        os.unlink(PATH)
    except FileNotFoundError:
        pass
    fd = os.open(PATH, os.O_WRONLY | os.O_CREAT, 0o644)
    z = b'\0' * (1 << 20)
    for _ in range(size // len(z) + 1):
        os.write(fd, z)
    os.fsync(fd)
    os.close(fd)


def report(label, lat, cpu, n):
    lat.sort()
    print(f"{label:34s} mean {sum(lat) / len(lat) * 1e3:.3f} ms  p50 {lat[len(lat) // 2] * 1e3:.3f}  "
          f"p99 {lat[int(len(lat) * .99)] * 1e3:.3f}  cpu/sync {cpu / n * 1e6:.1f} us")


def one_call(mode, chunk=2500):
    prezeroed(N * 4096)
    flags = {'odsync': os.O_DSYNC, 'odirect_dsync': os.O_DSYNC | os.O_DIRECT}.get(mode, 0)
    fd = os.open(PATH, os.O_WRONLY | flags)
    page = mmap.mmap(-1, 4096)  # O_DIRECT needs an aligned buffer
    page.write(b'x' * 4096)
    lat, off = [], 0
    c0 = time.process_time()
    for _ in range(N):
        a = time.perf_counter()
        if mode == 'fdatasync':
            os.pwrite(fd, b'x' * chunk, off)
            os.fdatasync(fd)
            off += chunk
        elif mode == 'rwf_dsync':
            os.pwritev(fd, [b'x' * chunk], off, os.RWF_DSYNC)
            off += chunk
        elif mode == 'odsync':
            os.pwrite(fd, b'x' * chunk, off)
            off += chunk
        else:
            os.pwritev(fd, [page], off)
            off += 4096
        lat.append(time.perf_counter() - a)
    cpu = time.process_time() - c0
    os.close(fd)
    report(mode, lat, cpu, N)


def overlapping(chunk, threads, own_page):
    prezeroed(40 << 20)
    fd = os.open(PATH, os.O_RDWR)
    lock, pos = threading.Lock(), [0]
    lats = [[] for _ in range(threads)]

    def worker(k):
        for _ in range(N):
            a = time.perf_counter()
            with lock:
                off = pos[0]
                step = (chunk + 4095) // 4096 * 4096 if own_page else chunk
                pos[0] = (off + step) % (38 << 20)
                os.pwrite(fd, b'x' * chunk, off)
            os.fdatasync(fd)
            lats[k].append(time.perf_counter() - a)

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    w0, c0 = time.time(), time.process_time()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall, cpu = time.time() - w0, time.process_time() - c0
    os.close(fd)
    print(f"{threads * N / wall:8.0f} syncs/s  ", end='')
    report(f"{chunk} B, {threads} thread(s), {'own page' if own_page else 'shared pages'}",
           sum(lats, []), cpu, threads * N)


for _ in range(2):
    for m in ['fdatasync', 'rwf_dsync', 'odsync', 'odirect_dsync']:
        one_call(m)
for chunk in (900, 2500):
    for threads, own in ((1, False), (2, False), (2, True)):
        overlapping(chunk, threads, own)
os.unlink(PATH)
