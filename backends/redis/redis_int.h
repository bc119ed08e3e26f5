/*
** Private to the redis backend: its types, and the functions its files
** share.  redis_store.c has the design (routing, round trips, failure,
** choices), the methods and open/close/params; redis_route.c the nodes,
** connections, engine detection, slot map and lanes; redis_codec.c the
** wire codec (building calls, decoding replies, redirects); redis_round.c
** the pipelined rounds.  redis_conn.c (redis_conn.h) connects and carries.
*/
#ifndef SLUICE_REDIS_INT_H
#define SLUICE_REDIS_INT_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include <hiredis/hiredis.h>

#include "backends.h"
#include "redis_conn.h"
#include "sluice.h"
#include <sluice/sluice_redis.h>
#include "wire.h"

#define RCL_SLOTS 16384
#define RCL_MAX_NODES 64
#define RCL_NO_NODE 0xff
#define RCL_ROUNDS 6
#define RCL_STACK_JOBS 8
/* A call carries at most this many programs (run_round's batches), and
** at most SLUICE_PROGRAM_KEYS records and RCL_MAX_NUMS numbers in all. */
#define RCL_BATCH_MAX SLUICE_GROUP_MAX
/* Most argv entries one call needs: EVALSHA sha numkeys, the records, and
** each program's numbers as one argument (see arg_int in redis_codec.c). */
#define RCL_MAX_ARGS (3 + SLUICE_PROGRAM_KEYS + RCL_BATCH_MAX)
/* The most numbers of one program: the header, then per step its numbers
** and its parameters (at most a GCRA group's per key). */
#define RCL_MAX_NUMS                                                           \
  (SLUICE_WIRE_HEADER +                                                        \
   SLUICE_PROGRAM_STEPS *                                                      \
       (SLUICE_WIRE_STEP + SLUICE_WIRE_GCRA_PARAMS * SLUICE_GROUP_MAX))
#define RCL_PREFIX_MAX 64
/* Test mode keeps records at least this long in Redis (the manual clock
** may stand still while real time passes; the stored expiry decides). */
#define RCL_TEST_MIN_TTL_MS 86400000
/* Most lanes (connection sets) a store keeps, and the default. */
#define RCL_POOL_MAX 64
#define RCL_POOL_DEFAULT 8

typedef struct rcl_node {
  char host[64];
  int port;           /* 0: the unix socket of rcl_conf */
  redisContext *c;
  struct ssl_st *tls; /* the TLS session on c's descriptor, or NULL */
  int64_t retry_at;   /* monotonic ns: no reconnect before */
  int backoff_ms;
  int module;         /* this connection runs SLUICE.RUN, not the script */
  int fn;             /* ... FCALL of the Lua library, not EVALSHA */
} rcl_node;

/* engine=: which of the two runs the steps on a node (see node_engine in
** redis_route.c); the Lua as a library (FCALL) where the node has Redis
** Functions, else as a script (EVALSHA); engine=script: EVALSHA always. */
enum { RCL_ENGINE_AUTO, RCL_ENGINE_MODULE, RCL_ENGINE_LUA, RCL_ENGINE_SCRIPT };

/* Programs this lane has sent whole to FCALL nodes, by their steps'
** bytes (compared whole: a program longer than RCL_PID_BYTES always goes
** whole) and their id (redis_codec.c, program_id). */
#define RCL_PIDS 32
#define RCL_PID_BYTES 1024
typedef struct rcl_pid {
  size_t len; /* 0: empty */
  uint64_t fp;
  uint64_t nodes; /* bit i: sent whole to node i (RCL_MAX_NODES is 64) */
  unsigned char id[SLUICE_WIRE_PROG_ID_BYTES];
  unsigned char bytes[RCL_PID_BYTES];
} rcl_pid;
_Static_assert(RCL_MAX_NODES <= 64, "rcl_pid.nodes has a bit per node");

/* The argv of one call, built in place (redis_codec.c). */
typedef struct rcl_cmd {
  int argc;
  const char *argv[RCL_MAX_ARGS];
  size_t lens[RCL_MAX_ARGS];
  unsigned char nums[RCL_MAX_NUMS * 8];
  char numkeys[2];
  char keys[SLUICE_PROGRAM_KEYS][RCL_PREFIX_MAX + SLUICE_KEY_MAX];
  int nnum;
  int head; /* how many of argv name the engine (build_job) */
  int byid;  /* the program went by its id (build_job) */
  /* With byid: the whole program's numbers are still in nums, nwhole of
  ** them (the id's header is their first SLUICE_WIRE_HEADER). */
  int nwhole;
  rcl_pid pids[RCL_PIDS];
} rcl_cmd;

typedef struct rcl_store {
  sluice_store base;
  pthread_mutex_t mu;
  /* A store is a set of lanes, each a full copy of the routing state with
  ** its own connections and mutex, so threads deciding at once do not
  ** queue on one socket (see lane_lock, redis_route.c).  The store the
  ** core holds is lane 0 and owns the others, the configuration and the
  ** marker page. */
  struct rcl_store **lanes; /* lane 0 only: nlanes entries, [0] = itself */
  int nlanes;
  rcl_conf *conf;           /* shared, read-only after open */
  char *url_params;         /* lane 0: a redis:// URL rewritten (or NULL) */
  size_t url_params_len;
  int hard_rc;              /* a node answered and refused us: the code */
  int map_ok;               /* a slot map was ever loaded */
  pid_t pid;
  /* A page the kernel zeroes in a forked child (MADV_WIPEONFORK): reading
  ** it tells "same process" without a getpid() system call per decision.
  ** NULL where unsupported; then getpid() is compared on every call. */
  volatile unsigned char *fork_page;
  int backoff_max_ms;
  int wait_replicas;
  int testclock, readonly;
  int engine; /* RCL_ENGINE_* */
  int cluster;
  int map_stale;
  int64_t map_loaded_at;
  int nnodes;
  int refresh_cursor;
  rcl_node nodes[RCL_MAX_NODES];
  uint8_t slot_node[RCL_SLOTS];
  uint16_t crc_tab[256];
  char prefix[RCL_PREFIX_MAX];
  size_t prefix_len;
  sluice_redis_stats st;
  rcl_cmd cmd; /* scratch for building commands, under mu */
  /* lane 0 only: the routing of calls in two halves (redis_split.c), a
  ** lane that never connects, its mutex never held across I/O */
  struct rcl_store *split;
} rcl_store;

/* One unit of work in a pipeline. */
enum { JOB_GET, JOB_DEL, JOB_RUN };
typedef struct rcl_job {
  int type;
  const sluice_program *prog;  /* JOB_RUN */
  sluice_program_result *res;  /* JOB_RUN */
  sluice_verdict *v;        /* JOB_RUN without res: never set now (the
                               halves carry programs); redis_codec.c still
                               reads it */
  const sluice_key *key;    /* JOB_GET, JOB_DEL */
  sluice_state *st_out;     /* JOB_GET */
  int64_t *exp_out;         /* JOB_GET */
  int64_t now;              /* the caller's time (test mode) */
  int rc;
  int pending;
  int slot;
  int node;                 /* node this round */
  int ask_node;             /* -1, or the ASK target for the next round */
  int sent;
  int batch;                /* this round: 0 own command; n > 0 leads a
                               call of n programs; -1 a member */
  int bnext;                /* next member of the batch, -1 at the end */
  int bkeys, bnums;         /* a batch's leader: its records and numbers */
  int whole;                /* JOB_RUN: send the program, not its id */
  /* JOB_RUN: NULL, or the parameters of box checks (bit i of boxes: step
  ** i's in box[i]) when prog has its step count alone (redis_split.c). */
  const sluice_penalty_params *box;
  uint32_t boxes;
} rcl_job;

/* What to do with one reply. */
enum { R_DONE, R_RETRY, R_NOSCRIPT };

/* redis_route.c: nodes, connections, engine, slot map, lanes. */
void sluice__rcl_crc_init(rcl_store *r);
int sluice__rcl_jkey_slot(const rcl_store *r, const sluice_key *k);
int sluice__rcl_find_node(rcl_store *r, const char *host, size_t hlen,
                          int port, int add);
void sluice__rcl_fork_check(rcl_store *r);
int sluice__rcl_node_io_error(rcl_store *r, int ni, int saved_errno);
int sluice__rcl_node_connect(rcl_store *r, int ni);
int sluice__rcl_load_script(rcl_store *r, int ni);
void sluice__rcl_load_argv(const rcl_store *r, int ni, const char *argv[3],
                           size_t lens[3]);
int sluice__rcl_load_reply(rcl_store *r, int ni, const redisReply *rep);
int sluice__rcl_slots_reply(rcl_store *r, int ni, const redisReply *rep);
int sluice__rcl_refresh_map(rcl_store *r, int max_tries);
void sluice__rcl_maybe_refresh(rcl_store *r);
rcl_store *sluice__rcl_lane_lock(rcl_store *home);

/* redis_codec.c: building calls, decoding replies. */
int sluice__rcl_range_check(const sluice_op *op);
int sluice__rcl_prog_nums(const sluice_program *p);
void sluice__rcl_build_batch(rcl_cmd *c, const rcl_store *r,
                             const rcl_job *jobs, int head);
void sluice__rcl_build_job(rcl_cmd *c, const rcl_store *r, const rcl_job *j);
/* The arguments that name the engine on node ni (the command's first one
** or two: rcl_cmd.head of them after build_job). */
void sluice__rcl_arg_engine(rcl_cmd *c, const rcl_store *r, int ni);
int sluice__rcl_handle_reply(rcl_store *r, rcl_job *j, int ni,
                             const redisReply *rep);

/* redis_store.c: the checks a program passes before it is sent. */
int sluice__rcl_prog_check(rcl_store *r, const sluice_program *p);

/* redis_split.c: calls in two halves (lib/core/split.h). */
int sluice__rcl_split_control(rcl_store *home, int op, void *arg);

/* redis_round.c: pipelined rounds, and WAIT's reply (both paths). */
int sluice__rcl_run_jobs(rcl_store *r, rcl_job *jobs, int n);
int sluice__rcl_wait_reply(rcl_store *r, int ni, const redisReply *w);

#endif
