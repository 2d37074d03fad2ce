// A test-only LD_PRELOAD library that shifts a process's wall clock — and only its wall clock — by a fixed
// offset: SCANGATE_CLOCK_SHIFT_SECONDS (a signed integer; "+3600", "-60"). CLOCK_REALTIME and its variants
// (clock_gettime, gettimeofday, time) move; the monotonic and boot clocks do not, as on a host whose wall clock is
// wrong or was stepped.
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

static int64_t Offset(void) {
  if (!g_parsed) {
    const char* v = getenv("SCANGATE_CLOCK_SHIFT_SECONDS");  // reads environ: no allocation, no interception
    int64_t s = 0;
    if (v != NULL) {
      int neg = 0;
      if (*v == '+' || *v == '-') neg = (*v++ == '-');
      while (*v >= '0' && *v <= '9') s = s * 10 + (*v++ - '0');
      if (neg) s = -s;
    }
    g_offset_s = s;
    g_parsed = 1;
  }
  return g_offset_s;
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
