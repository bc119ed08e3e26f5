/*
** fuzz_trace: the conformance trace reader (tests/conformance/trace.c) as
** a parser target.  The input is a trace file; it is replayed on a fresh
** "mem" limiter with a manual clock.  The reader must survive any bytes
** (no crash, no overflow, no leak), every line yields at most a bounded
** number of complaints, and a replay is deterministic: the same trace on a
** second fresh limiter reports the same mismatch count.
*/
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "sluice.h"
#include "trace.h"

static int replay_once(const char *path, char *report, size_t len) {
  sluice_clock *clk = NULL;
  sluice_limiter *lim = NULL;
  sluice_limiter_options o = {0};
  int bad;
  CHECK(sluice_clock_manual(0, &clk) == SLUICE_OK, "clock");
  o.clock = clk;
  CHECK(sluice_limiter_open(&o, &lim, NULL, 0) == SLUICE_OK, "open mem");
  bad = trace_replay(lim, clk, path, "fz", report, len);
  sluice_limiter_close(lim);
  sluice_clock_free(clk);
  return bad;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char r1[4096], r2[4096];
  char path[64];
  int fd, b1, b2;
  size_t lines = 1;
  if (size > 1 << 16)
    return 0;
  fd = memfd_create("fuzz-trace", MFD_CLOEXEC);
  CHECK(fd >= 0, "memfd");
  CHECK(write(fd, data, size) == (ssize_t)size, "write");
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  for (size_t i = 0; i < size; i++)
    lines += data[i] == '\n';
  b1 = replay_once(path, r1, sizeof r1);
  b2 = replay_once(path, r2, sizeof r2);
  close(fd);
  CHECK(b1 == b2, "replay not deterministic: %d vs %d mismatches", b1, b2);
  CHECK(strcmp(r1, r2) == 0, "reports differ");
  CHECK(strlen(r1) < sizeof r1, "report overflow");
  /* fgets splits long lines in 511-byte pieces: one complaint each at
  ** most, plus one per expectation field (12) and one per key. */
  CHECK(b1 >= 0 && (size_t)b1 <= (lines + size / 511 + 1) * 64,
        "%d complaints for %zu lines", b1, lines);
  return 0;
}
