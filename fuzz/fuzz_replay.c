/*
** fuzz_replay: the `sluice replay` input path (tools/sluice/cmd_replay.c
** and util.c linked in, main.c left out).  The first input line is the
** command line (words split on spaces, FILE appended), the rest is the CSV
** trace.  stdout and stderr are captured in memory for the call.
**
** Checks: the exit code is 0 (ok), 1 (malformed lines) or 2 (usage); never
** 3, since a "mem" store cannot fail here.  When the options were accepted,
** every content line of the trace (not blank, not a # comment) gets
** exactly one answer: an output line or one stderr complaint.  Every output
** line has 9 fields and a known status.
*/
#include <getopt.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cli.h"
#include "fuzz_common.h"

#define MAXARGS 24

static size_t count_content_lines(const char *s, size_t n) {
  size_t count = 0, start = 0;
  for (size_t i = 0; i <= n; i++) {
    if (i == n || s[i] == '\n') {
      size_t e = i;
      while (e > start && (s[e - 1] == '\r' || s[e - 1] == ' '))
        e--;
      if (e > start && s[start] != '#')
        count++;
      if (i == n && i == start)
        break;
      start = i + 1;
    }
  }
  return count;
}

static int contains(const char *s, size_t n, const char *pat) {
  size_t m = strlen(pat);
  for (size_t i = 0; i + m <= n; i++)
    if (memcmp(s + i, pat, m) == 0)
      return 1;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char argbuf[512], path[64];
  char *argv[MAXARGS + 3];
  int argc = 0, fd, rc;
  const uint8_t *nl = memchr(data, '\n', size);
  size_t alen = nl ? (size_t)(nl - data) : size;
  const char *csv = nl ? (const char *)nl + 1 : "";
  size_t clen = nl ? size - alen - 1 : 0;
  char *obuf = NULL, *ebuf = NULL;
  size_t olen = 0, elen = 0;
  FILE *so = stdout, *se = stderr;

  if (alen >= sizeof argbuf || size > 1 << 16)
    return 0;
  memcpy(argbuf, data, alen);
  argbuf[alen] = '\0';
  if (memchr(argbuf, '\0', alen))
    return 0; /* argv strings cannot hold NULs */
  argv[argc++] = "replay";
  for (char *t = strtok(argbuf, " "); t && argc < MAXARGS + 1;
       t = strtok(NULL, " "))
    argv[argc++] = t;
  fd = memfd_create("fuzz-replay", MFD_CLOEXEC);
  CHECK(fd >= 0, "memfd");
  CHECK(write(fd, csv, clen) == (ssize_t)clen, "write");
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  argv[argc++] = path;
  argv[argc] = NULL;

  /* cli_replay() is written for one call per process: it sets optind = 1,
  ** which does not clear glibc's getopt state left in the middle of an
  ** option cluster by the previous call.  A getopt() with optind = 0 does. */
  {
    char *dummy[] = {"x", NULL};
    optind = 0;
    opterr = 0;
    (void)getopt(1, dummy, "");
  }
  stdout = open_memstream(&obuf, &olen);
  stderr = open_memstream(&ebuf, &elen);
  CHECK(stdout && stderr, "open_memstream");
  rc = cli_replay(argc, argv);
  fclose(stdout);
  fclose(stderr);
  stdout = so;
  stderr = se;
  close(fd);
  if (!obuf || !ebuf)
    abort(); /* open_memstream() always sets them on fclose() */

  CHECK(rc == CLI_OK || rc == CLI_BADINPUT || rc == CLI_USAGE,
        "exit code %d", rc);
  /* --help (or -h in any cluster) prints the usage and succeeds. */
  if (rc != CLI_USAGE && !(olen >= 6 && memcmp(obuf, "usage:", 6) == 0)) {
    size_t out_lines = 0, err_lines = 0, want, start;
    for (size_t i = 0; i < olen; i++)
      out_lines += obuf[i] == '\n';
    for (size_t i = 0; i < elen; i++)
      err_lines += ebuf[i] == '\n';
    want = count_content_lines(csv, clen);
    CHECK(out_lines >= 1, "no header");
    CHECK(out_lines - 1 + err_lines == want,
          "%zu answers + %zu complaints for %zu lines", out_lines - 1,
          err_lines, want);
    CHECK((rc == CLI_BADINPUT) == (err_lines > 0), "rc %d with %zu complaints",
          rc, err_lines);
    /* Each answer: the 3 input fields + 6 more; a known status. */
    start = 0;
    for (size_t i = 0, line = 0; i < olen; i++) {
      if (obuf[i] != '\n')
        continue;
      if (line++ > 0) {
        size_t commas = 0;
        for (size_t j = start; j < i; j++)
          commas += obuf[j] == ',';
        CHECK(commas == 8, "answer with %zu commas", commas);
        CHECK(contains(obuf + start, i - start, ",allowed,") ||
                  contains(obuf + start, i - start, ",throttled,") ||
                  contains(obuf + start, i - start, ",boxed,"),
              "answer without a status");
      }
      start = i + 1;
    }
  }
  free(obuf);
  free(ebuf);
  return 0;
}
