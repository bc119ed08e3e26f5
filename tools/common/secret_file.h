/* Helpers shared by the example programs (sluice CLI, ledger-api). */
#ifndef SLUICE_EXAMPLES_SECRET_FILE_H
#define SLUICE_EXAMPLES_SECRET_FILE_H

#include <stddef.h>
#include <stdint.h>

/* The value of hex digit c, or -1. */
int ex_hex_digit(int c);

/* Read a policy secret: 32 hex digits, whitespace anywhere allowed.  The
** CLI and the server must read it the same way, or `sluice inspect` would
** look for other scope ids than the server writes.  0, or -1 with a reason
** in err. */
int ex_read_secret_file(const char *path, uint8_t out[16], char *err,
                        size_t errlen);

#endif
