/*
** The redis backend's wire contract (backends/redis/wire.h, its one
** definition) decoded into the C library's operations and programs and
** encoded back into its replies, so that SLUICE.RUN answers byte for byte
** what one EVALSHA of the script answers.  Nothing here
** touches Redis.
*/
#ifndef SLUICE_RM_WIRE_H
#define SLUICE_RM_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <sluice/backend.h>
#include "wire.h" /* backends/redis/wire.h */

/* One step's parameters, whatever its algorithm. */
typedef union smod_params {
  sluice_gcra_params g[SLUICE_GROUP_MAX];
  sluice_window_params w;
  sluice_distinct_params d;
  sluice_penalty_params p;
  sluice_lease_params l;
} smod_params;

typedef struct smod_call {
  int nsteps;        /* 0: read the one record (SLUICE_WIRE_NSTEPS) */
  int server_time;   /* now hi < 0: the caller wants the server's clock */
  int64_t now;       /* the caller's time otherwise */
  int64_t min_ttl_ms;
  sluice_program prog; /* nsteps > 0 */
  sluice_step steps[SLUICE_PROGRAM_STEPS];
  smod_params par[SLUICE_PROGRAM_STEPS];
} smod_call;

/* Stand-in keys for validation: the algorithm layer never reads a key's
** bytes, and the Redis key names (prefix included) may pass
** SLUICE_KEY_MAX; distinct keys with one hash tag pass its checks, and
** smod_keys_distinct() checks the real names for duplicates. */
extern const sluice_key smod_anon_keys[SLUICE_PROGRAM_KEYS];

/* Little-endian int64s on the wire (the records and replies too); on a
** little-endian host a plain copy, which the verdict's 12 fields and every
** number of a call go through. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
static inline int64_t smod_le64(const unsigned char *p) {
  int64_t x;
  memcpy(&x, p, 8);
  return x;
}
static inline void smod_put64(unsigned char *p, int64_t x) {
  memcpy(p, &x, 8);
}
#else
static inline int64_t smod_le64(const unsigned char *p) {
  uint64_t u = 0;
  int i;
  for (i = 7; i >= 0; i--)
    u = u << 8 | p[i];
  return (int64_t)u;
}
static inline void smod_put64(unsigned char *p, int64_t x) {
  uint64_t u = (uint64_t)x;
  int i;
  for (i = 0; i < 8; i++)
    p[i] = (unsigned char)(u >> (8 * i));
}
#endif

/* Decode one program of a SLUICE.RUN call over nkeys keys from its
** numbers (n int64s at nums) and validate it.  SLUICE_OK, or a negative
** code with *why set to the message of the error reply. */
int smod_decode(smod_call *c, const unsigned char *nums, size_t n, int nkeys,
                const char **why);

/* Are the n names (pointer, length) pairwise different? */
int smod_keys_distinct(int n, const char *const *name, const size_t *len);

void smod_put_verdict(unsigned char *out,
                      const sluice_verdict *v);
/* The 24-byte header then the verdict of each step that ran but a fresh
** box check's (wire.h, FRESH; in: the records as read); returns the
** length. */
size_t smod_put_program(unsigned char *out, const sluice_program *p,
                        const sluice_state *in,
                        const sluice_program_result *r);

/* "SLUICE E..." reply prefix for a library error code. */
const char *smod_err_name(int rc);

#endif
