/*
** sluice_redis.so: a Redis module running the library's own algorithm
** layer and program sequencer (lib/algo) inside Redis, as an accelerator
** for the Lua port (backends/redis/lua/, assembled into one script).
**
**   SLUICE.RUN numkeys key... program...  = EVALSHA <script sha> numkeys ...
**
** Same arguments, same replies, same 25-byte records (w[0], w[1], the
** expiry in ns, SLUICE_STATE_LAYOUT), so the script and the module can
** serve the same keys at once (the contract: backends/redis/wire.h).  Writes are replicated as their effects
** (SET key value PXAT ms, DEL key), never as the command: a replica or an
** AOF replay then holds exactly the master's records whatever its clock
** says, and needs no module.
*/
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "sluice_rm.h"
#include "rm_wire.h"
#include "job.h"

#define SMOD_NAME "sluice"
#define SMOD_VERSION 1
/* An expiry at least this far away gets SLUICE_WIRE_TTL_CAP_MS (wire.h). */
#define SMOD_FAR_NS ((int64_t)1 << 52)

/* The server's time as the script gets it from TIME (whole microseconds,
** in ns).  TIME reads the same clock (gettimeofday); reading it here costs
** a system-call-free vDSO read instead of a command call through
** RedisModule_Call, which would take a good part of the step's time, and
** 7.0 has no RedisModule_Microseconds. */
static int64_t server_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec / 1000 * 1000;
}

/* One record as read. */
typedef struct rec {
  RedisModuleKey *k;
  int live;    /* a record whose expiry has not come */
  int stale;   /* a record whose expiry has come: it goes */
  int corrupt; /* a value that is not a record of this layout */
  int64_t exp;
  sluice_state in;
} rec;

enum { LOAD_OK, LOAD_WRONGTYPE };

static int rec_load(RedisModuleCtx *ctx, RedisModuleString *name, int64_t now,
                    rec *r) {
  const unsigned char *p;
  size_t len;
  memset(r, 0, sizeof *r);
  r->k = srm_OpenKey(ctx, name, SRM_READ | SRM_WRITE);
  switch (srm_KeyType(r->k)) {
  case SRM_KEYTYPE_EMPTY:
    return LOAD_OK;
  case SRM_KEYTYPE_STRING:
    break;
  default:
    return LOAD_WRONGTYPE;
  }
  p = (const unsigned char *)srm_StringDMA(r->k, &len, SRM_READ);
  if (len != SLUICE_WIRE_RECORD || p[SLUICE_WIRE_REC_LAYOUT] != SLUICE_STATE_LAYOUT) {
    r->corrupt = 1;
    return LOAD_OK;
  }
  r->exp = smod_le64(p + SLUICE_WIRE_REC_EXPIRY);
  if (now < r->exp) {
    r->live = 1;
    r->in.w[0] = (uint64_t)smod_le64(p + SLUICE_WIRE_REC_W0);
    r->in.w[1] = (uint64_t)smod_le64(p + SLUICE_WIRE_REC_W1);
  } else {
    r->stale = 1;
  }
  return LOAD_OK;
}

static void rec_close(rec *r, int n) {
  int i;
  for (i = 0; i < n; i++)
    if (r[i].k)
      srm_CloseKey(r[i].k);
}

static void rec_del(RedisModuleCtx *ctx, RedisModuleString *name, rec *r) {
  srm_DeleteKey(r->k);
  srm_Replicate(ctx, "DEL", "s", name);
  r->live = r->stale = 0;
}

/* The least TTL a write takes: the call's at a test clock, -1 at server
** time (the grid's deadline instead). */
static int64_t min_ttl(const smod_call *c) {
  return c->server_time ? -1 : c->min_ttl_ms < 0 ? 0 : c->min_ttl_ms;
}

/* "PXAT", made once at load: one argument object fewer per write. */
static RedisModuleString *pxat;

/* Write a record with its expiry: as the stored value's and as the Redis
** deadline, at server time sluice_wire_deadline_ms() of it (the deadline
** the script keeps or sets), at a test clock from now in ms raised to the
** minimum TTL (c->min_ttl_ms; server time: -1); SLUICE_FOREVER gets none.
** Where the script keeps the deadline the record is rewritten in place
** (below).  Otherwise one new string object serves as the key's value and
** as the replicated SET's argument. */
static void rec_put(RedisModuleCtx *ctx, RedisModuleString *name, rec *r,
                    const sluice_state *s, int64_t exp, int64_t now,
                    int64_t min_ttl_ms) {
  unsigned char v[SLUICE_WIRE_RECORD];
  RedisModuleString *val;
  smod_put64(v + SLUICE_WIRE_REC_W0, (int64_t)s->w[0]);
  smod_put64(v + SLUICE_WIRE_REC_W1, (int64_t)s->w[1]);
  smod_put64(v + SLUICE_WIRE_REC_EXPIRY, exp);
  v[SLUICE_WIRE_REC_LAYOUT] = SLUICE_STATE_LAYOUT;
  /* A record over a record whose Redis deadline stays (the Lua's KEEPTTL
  ** rule: at server time an expiry in the same grid step, at a test clock
  ** the same expiry): its bytes rewritten in place, the TTL kept, and SET
  ** ... KEEPTTL replicated.  A SET (RedisModule_StringSet) would delete
  ** the key and add it again, then set its expiry: four lookups of the
  ** key's name and the old value freed, most of a decision's time. */
  if ((r->live || r->stale) && exp != SLUICE_FOREVER &&
      r->exp != SLUICE_FOREVER &&
      (min_ttl_ms < 0 ? (uint64_t)exp >> 32 == (uint64_t)r->exp >> 32
                      : exp == r->exp)) {
    size_t len;
    char *p = srm_StringDMA(r->k, &len, SRM_WRITE);
    if (p && len == SLUICE_WIRE_RECORD) {
      memcpy(p, v, SLUICE_WIRE_RECORD);
      srm_Replicate(ctx, "SET", "sbc", name, (const char *)v,
                    (size_t)SLUICE_WIRE_RECORD, "KEEPTTL");
      return;
    }
  }
  val = srm_CreateString(ctx, (const char *)v, SLUICE_WIRE_RECORD);
  srm_StringSet(r->k, val); /* and no TTL, as SET */
  if (exp == SLUICE_FOREVER) {
    srm_Replicate(ctx, "SET", "ss", name, val);
  } else {
    long long at;
    if (min_ttl_ms < 0) {
      at = sluice_wire_deadline_ms(exp);
    } else {
      int64_t d = exp - now;
      long long ms = d >= SMOD_FAR_NS ? SLUICE_WIRE_TTL_CAP_MS : d / 1000000 + 1;
      if (ms < min_ttl_ms)
        ms = min_ttl_ms;
      at = srm_Milliseconds() + ms;
    }
    srm_SetAbsExpire(r->k, at);
    srm_Replicate(ctx, "SET", "sssl", name, val, pxat, at);
  }
  srm_FreeString(ctx, val);
}

static int reply_err(RedisModuleCtx *ctx, const char *msg) {
  char buf[96];
  snprintf(buf, sizeof buf, "SLUICE %s", msg);
  return srm_ReplyWithError(ctx, buf);
}

static int reply_corrupt(RedisModuleCtx *ctx, int i) {
  char msg[64];
  snprintf(msg, sizeof msg, "ECORRUPT record of another layout at key %d", i);
  return reply_err(ctx, msg);
}

static int reply_wrongtype(RedisModuleCtx *ctx) {
  return srm_ReplyWithError(
      ctx, "WRONGTYPE Operation against a key holding the wrong kind of value");
}

/* ------------------------------------------------------------ reads --- */

/* algo 0: the raw value of one key (an expired record goes) and the time,
** {value | nil, now hi, now lo}. */
static int run_get(RedisModuleCtx *ctx, RedisModuleString *name, int64_t now) {
  RedisModuleKey *k = srm_OpenKey(ctx, name, SRM_READ | SRM_WRITE);
  int t = srm_KeyType(k);
  const unsigned char *p = NULL;
  size_t len = 0;
  if (t != SRM_KEYTYPE_EMPTY && t != SRM_KEYTYPE_STRING) {
    srm_CloseKey(k);
    return reply_wrongtype(ctx);
  }
  if (t == SRM_KEYTYPE_STRING) {
    p = (const unsigned char *)srm_StringDMA(k, &len, SRM_READ);
    if (len == SLUICE_WIRE_RECORD &&
        smod_le64(p + SLUICE_WIRE_REC_EXPIRY) <= now) {
      srm_DeleteKey(k);
      srm_Replicate(ctx, "DEL", "s", name);
      p = NULL;
    }
  }
  srm_ReplyWithArray(ctx, 3);
  if (p)
    srm_ReplyWithStringBuffer(ctx, (const char *)p, len);
  else
    srm_ReplyWithNull(ctx);
  srm_ReplyWithLongLong(ctx, (long long)(now >> 32));
  srm_ReplyWithLongLong(ctx, (long long)(now & 0xffffffff));
  srm_CloseKey(k);
  return SRM_OK;
}

/* --------------------------------------------------------- programs --- */

/* A program over its records.  The script reads a record only when a step
** that runs needs it; the C sequencer wants them all up front, so every
** record is read, and afterwards only those of steps that ran count as
** read: their expired records go, a damaged one is the error the script
** would have stopped at, and the changed ones (or those whose expiry
** moved) are written back with the expiry of the program. */
static int run_program(RedisModuleCtx *ctx, RedisModuleString **names,
                       const smod_call *c, int64_t now) {
  rec r[SLUICE_PROGRAM_KEYS];
  sluice_state in[SLUICE_PROGRAM_KEYS], out[SLUICE_PROGRAM_KEYS];
  sluice_program_result res;
  sluice__job job;
  unsigned char buf[SLUICE_WIRE_PROG_HEADER + SLUICE_WIRE_VERDICT * SLUICE_PROGRAM_STEPS];
  unsigned char read[SLUICE_PROGRAM_KEYS] = {0};
  const sluice_program *p = &c->prog;
  int i, s, n = p->nkeys, rc;
  for (i = 0; i < n; i++) {
    if (rec_load(ctx, names[i], now, &r[i]) != LOAD_OK) {
      rec_close(r, i + 1);
      return reply_wrongtype(ctx);
    }
    in[i] = r[i].in;
  }
  sluice__job_program(&job, p, &res);
  rc = sluice__job_run(&job, in, out, now);
  if (rc != SLUICE_OK) {
    rec_close(r, n);
    return reply_err(ctx, smod_err_name(rc) + 7);
  }
  for (s = 0; s < p->nsteps; s++) {
    const sluice_step *st = &p->steps[s];
    if (!((res.ran >> s) & 1u))
      continue;
    for (i = st->key; i < st->key + st->nkeys; i++) {
      if (r[i].corrupt) {
        rec_close(r, n);
        return reply_corrupt(ctx, i + 1);
      }
      read[i] = 1;
    }
  }
  for (i = 0; i < n; i++) {
    int changed;
    int64_t x = 0;
    if (!read[i])
      continue;
    /* As the C stores: a record a step changed, or whose expiry moved
    ** (parameters can move the expiry of an untouched record). */
    changed = memcmp(&out[i], &in[i], sizeof out[i]) != 0;
    if (changed || r[i].live)
      x = sluice__job_expiry(&job, i, &out[i]);
    if (changed || (r[i].live && x != r[i].exp)) {
      if (x <= now) {
        if (r[i].live || r[i].stale)
          rec_del(ctx, names[i], &r[i]);
      } else {
        rec_put(ctx, names[i], &r[i], &out[i], x, now, min_ttl(c));
      }
    } else if (r[i].stale) {
      rec_del(ctx, names[i], &r[i]);
    }
  }
  rec_close(r, n);
  return srm_ReplyWithStringBuffer(ctx, (const char *)buf,
                                   smod_put_program(buf, p, in, &res));
}

/* --------------------------------------------------------- commands --- */

/* numkeys (argv[1]) when the call is "CMD numkeys key... program..." with
** 1..max keys and a program at least, else 0. */
static int numkeys_of(RedisModuleString **argv, int argc, int max) {
  long long n;
  if (srm_StringToLongLong(argv[1], &n) != SRM_OK)
    return 0;
  return (n >= 1 && n <= max && argc >= n + 3) ? (int)n : 0;
}

/* Redis Cluster's routing (and ACL key checks) ask the command where its
** keys are: argv[2 .. 2 + numkeys - 1], as EVAL's. */
static int key_positions(RedisModuleCtx *ctx, RedisModuleString **argv,
                         int argc, int max) {
  int i, n = argc >= 3 ? numkeys_of(argv, argc, max) : 0;
  for (i = 0; i < n; i++)
    srm_KeyAtPos(ctx, 2 + i);
  return SRM_OK;
}

static int distinct_names(RedisModuleString **names, int n) {
  const char *p[SLUICE_PROGRAM_KEYS];
  size_t len[SLUICE_PROGRAM_KEYS];
  int i;
  if (n < 2)
    return 1;
  for (i = 0; i < n; i++)
    p[i] = srm_StringPtrLen(names[i], &len[i]);
  return smod_keys_distinct(n, p, len);
}

/* One program over its records (names: nkeys of them), its numbers the
** argument arg, at the call's server time now (when it asks for it). */
static int run_one(RedisModuleCtx *ctx, RedisModuleString **names, int nkeys,
                   RedisModuleString *arg, int64_t now) {
  smod_call c;
  size_t len;
  const unsigned char *nums =
      (const unsigned char *)srm_StringPtrLen(arg, &len);
  const char *why = NULL;
  if (len % 8 != 0 || smod_decode(&c, nums, len / 8, nkeys, &why) != SLUICE_OK)
    return reply_err(ctx, why ? why : "EINVAL malformed arguments");
  if (!distinct_names(names, nkeys))
    return reply_err(ctx, "EINVAL the same key twice");
  if (c.server_time)
    c.now = now;
  if (c.nsteps == 0)
    return run_get(ctx, names[0], c.now);
  return run_program(ctx, names, &c, c.now);
}

/* SLUICE.RUN numkeys key... program...: each program's numbers one
** argument, its records the next of the keys (as many as its header
** says); one program is answered by its answer, n by an array of n, in
** order.  One clock reading serves the call. */
static int cmd_run(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
  int64_t now;
  int n, np, k, at;
  if (srm_IsKeysPositionRequest(ctx))
    return key_positions(ctx, argv, argc, SLUICE_PROGRAM_KEYS);
  if (argc < 4)
    return srm_WrongArity(ctx);
  if (!(n = numkeys_of(argv, argc, SLUICE_PROGRAM_KEYS)))
    return reply_err(ctx, "EINVAL malformed arguments");
  np = argc - 2 - n;
  /* Every program's records found (and its numbers whole int64s, a
  ** header at least) before any runs: a malformed call runs none. */
  for (k = 0, at = 0; k < np; k++) {
    size_t len;
    const unsigned char *a = (const unsigned char *)srm_StringPtrLen(
        argv[2 + n + k], &len);
    int64_t nk = len >= 8 * SLUICE_WIRE_HEADER && len % 8 == 0
                     ? smod_le64(a + 8 * SLUICE_WIRE_NKEYS)
                     : 0;
    if (nk < 1 || nk > n - at)
      return reply_err(ctx, "EINVAL malformed arguments");
    at += (int)nk;
  }
  if (at != n)
    return reply_err(ctx, "EINVAL malformed arguments");
  now = server_now();
  if (np == 1)
    return run_one(ctx, argv + 2, n, argv[2 + n], now);
  srm_ReplyWithArray(ctx, np);
  for (k = 0, at = 0; k < np; k++) {
    const unsigned char *a = (const unsigned char *)srm_StringPtrLen(
        argv[2 + n + k], NULL);
    int nk = (int)smod_le64(a + 8 * SLUICE_WIRE_NKEYS);
    run_one(ctx, argv + 2 + at, nk, argv[2 + n + k], now);
    at += nk;
  }
  return SRM_OK;
}

/* The module's one exported symbol. */
__attribute__((visibility("default"))) int
RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv,
                       int argc) {
  (void)argv;
  (void)argc;
  if (srm_init(ctx, SMOD_NAME, SMOD_VERSION) != SRM_OK)
    return SRM_ERR;
  pxat = srm_CreateString(NULL, "PXAT", 4); /* kept for the module's life */
  /* Key positions come from the command (getkeys-api): numkeys varies. */
  if (srm_CreateCommand(ctx, "sluice.run", cmd_run,
                        "write deny-oom getkeys-api", 0, 0, 0) != SRM_OK)
    return SRM_ERR;
  return SRM_OK;
}
