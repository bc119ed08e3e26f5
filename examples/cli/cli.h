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
/* Parse "A,B,C" milliseconds (or "forever") into ns. */
int cli_parse_ms_list(const char *s, int64_t *out, int n);

#endif
