/* The sluice command-line tool: one file per subcommand. */
#ifndef SLUICE_CLI_H
#define SLUICE_CLI_H

#include <stdint.h>
#include <stdio.h>

/* Exit codes, the same for every subcommand. */
enum {
  CLI_OK = 0,        /* done */
  CLI_BADINPUT = 1,  /* some input lines were malformed (each reported) */
  CLI_USAGE = 2,     /* bad command line (the bad argument is named) */
  CLI_RUNTIME = 3    /* the store or the system failed */
};

int cli_replay(int argc, char **argv);

/* Buffered output of decimal integers and text: the replay tool prints
** millions of lines per second, which stdio's printf cannot keep up with. */
typedef struct cli_out {
  FILE *f;
  size_t n;
  char buf[1 << 16];
} cli_out;

void cli_out_str(cli_out *o, const char *s, size_t n);
void cli_out_i64(cli_out *o, int64_t v);
/* Room for n bytes at the end of the buffer (flushing first if needed), or
** NULL if n is more than the buffer holds.  Write there, then add what was
** written to o->n. */
char *cli_out_reserve(cli_out *o, size_t n);
/* Longest decimal int64, sign included. */
#define CLI_I64_MAX 20
/* Format v at p; returns the end of what was written. */
char *cli_fmt_i64(char *p, int64_t v);
int cli_out_flush(cli_out *o);
static inline void cli_out_char(cli_out *o, char c) {
  if (o->n == sizeof o->buf)
    cli_out_flush(o);
  o->buf[o->n++] = c;
}

/* Parse a whole decimal int64 from [s, s+n); 0 on success. */
int cli_parse_i64(const char *s, size_t n, int64_t *out);
/* A replay line's t_ms from [s, s+n): milliseconds that fit in int64 ns.
** NULL on success, else what is wrong ("must be 0..N (got X)"), in buf. */
const char *cli_parse_t_ms(const char *s, size_t n, int64_t *out, char *buf,
                           size_t buflen);
/* Parse "A,B,C" milliseconds (or "forever") into ns. */
int cli_parse_ms_list(const char *s, int64_t *out, int n);

/* The end of a command: stdout flushed and its error flag looked at, since
** stdio reports a failed write (a full disk, a closed pipe) only there.  A
** write error is said as "sluice CMD: write error: ..." and is a system
** failure (CLI_RUNTIME); otherwise rc is returned.  cmd NULL: "sluice". */
int cli_stdout_done(const char *cmd, int rc);

/* A store string given on the command line (--backend, --store): empty is
** refused, though the library reads it as "mem", since an empty variable
** in a script (--backend "$STORE") must not replay into memory unnoticed.
** Returns 0, or -1 after naming option and command on stderr. */
int cli_store_arg(const char *cmd, const char *opt, const char *v);

/* A replay's input: "-" is stdin.  NULL, after saying why on stderr, when
** the path cannot be opened or is a directory (which opens, then fails on
** the first read): both are usage errors, not system failures. */
FILE *cli_open_input(const char *cmd, const char *path);

/* The lines of a stream, read in 1 MiB blocks (the replays' stdin and
** inputs that cannot be mapped). */
typedef struct cli_lines {
  const char *cmd; /* for the read-error message */
  /* One line, without its newline: CLI_OK, or CLI_RUNTIME to stop. */
  int (*line)(void *ud, const char *s, size_t n, long lineno);
  /* Called after each block's lines, before the buffer is reused: lines
  ** kept by pointer must be done with.  NULL when lines are copied. */
  int (*block_done)(void *ud);
  /* A line longer than the buffer: report it as malformed.  It is skipped
  ** and the lines after it are read as usual. */
  void (*too_long)(void *ud, long lineno);
  void *ud;
} cli_lines;
/* Reads `in` to its end; *nlines gets the number of lines.  CLI_OK, or
** CLI_RUNTIME when a callback stops or the stream fails (then said). */
int cli_read_lines(FILE *in, const cli_lines *cb, long *nlines);

/* An integer setting of the configuration in force, by its path (0 when
** there is none). */
struct sluice_policy_config;
int64_t cli_setting(const struct sluice_policy_config *c, const char *path);

#endif
