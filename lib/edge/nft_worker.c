/*
** The nftables sink's thread: it takes the queued updates, applies them to
** its list and to the kernel's sets in one transaction per batch, rewrites
** the sets from the list when asked (reconcile) or when due (resync), and
** writes the list's file.
**
** Choices:
**  a) An element that may or may not be in the set is refreshed with
**     "add X; delete X; add X timeout T" in one transaction: nftables
**     neither updates the timeout of an element that exists nor deletes
**     one that does not without failing the whole transaction, and this
**     form does both, atomically, on every kernel nf_tables runs on.  A
**     removal is "add X; delete X".
**  b) Within a batch the last update of an address wins (an add and a
**     lift of one address in one batch would otherwise collide), and each
**     set gets the same three commands (of CHUNK elements a line) that a
**     reconcile sends for the whole list: a flood costs one transaction
**     per batch_max updates.
**  c) A transaction that fails with SLUICE_NFT_CREATE runs the schema and
**     tries once more (a flushed ruleset); one that fails again counts
**     each of its updates failed, and the list keeps them, so the next
**     resync puts them back.
**  d) Several sinks may share a table (the workers of a prefork server,
**     `sluice release --nft`), each knowing the addresses it was told
**     about, so no sink ever flushes a set.  A reconcile refreshes the
**     addresses the store still boxes and deletes those it does not, in
**     one transaction; once the sink has a policy every periodic resync is
**     a reconcile, so an address another process released or renewed is
**     not put back with the old end.  Without one, a resync adds back what
**     is missing (a flushed ruleset) and leaves the rest alone.
**  e) The file is written at most once a second, and at close: a ban flood
**     must not become a flood of fsyncs.  An address banned less than a
**     second before a crash is lost from the file, not from the store; its
**     next request trips (or finds) its box again.
**  f) After a batch smaller than batch_max the thread waits GATHER_NS
**     before it looks again: a flood's updates gather into one transaction
**     instead of waking it per ban (with the queue's signal only on an
**     empty queue, the deciding threads then make no system call).
*/
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nftables/libnftables.h>

#include "nft_int.h"

#define NS_PER_MS INT64_C(1000000)
#define NS_PER_S INT64_C(1000000000)
#define SAVE_EVERY_NS NS_PER_S
#define CHUNK 256 /* elements per command line */
#define TAKE 32   /* updates copied out of the queue per hold of its mutex */
#define GATHER_NS 1000000 /* after a short batch, wait this long for more */

/* ------------------------------------------------------------- nftables --- */

static void keep_error(sluice_nft *s, const char *msg) {
  size_t n;
  pthread_mutex_lock(&s->errmu);
  snprintf(s->lasterr, sizeof s->lasterr, "%s", msg && msg[0] ? msg : "");
  n = strlen(s->lasterr);
  while (n && (s->lasterr[n - 1] == '\n' || s->lasterr[n - 1] == ' '))
    s->lasterr[--n] = 0;
  pthread_mutex_unlock(&s->errmu);
}

int sluice__nft_run(sluice_nft *s, const char *cmds) {
  const char *err;
  int rc;
  if (!cmds) {
    if (s->nft)
      nft_ctx_free(s->nft);
    s->nft = NULL;
    return SLUICE_OK;
  }
  if (!s->nft) {
    if (!(s->nft = nft_ctx_new(NFT_CTX_DEFAULT)))
      return SLUICE_ENOMEM;
    if (nft_ctx_buffer_output(s->nft) || nft_ctx_buffer_error(s->nft)) {
      nft_ctx_free(s->nft);
      s->nft = NULL;
      return SLUICE_ENOMEM;
    }
  }
  rc = nft_run_cmd_from_buffer(s->nft, cmds);
  (void)nft_ctx_get_output_buffer(s->nft); /* rewinds it */
  err = nft_ctx_get_error_buffer(s->nft);
  if (rc == 0)
    return SLUICE_OK;
  keep_error(s, err ? err : "nftables failed");
  return err && strstr(err, "Operation not permitted") ? SLUICE_EPERM
                                                        : SLUICE_EBACKEND;
}

int sluice__nft_create(sluice_nft *s) {
  char buf[1024];
  if (!(s->flags & SLUICE_NFT_CREATE))
    return SLUICE_OK;
  if (sluice__nft_schema_text(&s->names, buf, sizeof buf, NULL))
    return SLUICE_ERANGE;
  return sluice__nft_run(s, buf);
}

/* ------------------------------------------------------ command buffer --- */

/* The commands of one transaction go into a memory stream (open_memstream
** grows it); a failed write or allocation shows at cmd_end(). */
static void cmd_reset(sluice_nft *s) {
  free(s->cmd);
  s->cmd = NULL;
  s->cmdf = open_memstream(&s->cmd, &s->cmdlen);
}

static const char *cmd_end(sluice_nft *s) {
  int bad = !s->cmdf || ferror(s->cmdf);
  if (s->cmdf && fclose(s->cmdf))
    bad = 1;
  s->cmdf = NULL;
  return bad ? NULL : s->cmd;
}

__attribute__((format(printf, 2, 3))) static void put(sluice_nft *s,
                                                      const char *fmt, ...) {
  va_list ap;
  if (!s->cmdf)
    return;
  va_start(ap, fmt);
  vfprintf(s->cmdf, fmt, ap);
  va_end(ap);
}

static void put_timeout(sluice_nft *s, int64_t end_mono, int64_t now) {
  if (end_mono >= 0) {
    int64_t ms = (end_mono - now + NS_PER_MS - 1) / NS_PER_MS;
    put(s, " timeout %" PRId64 "ms", ms < 1 ? 1 : ms);
  }
}

/* "VERB element inet T SET { e1, e2 timeout Nms, ... }" over the entries
** of one family in l, CHUNK to a command; with `timeouts`, only those that
** are not deletions (a batch's), each with its timeout.  Nothing when none. */
static void put_list(sluice_nft *s, const nft_list *l, const char *verb,
                     int fam, int timeouts, int64_t now) {
  size_t i, k = 0;
  for (i = 0; i < l->cap; i++) {
    const nft_entry *e = &l->e[i];
    if (e->fam != fam || (timeouts && e->op == NFT_DEL))
      continue;
    if (k % CHUNK == 0)
      put(s, "%s%s element inet %s %s { %s", k ? " }\n" : "", verb,
          s->names.table, fam == 4 ? s->names.set4 : s->names.set6, e->elem);
    else
      put(s, ", %s", e->elem);
    if (timeouts)
      put_timeout(s, e->end_mono, now);
    k++;
  }
  if (k)
    put(s, " }\n");
}

/* "add X; delete X; add X timeout T" for every entry of l (choice a),
** "add X; delete X" for its deletions. */
static void put_refresh(sluice_nft *s, const nft_list *l, int64_t now) {
  int fam;
  for (fam = 4; fam <= 6; fam += 2) {
    put_list(s, l, "add", fam, 0, now);
    put_list(s, l, "delete", fam, 0, now);
    put_list(s, l, "add", fam, 1, now);
  }
}

/* ---------------------------------------------------------------- batch --- */

static void apply_batch(sluice_nft *s, size_t n) {
  nft_list *b = &s->pending;
  const char *cmds;
  size_t i, nadd = 0, ndel = 0;
  int64_t now = sluice__nft_mono_ns();
  int rc;
  sluice__nft_list_clear(b);
  for (i = 0; i < n; i++) {
    nft_item *it = &s->batch[i];
    nft_entry *e = NULL;
    char elem[NFT_ELEM_MAX];
    int64_t end = it->ttl_ns < 0 ? -1 : it->enq_mono + it->ttl_ns;
    int f = 0, op = it->op == NFT_ADD && (end < 0 || end > now) ? NFT_ADD
                                                                : NFT_DEL;
    if (it->raw[0])
      f = sluice__nft_element(it->raw, s->prefix6, elem);
    else if (it->op == NFT_DEL && it->scope_id[0] &&
             (e = sluice__nft_list_find_scope(&s->list, it->scope_id))) {
      f = e->fam;
      strcpy(elem, e->elem);
    }
    if (!f) {
      if (it->raw[0])
        atomic_fetch_add_explicit(&s->invalid, 1, memory_order_relaxed);
      continue;
    }
    if (op == NFT_ADD) {
      if (!(e = sluice__nft_list_put(&s->list, elem, f))) {
        atomic_fetch_add_explicit(&s->failed, 1, memory_order_relaxed);
        continue; /* the list is full: not banned, counted */
      }
      snprintf(e->raw, sizeof e->raw, "%s", it->raw);
      if (it->scope_id[0])
        strcpy(e->scope_id, it->scope_id);
      e->end_mono = end;
    } else if ((e = sluice__nft_list_find(&s->list, elem))) {
      sluice__nft_list_del(&s->list, e);
    }
    s->dirty = 1;
    /* One entry per address: the last update wins.  Without memory for
    ** it the list has it and the next resync sends it. */
    if (!(e = sluice__nft_list_put(b, elem, f))) {
      atomic_fetch_add_explicit(&s->failed, 1, memory_order_relaxed);
      continue;
    }
    e->op = op;
    e->end_mono = end;
  }
  atomic_store(&s->elements, s->list.n);
  if (!b->n)
    return;
  for (i = 0; i < b->cap; i++)
    if (b->e[i].fam)
      b->e[i].op == NFT_ADD ? nadd++ : ndel++;
  cmd_reset(s);
  put_refresh(s, b, now);
  cmds = cmd_end(s); /* NULL would tell sluice__nft_run() to free */
  rc = cmds ? sluice__nft_run(s, cmds) : SLUICE_ENOMEM;
  if (rc && rc != SLUICE_ENOMEM && (s->flags & SLUICE_NFT_CREATE) &&
      sluice__nft_create(s) == SLUICE_OK)
    rc = sluice__nft_run(s, cmds);
  atomic_fetch_add_explicit(&s->transactions, 1, memory_order_relaxed);
  if (rc) {
    atomic_fetch_add_explicit(&s->failed, nadd + ndel, memory_order_relaxed);
    return;
  }
  atomic_fetch_add_explicit(&s->added, nadd, memory_order_relaxed);
  atomic_fetch_add_explicit(&s->removed, ndel, memory_order_relaxed);
}

/* --------------------------------------------------------------- resync --- */

static void put_schema(sluice_nft *s) {
  char buf[1024];
  if ((s->flags & SLUICE_NFT_CREATE) &&
      sluice__nft_schema_text(&s->names, buf, sizeof buf, NULL) == 0)
    put(s, "%s", buf);
}

static void run_resync(sluice_nft *s, size_t n) {
  const char *cmds = cmd_end(s);
  int rc = cmds ? sluice__nft_run(s, cmds) : SLUICE_ENOMEM;
  atomic_fetch_add_explicit(&s->transactions, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&s->resyncs, 1, memory_order_relaxed);
  if (rc)
    atomic_fetch_add_explicit(&s->failed, n ? n : 1, memory_order_relaxed);
}

/* Put back what is missing: the schema (SLUICE_NFT_CREATE) and every
** address of the list.  A plain add: an element that is there keeps its
** timeout (another process, `sluice renew`, may have set a later one),
** and elements the list does not know (another worker's sink) stay. */
static void resync(sluice_nft *s) {
  int64_t now = sluice__nft_mono_ns();
  sluice__nft_list_prune(&s->list, now);
  atomic_store(&s->elements, s->list.n);
  cmd_reset(s);
  put_schema(s);
  put_list(s, &s->list, "add", 4, 1, now);
  put_list(s, &s->list, "add", 6, 1, now);
  run_resync(s, s->list.n);
}

/* Ask the store about every address of the list: one still boxed gets the
** box's time left (refreshed, choice a), one that is not leaves the set.
** An address the store cannot be asked about (an outage) keeps what the
** list says.  One transaction. */
static void reconcile(sluice_nft *s, sluice_policy *p) {
  nft_list gone;
  size_t i = 0;
  int64_t now;
  if (sluice__nft_list_init(&gone, s->list.n + 1)) {
    resync(s);
    return;
  }
  while (i < s->list.cap) {
    nft_entry *e = &s->list.e[i];
    sluice_inspect_query q;
    sluice_inspect_report r;
    memset(&q, 0, sizeof q);
    q.scope = SLUICE_SCOPE_IP;
    q.client_ip = e->raw;
    if (!e->fam || !e->raw[0] || sluice_policy_inspect(p, &q, &r)) {
      i++;
      continue;
    }
    s->dirty = 1;
    if (r.level >= s->min_level &&
        (r.box_end_ns == SLUICE_FOREVER || r.box_end_ns > r.now_ns)) {
      e->end_mono = r.box_end_ns == SLUICE_FOREVER
                        ? -1
                        : sluice__nft_mono_ns() + (r.box_end_ns - r.now_ns);
      snprintf(e->scope_id, sizeof e->scope_id, "%s", r.scope_id);
      i++;
    } else {
      nft_entry *g = sluice__nft_list_put(&gone, e->elem, e->fam);
      if (g)
        g->op = NFT_DEL;
      sluice__nft_list_del(&s->list, e); /* slot i may hold another now */
    }
  }
  now = sluice__nft_mono_ns();
  sluice__nft_list_prune(&s->list, now);
  atomic_store(&s->elements, s->list.n);
  cmd_reset(s);
  put_schema(s);
  put_refresh(s, &gone, now);
  put_refresh(s, &s->list, now);
  run_resync(s, s->list.n + gone.n);
  sluice__nft_list_free(&gone);
}

/* --------------------------------------------------------------- thread --- */

static void save(sluice_nft *s, int64_t now) {
  if (!s->dirty || !s->state_path)
    return;
  if (sluice__nft_list_save(&s->list, s->state_path, now,
                            sluice__nft_real_ns()) == SLUICE_OK)
    s->dirty = 0;
  else
    keep_error(s, "state_path: cannot write");
  s->saved_mono = now;
}

static void deadline(struct timespec *ts, int64_t at) {
  ts->tv_sec = (time_t)(at / NS_PER_S);
  ts->tv_nsec = (long)(at % NS_PER_S);
}

void *sluice__nft_thread(void *arg) {
  sluice_nft *s = arg;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    size_t n = 0;
    sluice_policy *p;
    int rs, stopping;
    uint64_t target;
    int64_t now = sluice__nft_mono_ns();
    while (!s->count && !s->reconcile && !s->resync_asked && !s->stop) {
      int64_t at = 0;
      struct timespec ts;
      if (s->next_resync)
        at = s->next_resync;
      if (s->dirty && s->state_path &&
          (!at || s->saved_mono + SAVE_EVERY_NS < at))
        at = s->saved_mono + SAVE_EVERY_NS;
      if (!at) {
        pthread_cond_wait(&s->wake, &s->mu);
        continue;
      }
      if (at <= now)
        break;
      deadline(&ts, at);
      if (pthread_cond_timedwait(&s->wake, &s->mu, &ts) == ETIMEDOUT)
        break;
      now = sluice__nft_mono_ns();
    }
    /* A few updates per hold of the mutex, so that a deciding thread that
    ** queues meanwhile waits for a short copy, not for a whole batch. */
    while (n < s->batch_max && s->count) {
      size_t k = 0;
      while (k < TAKE && n < s->batch_max && s->count) {
        s->batch[n++] = s->ring[s->head];
        s->head = (s->head + 1) % s->qmax;
        s->count--;
        k++;
      }
      if (s->count && n < s->batch_max) {
        pthread_mutex_unlock(&s->mu);
        pthread_mutex_lock(&s->mu);
      }
    }
    p = s->reconcile;
    rs = s->resync_asked;
    s->reconcile = NULL;
    s->resync_asked = 0;
    stopping = s->stop && !s->count;
    target = s->count ? s->applied_seq : s->enq_seq;
    pthread_mutex_unlock(&s->mu);

    now = sluice__nft_mono_ns();
    if (n)
      apply_batch(s, n);
    if (p)
      s->policy = p;
    if (p || (s->policy && s->next_resync && now >= s->next_resync))
      reconcile(s, s->policy);
    else if (rs || (s->next_resync && now >= s->next_resync))
      resync(s);
    if (s->next_resync && (p || rs || now >= s->next_resync))
      s->next_resync = sluice__nft_mono_ns() + s->resync_ns;
    now = sluice__nft_mono_ns();
    if (stopping || now - s->saved_mono >= SAVE_EVERY_NS)
      save(s, now);

    /* A flood's updates gather for a moment into the next transaction
    ** instead of waking the thread one by one. */
    if (n && n < s->batch_max && !stopping) {
      struct timespec gap = {0, GATHER_NS};
      nanosleep(&gap, NULL);
    }
    pthread_mutex_lock(&s->mu);
    if (target > s->applied_seq) {
      s->applied_seq = target;
      pthread_cond_broadcast(&s->done);
    }
    if (stopping)
      break;
  }
  pthread_mutex_unlock(&s->mu);
  sluice__nft_run(s, NULL);
  return NULL;
}
