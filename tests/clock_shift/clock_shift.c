// A test-only LD_PRELOAD library that shifts a process's wall clock — and only its wall clock — by a fixed
// offset: SCANGATE_CLOCK_SHIFT_SECONDS (a signed integer; "+3600", "-60"). CLOCK_REALTIME and its variants
// (clock_gettime, gettimeofday, time) move; the monotonic and boot clocks do not, as on a host whose wall clock is
// wrong or was stepped. SCANGATE_CLOCK_SHIFT_FILE (optional) names a file holding a further offset in seconds,
// read again at most every 5 ms of the monotonic clock: writing it steps the clock of a RUNNING process (an NTP
// step while PostgreSQL runs: tests/server/service_clock_step_test.cc), every process preloaded with it within
// 5 ms of each other. A missing or unreadable file counts 0.
//
// Why not libfaketime: under the AddressSanitizer build, the sanitizer runtime reads the clock before libfaketime
// has initialised itself, and the process hangs at start ("Unexpected recursive calls to clock_gettime() without
// proper initialization"), on some machines and not others. This library has no initialisation and calls nothing
// that a sanitizer intercepts: each call reads the clock by the raw system call (no vDSO, no dlsym, no malloc, no
// locks), so it works the same in the release build, under ASan+UBSan and under TSan, and in processes that are not
// ours (PostgreSQL). It is compiled without sanitizer instrumentation (tests/clock_shift/CMakeLists.txt).
//
// Used by tests/server/service_clock_test.cc through ScangateProcess::SetPreload (tests/server/harness.h). The raw
// system call costs ~0.1-0.5 µs where the vDSO costs ~20 ns: fine for tests, never for production.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

// The offset in seconds, parsed on first use. 0 = no shift (unset or unparsable: the harness checks the shift
// took effect through the process's log timestamps, so a typo fails the test rather than passing it silently).
// Racing first calls parse the same environment to the same value: a benign race on a plain int64 read/written
// whole (an aligned 8-byte store is atomic on x86_64), and -1 marks "not parsed yet" only transiently.
static volatile int64_t g_offset_s;
static volatile int g_parsed;
static const char* volatile g_file;  // SCANGATE_CLOCK_SHIFT_FILE, or NULL
// The file's offset and when it was read (monotonic ns; 0 = never). Racing readers of the file store what they
// read whole (aligned 8-byte stores, as above): the worst a race does is read the file once more.
static volatile int64_t g_file_offset_s;
static volatile int64_t g_file_read_ns;

// A signed decimal integer from `v` up to `end` (NULL: up to the terminating NUL), leading blanks skipped.
static int64_t Parse(const char* v, const char* end) {
#define SCANGATE_MORE (v != end && *v != '\0')
  int64_t s = 0;
  int neg = 0;
  while (SCANGATE_MORE && (*v == ' ' || *v == '\n')) ++v;
  if (SCANGATE_MORE && (*v == '+' || *v == '-')) neg = (*v++ == '-');
  while (SCANGATE_MORE && *v >= '0' && *v <= '9') s = s * 10 + (*v++ - '0');
#undef SCANGATE_MORE
  return neg ? -s : s;
}

// Re-reads the file at most every 5 ms, by raw system calls only (no stdio, no malloc).
static int64_t FileOffset(void) {
  struct timespec m;
  if (syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &m) != 0) return g_file_offset_s;
  const int64_t now_ns = (int64_t)m.tv_sec * 1000000000 + m.tv_nsec;
  if (g_file_read_ns != 0 && now_ns - g_file_read_ns < 5000000) return g_file_offset_s;
  char buf[32];
  int64_t v = 0;
  const long fd = syscall(SYS_openat, AT_FDCWD, g_file, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    const long n = syscall(SYS_read, fd, buf, sizeof buf);
    syscall(SYS_close, fd);
    if (n > 0) v = Parse(buf, buf + n);
  }
  g_file_offset_s = v;
  g_file_read_ns = now_ns;
  return v;
}

static int64_t Offset(void) {
  if (!g_parsed) {
    const char* v = getenv("SCANGATE_CLOCK_SHIFT_SECONDS");  // reads environ: no allocation, no interception
    const char* f = getenv("SCANGATE_CLOCK_SHIFT_FILE");
    g_offset_s = v == NULL ? 0 : Parse(v, NULL);
    g_file = (f != NULL && *f != '\0') ? f : NULL;
    g_parsed = 1;
  }
  return g_file != NULL ? g_offset_s + FileOffset() : g_offset_s;
}

static int IsWallClock(clockid_t id) {
  return id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE || id == CLOCK_REALTIME_ALARM || id == CLOCK_TAI;
}

int clock_gettime(clockid_t id, struct timespec* ts) {
  const long rc = syscall(SYS_clock_gettime, id, ts);
  if (rc == 0 && IsWallClock(id)) ts->tv_sec += Offset();
  return (int)rc;
}

int gettimeofday(struct timeval* restrict tv, void* restrict tz) {
  const long rc = syscall(SYS_gettimeofday, tv, tz);
  if (rc == 0) tv->tv_sec += Offset();  // tv is declared nonnull by glibc
  return (int)rc;
}

time_t time(time_t* out) {
  struct timespec ts;
  if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return (time_t)-1;
  if (out != NULL) *out = ts.tv_sec;
  return ts.tv_sec;
}

int timespec_get(struct timespec* ts, int base) {
  if (base != TIME_UTC || clock_gettime(CLOCK_REALTIME, ts) != 0) return 0;
  return base;
}
