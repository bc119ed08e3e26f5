/*
** Redis store: a call in two halves (lib/core/split.h), for hosts that
** run an event loop and carry the bytes themselves (an nginx worker, an
** OpenResty cosocket, Node), and for sluice_policy_decide(), which
** carries them on the store's own connections (CARRY).  One path reads
** every reply: a redirection, a reload or a failure is decided here
** whoever carried the bytes.
**
** The call's bytes are the command the pipelined rounds send for the
** same program (sluice__rcl_build_job: the same arguments, whatever
** the encoding of the day), in RESP, with what the node needs before it:
**   ASK       ASKING, then the command, on the node the ASK names;
**   MOVED     the command on the node now serving the slot (the map is
**             patched at once, as the rounds do);
**   NOSCRIPT  (or the library missing) SCRIPT / FUNCTION LOAD, then the
**             command, on the same node;
**   TRYAGAIN  the command again;
**   stale map (a node failed before): CLUSTER SLOTS to another known
**             node first, then the command where the new map says;
** and WAIT after it with wait_replicas.  At most RCL_ROUNDS of those per
** call, then SLUICE_EUNAVAIL, as the rounds.
**
** Routing lives in a lane of its own (rcl_store.split): a copy of lane 0
** made at open, which never connects; its mutex is held only while bytes
** are built or a reply is read, never across I/O, so a host's event loop
** never waits on another thread's round trip.  A node first seen through
** a redirection runs the engine the first seed runs (find_node; a
** cluster's nodes run one engine; a node that disagrees says so, and the
** reply path switches it, as for the rounds).
**
** Failure: the host reports a link failure (FAIL) or hands over bytes
** that are not RESP, or more than the replies owed: the command may or
** may not have run, so it is never sent again (SLUICE_ETIMEDOUT,
** SLUICE_EUNAVAIL or SLUICE_EBACKEND; the policy's failure mode decides),
** the host drops that connection (the stream is out of step), and the
** map is marked stale for the next call.
*/
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/sds.h>

#include "redis_int.h"
#include "split.h"
#include "op.h"
#include "store.h"

/* The store's state in sluice__split.priv. */
typedef struct rcl_split {
  rcl_job job;
  /* What decoding a result needs: nsteps, and the parameters of the box
  ** checks whose verdicts an engine may leave out (wire.h, FRESH). */
  sluice_program prog;
  sluice_penalty_params box[SLUICE_PROGRAM_STEPS];
  int node;            /* where the bytes go */
  int ask;             /* an ASKING goes first */
  int reload;          /* a LOAD goes first */
  int refresh;         /* the bytes are CLUSTER SLOTS, the command after */
  int wait;            /* a WAIT follows */
  int rounds;
  int got;             /* replies read so far */
  size_t fed;          /* reply bytes fed to the reader */
  size_t seen;         /* reply bytes the host handed in so far */
  redisReader *rd;
  redisReply *reps[4];
  /* The common answer, one bulk string, read in place (reply_in_place):
  ** reps[0] then points here, and str into the host's bytes. */
  redisReply bulk;
  /* The command's arguments after those naming the engine, in RESP. */
  char *tail;
  size_t tail_len, tail_cap;
  int ntail;
  /* A program sent by id: its whole numbers follow the tail, raw,
  ** whole_len bytes (0: none), for a library that does not know the id
  ** (tail_whole makes their RESP, in place of the id form's argument of
  ** idlen bytes, only then). */
  size_t whole_len, idlen;
  char *buf; /* the bytes to carry */
  size_t len, cap;
  /* Room for the common calls, so that a blocking decision (whose handle
  ** is on its stack) allocates nothing: a program by id (its tail and
  ** its steps) and the bytes of a program sent whole; larger ones grow
  ** on the heap. */
  char ibuf[1280], itail[1600];
} rcl_split;

_Static_assert(sizeof(rcl_split) <= SLUICE__SPLIT_PRIV,
               "rcl_split fits sluice__split.priv");

static rcl_split *priv(sluice__split *sp) { return (rcl_split *)sp->priv; }

/* What decoding p's result needs, kept in s and j: its step count, and
** its box checks' parameters (j->box, j->boxes). */
static void decode_copy(rcl_split *s, rcl_job *j, const sluice_program *p) {
  int i;
  memset(&s->prog, 0, sizeof s->prog);
  s->prog.nsteps = p->nsteps;
  j->prog = &s->prog;
  j->box = s->box;
  j->boxes = 0;
  for (i = 0; i < p->nsteps; i++)
    if (sluice_wire_fresh_step(&p->steps[i])) {
      s->box[i] = *(const sluice_penalty_params *)p->steps[i].params;
      j->boxes |= 1u << i;
    }
}

/* ----------------------------------------------------------- bytes --- */

/* Make *b (inline at first) hold need bytes, keeping what it holds. */
static int grow(rcl_store *home, char **b, size_t *cap, size_t need,
                char *inl) {
  size_t n = *cap;
  char *nb;
  if (need <= *cap)
    return SLUICE_OK;
  while (n < need)
    n *= 2;
  nb = sluice__store_malloc(&home->base, n);
  if (!nb)
    return SLUICE_ENOMEM;
  memcpy(nb, *b, *cap);
  if (*b != inl)
    sluice__store_free(&home->base, *b, *cap);
  *b = nb;
  *cap = n;
  return SLUICE_OK;
}

/* RESP: "*n\r\n" and "$len\r\nbytes\r\n"; the room was made before.
** (The digits by hand: sprintf was most of a call's building; a call's
** counts are below 10000, written without a loop.) */
static size_t put_count(char *at, char kind, size_t n) {
  char d[24];
  size_t k = 0, i = 1;
  at[0] = kind;
  if (n < 10) {
    at[i++] = (char)('0' + n);
  } else if (n < 100) {
    at[i++] = (char)('0' + n / 10);
    at[i++] = (char)('0' + n % 10);
  } else if (n < 1000) {
    at[i++] = (char)('0' + n / 100);
    at[i++] = (char)('0' + n / 10 % 10);
    at[i++] = (char)('0' + n % 10);
  } else if (n < 10000) {
    at[i++] = (char)('0' + n / 1000);
    at[i++] = (char)('0' + n / 100 % 10);
    at[i++] = (char)('0' + n / 10 % 10);
    at[i++] = (char)('0' + n % 10);
  } else {
    do
      d[k++] = (char)('0' + n % 10);
    while ((n /= 10) != 0);
    while (k > 0)
      at[i++] = d[--k];
  }
  at[i++] = '\r';
  at[i++] = '\n';
  return i;
}
static size_t put_bulk(char *at, const char *p, size_t n) {
  size_t k = put_count(at, '$', n);
  memcpy(at + k, p, n);
  memcpy(at + k + n, "\r\n", 2);
  return k + n + 2;
}
static size_t bulk_size(size_t n) { return n + 32; }

/* Append a whole command (argv) to the bytes to carry. */
static int put_command(rcl_store *home, rcl_split *s, int argc,
                       const char *const *argv, const size_t *lens,
                       int with_tail) {
  size_t need = 32 + (with_tail ? s->tail_len : 0);
  int i, rc;
  for (i = 0; i < argc; i++)
    need += bulk_size(lens[i]);
  if ((rc = grow(home, &s->buf, &s->cap, s->len + need, s->ibuf)) != SLUICE_OK)
    return rc;
  s->len += put_count(s->buf + s->len, '*',
                      (size_t)argc + (with_tail ? (size_t)s->ntail : 0));
  for (i = 0; i < argc; i++)
    s->len += put_bulk(s->buf + s->len, argv[i], lens[i]);
  if (with_tail) {
    memcpy(s->buf + s->len, s->tail, s->tail_len);
    s->len += s->tail_len;
  }
  return SLUICE_OK;
}

/* The node for the job: an ASK's, else the map's; a map without one
** (no seed answered yet) sends to the first seed, whose MOVED then says
** where the slot lives. */
static int route(rcl_store *r, rcl_job *j) {
  int ni;
  if (j->ask_node >= 0 && j->ask_node < r->nnodes)
    return j->ask_node;
  ni = r->cluster ? r->slot_node[j->slot] : r->slot_node[0];
  return ni == RCL_NO_NODE || ni >= r->nnodes ? 0 : ni;
}

static int done(sluice__split *sp, int rc) {
  sp->rc = rc;
  sp->status = SLUICE__SPLIT_DONE;
  return SLUICE__SPLIT_DONE;
}

/* The bytes for this round: what goes before the command, the command on
** the node's engine, WAIT.  SLUICE__SPLIT_SEND, or done with an error. */
static int compose(rcl_store *home, rcl_store *r, rcl_split *s,
                   sluice__split *sp) {
  static const char *const asking[1] = {"ASKING"};
  static const size_t asklen[1] = {6};
  rcl_cmd *c = &r->cmd;
  rcl_node *n;
  int rc;
  s->len = 0;
  s->got = 0;
  s->fed = 0;
  s->seen = 0;
  if (s->refresh) {
    /* Another node than the one that failed (the cursor moves on every
    ** failure), for the map; the command goes once it is read. */
    static const char *const slots[2] = {"CLUSTER", "SLOTS"};
    static const size_t slotlen[2] = {7, 5};
    s->node = r->refresh_cursor % (r->nnodes ? r->nnodes : 1);
    n = &r->nodes[s->node];
    sp->replies = 1;
    rc = put_command(home, s, 2, slots, slotlen, 0);
    goto out;
  }
  s->node = route(r, &s->job);
  n = &r->nodes[s->node];
  sp->replies = 1 + s->ask + s->reload + s->wait;
  if (s->ask && (rc = put_command(home, s, 1, asking, asklen, 0)) != SLUICE_OK)
    return done(sp, rc);
  if (s->reload) {
    const char *argv[3];
    size_t lens[3];
    sluice__rcl_load_argv(r, s->node, argv, lens);
    if ((rc = put_command(home, s, 3, argv, lens, 0)) != SLUICE_OK)
      return done(sp, rc);
  }
  c->argc = 0;
  sluice__rcl_arg_engine(c, r, s->node);
  if ((rc = put_command(home, s, c->argc, c->argv, c->lens, 1)) != SLUICE_OK)
    return done(sp, rc);
  if (s->wait) {
    char a[16], b[16];
    const char *argv[3] = {"WAIT", a, b};
    size_t lens[3] = {4, 0, 0};
    lens[1] = (size_t)snprintf(a, sizeof a, "%d", r->wait_replicas);
    lens[2] = (size_t)snprintf(b, sizeof b, "%d", r->conf->timeout_ms);
    rc = put_command(home, s, 3, argv, lens, 0);
  } else {
    rc = SLUICE_OK;
  }
out:
  if (rc != SLUICE_OK)
    return done(sp, rc);
  sp->bytes = s->buf;
  sp->len = s->len;
  if (strcmp(sp->host, n->host) != 0) { /* (snprintf every call cost more) */
    size_t hl = strlen(n->host);
    if (hl >= sizeof sp->host)
      hl = sizeof sp->host - 1;
    memcpy(sp->host, n->host, hl);
    sp->host[hl] = '\0';
  }
  sp->port = n->port;
  sp->slot = r->cluster ? s->job.slot : -1;
  r->st.ops++;
  return sp->status = SLUICE__SPLIT_SEND;
}

/* The command's arguments after the engine's, in RESP, kept for every
** round of the call (built once; the engine's part is per node). */
static int put_tail(rcl_store *home, rcl_split *s, const rcl_cmd *c) {
  size_t need = s->tail_len;
  int i, rc;
  for (i = c->head; i < c->argc; i++)
    need += bulk_size(c->lens[i]);
  if ((rc = grow(home, &s->tail, &s->tail_cap, need, s->itail)) != SLUICE_OK)
    return rc;
  for (i = c->head; i < c->argc; i++)
    s->tail_len += put_bulk(s->tail + s->tail_len, c->argv[i], c->lens[i]);
  s->ntail = c->argc - c->head;
  return SLUICE_OK;
}

/* A program by id: its whole numbers after the tail, raw (the build left
** them in the command; its argument is the last, the id form's). */
static int build_tail(rcl_store *home, rcl_store *r, rcl_split *s) {
  rcl_cmd *c = &r->cmd;
  size_t n;
  int rc;
  s->job.node = route(r, &s->job);
  s->tail_len = s->whole_len = 0;
  sluice__rcl_build_job(c, r, &s->job);
  if ((rc = put_tail(home, s, c)) != SLUICE_OK || !c->byid)
    return rc;
  n = 8 * (size_t)c->nwhole;
  if ((rc = grow(home, &s->tail, &s->tail_cap, s->tail_len + n, s->itail)) !=
      SLUICE_OK)
    return rc;
  memcpy(s->tail + s->tail_len, c->nums, n);
  s->whole_len = n;
  s->idlen = c->lens[c->argc - 1];
  return SLUICE_OK;
}

/* The library did not know the program's id: the whole program from now
** on (handle_reply set job.whole): the tail's last argument, the id form,
** becomes the whole numbers kept after the tail. */
static int tail_whole(rcl_store *home, rcl_split *s) {
  char head[24], *nb;
  size_t at, need, cap;
  if (!s->job.whole || !s->whole_len)
    return SLUICE_OK;
  /* where the id form's bulk starts */
  at = s->tail_len - (put_count(head, '$', s->idlen) + s->idlen + 2);
  need = at + bulk_size(s->whole_len);
  cap = s->tail_cap > need ? s->tail_cap : need;
  if (!(nb = sluice__store_malloc(&home->base, cap)))
    return SLUICE_ENOMEM;
  memcpy(nb, s->tail, at);
  at += put_count(nb + at, '$', s->whole_len);
  memcpy(nb + at, s->tail + s->tail_len, s->whole_len);
  memcpy(nb + at + s->whole_len, "\r\n", 2);
  if (s->tail != s->itail)
    sluice__store_free(&home->base, s->tail, s->tail_cap);
  s->tail = nb;
  s->tail_cap = cap;
  s->tail_len = at + s->whole_len + 2;
  s->whole_len = 0;
  return SLUICE_OK;
}

/* ----------------------------------------------------------- states --- */

static void drop_replies(rcl_split *s) {
  int i;
  for (i = 0; i < s->got; i++)
    if (s->reps[i] != &s->bulk)
      freeReplyObject(s->reps[i]);
  s->got = 0;
  s->fed = 0;
  s->seen = 0;
}

/* A failed link or a reply out of step: the command may have run. */
static int link_failed(rcl_store *r, rcl_split *s, sluice__split *sp, int rc,
                       const char *what) {
  rcl_node *n = &r->nodes[s->node];
  if (rc == SLUICE_ETIMEDOUT)
    r->st.timeouts++;
  else
    r->st.unavailable++;
  sluice_store_seterr(&r->base, rc, 0, "redis %s:%d: %s", n->host, n->port,
                      what);
  r->map_stale = 1;
  r->refresh_cursor = (s->node + 1) % (r->nnodes ? r->nnodes : 1);
  drop_replies(s);
  if (s->rd) { /* whatever it held belongs to a dead stream */
    redisReaderFree(s->rd);
    s->rd = NULL;
  }
  return done(sp, rc);
}

static int begin(rcl_store *home, rcl_store *r, sluice__split *sp) {
  rcl_split *s = priv(sp);
  const sluice_program *prog = sp->prog;
  int rc;
  /* The policy's flow calls with programs only (an op is a one-step
  ** program). */
  if (!prog)
    return done(sp, sluice_store_seterr(&r->base, SLUICE_EINVAL, 0,
                                        "redis: the halves carry programs"));
  if ((rc = sluice__rcl_prog_check(r, prog)) != SLUICE_OK)
    return done(sp, rc);
  memset(&s->job, 0, sizeof s->job);
  s->job.type = JOB_RUN;
  s->job.prog = prog;
  s->job.res = sp->res;
  s->job.now = sp->now;
  s->job.ask_node = -1;
  /* Hashed always: a MOVED may turn a single server's store into a
  ** cluster's, and the keys are the caller's only until begin returns. */
  s->job.slot = sluice__rcl_jkey_slot(r, &prog->keys[0]);
  s->ask = s->reload = 0;
  s->refresh = r->map_stale && r->cluster;
  s->wait = r->wait_replicas > 0;
  s->rounds = 0;
  if ((rc = build_tail(home, r, s)) != SLUICE_OK)
    return done(sp, rc);
  /* The program is the caller's until the call is done: the reply is
  ** decoded against a copy of what it needs. */
  decode_copy(s, &s->job, prog);
  return compose(home, r, s, sp);
}

/* Every reply owed is in s->reps: what they say. */
static int take(rcl_store *home, rcl_store *r, rcl_split *s,
                sluice__split *sp) {
  const redisReply *main;
  int k = 0, what, rc;
  r->st.round_trips++;
  if (s->refresh) {
    rc = sluice__rcl_slots_reply(r, s->node, s->reps[0]);
    drop_replies(s);
    s->refresh = 0;
    if (rc != SLUICE_OK) {
      r->refresh_cursor = (s->node + 1) % (r->nnodes ? r->nnodes : 1);
      r->map_stale = 1;
      return done(sp, SLUICE_EUNAVAIL);
    }
    goto again;
  }
  if (s->ask)
    k++; /* ASKING's +OK: nothing to read in it */
  if (s->reload) {
    rc = sluice__rcl_load_reply(r, s->node, s->reps[k++]);
    if (rc != SLUICE_OK) {
      drop_replies(s);
      return done(sp, rc);
    }
  }
  main = s->reps[k++];
  s->job.ask_node = -1;
  s->ask = s->reload = 0;
  what = sluice__rcl_handle_reply(r, &s->job, s->node, main);
  if (what == R_DONE && s->wait && s->job.rc == SLUICE_OK)
    s->job.rc = sluice__rcl_wait_reply(r, s->node, s->reps[k]);
  drop_replies(s);
  if (what == R_DONE) {
    if (s->job.rc == SLUICE_EUNAVAIL)
      r->st.unavailable++;
    return done(sp, s->job.rc);
  }
  if (what == R_NOSCRIPT)
    s->reload = 1;
  else
    s->ask = s->job.ask_node >= 0;
  if ((rc = tail_whole(home, s)) != SLUICE_OK)
    return done(sp, rc);
again:
  if (++s->rounds >= RCL_ROUNDS)
    return done(sp, sluice_store_seterr(&r->base, SLUICE_EUNAVAIL, 0,
                                        "redis: redirections or TRYAGAIN "
                                        "exhausted"));
  return compose(home, r, s, sp);
}

/* A call owed one reply whose bytes so far are one bulk string, or its
** beginning: read in place, without the reader (its copy of the bytes,
** and the reply's two allocations and frees), since a decision's answer
** is one.  1: whole, in s->reps[0]; 0: not yet whole (nothing kept: the
** host hands every byte again with the rest); -1: anything else (an
** error, a nil, bytes beyond the reply), which the reader takes. */
static int reply_in_place(rcl_split *s, const sluice__split *sp,
                          const char *b, size_t len) {
  size_t n = 0, i = 1;
  if (sp->replies != 1 || s->fed != 0 || len < 1 || b[0] != '$')
    return -1;
  for (; i < len && b[i] >= '0' && b[i] <= '9' && i < 12; i++)
    n = n * 10 + (size_t)(b[i] - '0');
  if (i >= len || i + 1 >= len)
    return i < 12 ? 0 : -1;
  if (i == 1 || b[i] != '\r' || b[i + 1] != '\n')
    return -1;
  i += 2;
  if (len < i + n + 2)
    return 0;
  if (len != i + n + 2 || b[i + n] != '\r' || b[i + n + 1] != '\n')
    return -1;
  memset(&s->bulk, 0, sizeof s->bulk);
  s->bulk.type = REDIS_REPLY_STRING;
  s->bulk.len = n;
  s->bulk.str = (char *)(b + i); /* (read only, while the host's bytes are) */
  s->reps[0] = &s->bulk;
  s->got = 1;
  return 1;
}

/* The host's bytes: every byte received since the call's bytes went. */
static int reply(rcl_store *home, rcl_store *r, sluice__split *sp) {
  rcl_split *s = priv(sp);
  size_t left;
  int in;
  if (!sp->reply && sp->reply_len)
    return SLUICE_EINVAL;
  if (sp->reply_len < s->seen)
    return sluice_store_seterr(&r->base, SLUICE_EINVAL, 0,
                               "redis: finish wants every byte received "
                               "since the call was sent (%zu < %zu)",
                               sp->reply_len, s->seen);
  s->seen = sp->reply_len;
  if ((in = reply_in_place(s, sp, (const char *)sp->reply, sp->reply_len)) ==
      1)
    return take(home, r, s, sp);
  if (in == 0)
    return sp->status = SLUICE__SPLIT_MORE;
  if (!s->rd && !(s->rd = redisReaderCreate()))
    return SLUICE_ENOMEM;
  if (sp->reply_len > s->fed &&
      redisReaderFeed(s->rd, (const char *)sp->reply + s->fed,
                      sp->reply_len - s->fed) != REDIS_OK)
    return SLUICE_ENOMEM;
  s->fed = sp->reply_len;
  while (s->got < sp->replies) {
    void *rep = NULL;
    if (redisReaderGetReply(s->rd, &rep) != REDIS_OK) {
      char why[160];
      snprintf(why, sizeof why, "not a Redis reply (%s)", s->rd->errstr);
      return link_failed(r, s, sp, SLUICE_EBACKEND, why);
    }
    if (!rep)
      return sp->status = SLUICE__SPLIT_MORE;
    s->reps[s->got++] = rep;
  }
  left = s->rd->len - s->rd->pos;
  if (left)
    return link_failed(r, s, sp, SLUICE_EBACKEND,
                       "bytes beyond the replies owed (the stream is out of "
                       "step)");
  return take(home, r, s, sp);
}

/* A hiredis context's I/O error, as hiredis records its own. */
static int plain_fail(redisContext *c, int eof) {
  int e = errno;
  c->err = eof ? REDIS_ERR_EOF : REDIS_ERR_IO;
  snprintf(c->errstr, sizeof c->errstr, "%s",
           eof ? "Server closed the connection" : strerror(e));
  errno = e;
  return REDIS_ERR;
}

/* carry's common call on a plain connection with nothing pending: the
** bytes written and one bulk string read into buf (cap bytes) and taken
** in place, without hiredis's copy of the command and its reply tree.
** REDIS_OK with *in 1: the reply is s->reps[0]; *in 0: anything else,
** the bytes read so far (*got) fed to the context's reader, which reads
** on; REDIS_ERR: the link failed (errno, c->err). */
static int carry_plain(redisContext *c, rcl_split *s, sluice__split *sp,
                       char *buf, size_t cap, int *in) {
  size_t off = 0, got = 0;
  ssize_t n;
  *in = 0;
  while (off < sp->len) {
    n = write(c->fd, (const char *)sp->bytes + off, sp->len - off);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return plain_fail(c, 0);
    off += (size_t)n;
  }
  for (;;) {
    n = read(c->fd, buf + got, cap - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return plain_fail(c, n == 0);
    got += (size_t)n;
    *in = reply_in_place(s, sp, buf, got);
    if (*in == 1)
      return REDIS_OK;
    if (*in < 0 || got == cap) {
      *in = 0;
      return redisReaderFeed(c->reader, buf, got) == REDIS_OK
                 ? REDIS_OK
                 : plain_fail(c, 0);
    }
  }
}

/* A blocking host of its own: carry the bytes on one of the store's
** lanes (its connection to that node, connected here if need be), read
** the replies, and read them as the halves do. */
static int carry(rcl_store *home, sluice__split *sp) {
  rcl_split *s = priv(sp);
  rcl_store *l = sluice__rcl_lane_lock(home), *r = home->split;
  int ni, rc = SLUICE_OK, done_w = 0, st, in = 0;
  char rbuf[2048]; /* (a decision's answer, read in place: until take) */
  sluice__rcl_fork_check(l);
  ni = sluice__rcl_find_node(l, sp->host, strlen(sp->host), sp->port, 1);
  if (ni < 0 && sp->port == 0) /* the unix socket seed */
    ni = 0;
  if (ni < 0)
    rc = SLUICE_EUNAVAIL;
  else
    rc = sluice__rcl_node_connect(l, ni);
  if (rc == SLUICE_OK && !l->nodes[ni].tls && sp->replies == 1 &&
      sdslen(l->nodes[ni].c->obuf) == 0 &&
      l->nodes[ni].c->reader->pos == l->nodes[ni].c->reader->len) {
    errno = 0;
    if (carry_plain(l->nodes[ni].c, s, sp, rbuf, sizeof rbuf, &in) !=
        REDIS_OK)
      rc = sluice__rcl_node_io_error(l, ni, errno);
    done_w = 1;
  } else if (rc == SLUICE_OK &&
             redisAppendFormattedCommand(l->nodes[ni].c, sp->bytes,
                                         sp->len) != REDIS_OK) {
    rc = SLUICE_ENOMEM;
  }
  while (rc == SLUICE_OK && !done_w) {
    errno = 0;
    if (sluice__rcl_link_write(l->nodes[ni].c, l->nodes[ni].tls, &done_w) !=
        REDIS_OK)
      rc = sluice__rcl_node_io_error(l, ni, errno);
  }
  while (rc == SLUICE_OK && s->got < sp->replies) {
    void *rep = NULL;
    errno = 0;
    if (sluice__rcl_link_reply(l->nodes[ni].c, l->nodes[ni].tls, &rep) !=
            REDIS_OK ||
        !rep)
      rc = sluice__rcl_node_io_error(l, ni, errno);
    else
      s->reps[s->got++] = rep;
  }
  pthread_mutex_unlock(&l->mu);
  pthread_mutex_lock(&r->mu);
  if (rc != SLUICE_OK) {
    if (rc == SLUICE_ETIMEDOUT || rc == SLUICE_EUNAVAIL)
      st = link_failed(r, s, sp, rc, sluice_store_errmsg(&home->base));
    else
      st = done(sp, rc);
  } else {
    st = take(home, r, s, sp);
  }
  pthread_mutex_unlock(&r->mu);
  return st;
}

int sluice__rcl_split_control(rcl_store *home, int op, void *arg) {
  sluice__split *sp = arg;
  rcl_store *r = home->split;
  rcl_split *s;
  int rc;
  if (!sp || !r)
    return SLUICE_EINVAL;
  s = priv(sp);
  switch (op) {
  case SLUICE__CTL_SPLIT_OPEN:
    memset(s, 0, sizeof *s);
    sp->host[0] = '\0'; /* (compose copies a node's name when it changes) */
    s->buf = s->ibuf;
    s->cap = sizeof s->ibuf;
    s->tail = s->itail;
    s->tail_cap = sizeof s->itail;
    return SLUICE_OK;
  case SLUICE__CTL_SPLIT_CLOSE:
    drop_replies(s);
    if (s->rd)
      redisReaderFree(s->rd);
    if (s->buf != s->ibuf)
      sluice__store_free(&home->base, s->buf, s->cap);
    if (s->tail != s->itail)
      sluice__store_free(&home->base, s->tail, s->tail_cap);
    memset(s, 0, sizeof *s);
    return SLUICE_OK;
  case SLUICE__CTL_SPLIT_CARRY:
    if (sp->status != SLUICE__SPLIT_SEND)
      return SLUICE_EINVAL;
    return carry(home, sp);
  default:
    break;
  }
  pthread_mutex_lock(&r->mu);
  switch (op) {
  case SLUICE__CTL_SPLIT_BEGIN:
    drop_replies(s);
    rc = begin(home, r, sp);
    break;
  case SLUICE__CTL_SPLIT_REPLY:
  case SLUICE__CTL_SPLIT_FAIL:
    if (sp->status != SLUICE__SPLIT_SEND && sp->status != SLUICE__SPLIT_MORE)
      rc = SLUICE_EINVAL;
    else if (op == SLUICE__CTL_SPLIT_REPLY)
      rc = reply(home, r, sp);
    else if (sp->err != SLUICE_ETIMEDOUT && sp->err != SLUICE_EUNAVAIL &&
             sp->err != SLUICE_EIO && sp->err != SLUICE_EBACKEND)
      rc = SLUICE_EINVAL;
    else
      rc = link_failed(r, s, sp, sp->err, "the host's link failed");
    break;
  default:
    rc = SLUICE_ENOTFOUND;
  }
  pthread_mutex_unlock(&r->mu);
  return rc;
}
