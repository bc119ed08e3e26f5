/* Conformance traces: a small line format replayed through any backend.
**
**   param NAME ALGO numbers...         define a parameter set
**   T_MS KIND PARAMS KEYS ARG ID => FIELD=VALUE ...
**
** PARAMS and KEYS join group members with '+'.  A lease set's KEYS is one
** base name standing for its slot keys BASE:0..max-1.  Every key is placed
** under one hash tag unique to the run, so traces share a store safely.
** Fields not listed must be 0 (now_ns must equal T_MS in ns); error=NAME
** expects the operation to fail with SLUICE_E<NAME>. */
#ifndef SLUICE_TEST_TRACE_H
#define SLUICE_TEST_TRACE_H

#include <stdio.h>

#include "sluice.h"

/* Replays the trace file at `path` on `lim`, whose clock is the manual
** clock `clk` (set to each line's time), with keys under hash tag `tag`.  Returns the number of mismatches (0 = conforms); every mismatch
** is described in `report` (NUL-terminated, truncated to `len`).  A
** malformed trace is reported as one mismatch. */
int trace_replay(sluice_limiter *lim, sluice_clock *clk, const char *path, const char *tag,
                 char *report, size_t len);

#endif
