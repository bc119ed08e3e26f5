/*
** Redis store: pipelined rounds.  Every pending job routed to its node,
** each node's pipeline written before any reply is read, the replies
** settled, and the redirected ones retried in the next round (Round trips
** and Failure in redis_store.c).
*/
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "redis_int.h"

/* ------------------------------------------------------------ rounds --- */

static void job_fail(rcl_store *r, rcl_job *j, int rc) {
  j->rc = rc;
  j->pending = 0;
  if (rc == SLUICE_ETIMEDOUT)
    r->st.timeouts++;
  else if (rc == SLUICE_EUNAVAIL)
    r->st.unavailable++;
}

static int job_slot(const rcl_store *r, const rcl_job *j) {
  return sluice__rcl_jkey_slot(r, j->type == JOB_RUN ? &j->prog->keys[0]
                                                     : j->key);
}

/* Append the node's open batch (if any) to its pipeline: one call of its
** programs (of one, the same call as build_job's: its answer bare, not in
** an array; call_reply takes either). */
static void flush_batch(rcl_store *r, rcl_job *jobs, int *bhead, int ni,
                        rcl_cmd *cmd) {
  int h = bhead[ni];
  if (h < 0)
    return;
  bhead[ni] = -1;
  sluice__rcl_build_batch(cmd, r, jobs, h);
  r->st.batches += jobs[h].batch > 1;
  redisAppendCommandArgv(r->nodes[ni].c, cmd->argc, cmd->argv, cmd->lens);
}

static void settle(rcl_store *r, rcl_job *j, int what, int *reload) {
  if (what == R_DONE) {
    j->pending = 0;
    if (j->rc == SLUICE_EUNAVAIL)
      r->st.unavailable++;
  } else if (what == R_NOSCRIPT) {
    *reload = 1;
  }
}

/* The reply to the call led by jobs[head]: a batch's answer is every
** member's verdict (or error), in order; any other answer (a single
** job's, or an error such as MOVED or NOSCRIPT) applies to every member. */
static void call_reply(rcl_store *r, rcl_job *jobs, int head, int ni,
                       const redisReply *rep, int *reload) {
  int m, whole = jobs[head].batch <= 0 || rep->type != REDIS_REPLY_ARRAY ||
                 rep->elements != (size_t)jobs[head].batch;
  size_t k = 0;
  for (m = head; m >= 0; m = jobs[m].bnext, k++)
    settle(r, &jobs[m],
           sluice__rcl_handle_reply(r, &jobs[m], ni,
                                    whole ? rep : rep->element[k]),
           reload);
}

/* WAIT's reply from node ni: SLUICE_OK when wait_replicas acknowledged
** the writes before it, else SLUICE_EUNAVAIL with the detail set. */
int sluice__rcl_wait_reply(rcl_store *r, int ni, const redisReply *w) {
  if (w->type == REDIS_REPLY_INTEGER && w->integer >= r->wait_replicas)
    return SLUICE_OK;
  return sluice_store_seterr(&r->base, SLUICE_EUNAVAIL, 0,
                             "redis %s:%d: write not acknowledged by %d "
                             "replicas", r->nodes[ni].host, r->nodes[ni].port,
                             r->wait_replicas);
}

/* One reply from node ni into *rep: 0, or the code the node's link failure
** maps to (the node is marked down); a NULL reply is a failure too. */
static int read_reply(rcl_store *r, int ni, void **rep) {
  errno = 0;
  if (sluice__rcl_link_reply(r->nodes[ni].c, r->nodes[ni].tls, rep) !=
          REDIS_OK ||
      !*rep)
    return sluice__rcl_node_io_error(r, ni, errno);
  return 0;
}

/* One round: route every pending job, write each node's pipeline, then
** read the replies node by node.  Jobs that must be retried stay pending.
** Consecutive programs of one node (and, in a cluster, one slot: a call's
** keys must share it) go as one call, up to RCL_BATCH_MAX of them and as
** many records and numbers as a call holds. */
static void run_round(rcl_store *r, rcl_job *jobs, int n, rcl_cmd *cmd) {
  /* Zeroed: gcc -O3 cannot see that used[k] is read only below nused. */
  int used[RCL_MAX_NODES] = {0}, nused = 0, i, k;
  int nerr[RCL_MAX_NODES];      /* per node: 0, or the error of this round */
  int reload[RCL_MAX_NODES];    /* per node: a NOSCRIPT was seen */
  int bhead[RCL_MAX_NODES];     /* per node: leader of the open batch, -1 */
  int btail[RCL_MAX_NODES];
  memset(nerr, 0, sizeof nerr);
  memset(reload, 0, sizeof reload);
  for (k = 0; k < RCL_MAX_NODES; k++)
    bhead[k] = -1;

  for (i = 0; i < n; i++) {
    rcl_job *j = &jobs[i];
    int ni;
    j->sent = 0;
    j->batch = 0;
    j->bnext = -1;
    if (!j->pending)
      continue;
    if (r->cluster && j->slot < 0)
      j->slot = job_slot(r, j);
    ni = j->ask_node >= 0 ? j->ask_node
         : r->cluster    ? r->slot_node[j->slot]
                         : r->slot_node[0];
    if (ni == RCL_NO_NODE || ni >= r->nnodes) {
      r->map_stale = 1;
      if (r->map_ok) /* else keep why no seed answered */
        sluice_store_seterr(&r->base, SLUICE_EUNAVAIL, 0,
                            "redis: no node serves slot %d", j->slot);
      job_fail(r, j, SLUICE_EUNAVAIL);
      continue;
    }
    j->node = ni;
    for (k = 0; k < nused && used[k] != ni; k++)
      ;
    if (k == nused) {
      int rc = sluice__rcl_node_connect(r, ni);
      used[nused++] = ni;
      if (rc != SLUICE_OK) {
        r->map_stale = 1;
        nerr[ni] = rc;
      }
    }
    if (nerr[ni] < 0) {
      job_fail(r, j, nerr[ni]);
      continue;
    }
    r->st.ops++;
    if (j->type == JOB_RUN && j->ask_node < 0) {
      int h = bhead[ni], nums = sluice__rcl_prog_nums(j->prog);
      j->sent = 1;
      if (h >= 0 && jobs[h].batch < RCL_BATCH_MAX &&
          jobs[h].bkeys + j->prog->nkeys <= SLUICE_PROGRAM_KEYS &&
          jobs[h].bnums + nums <= RCL_MAX_NUMS &&
          (!r->cluster || jobs[h].slot == j->slot)) {
        jobs[btail[ni]].bnext = i;
        btail[ni] = i;
        jobs[h].batch++;
        jobs[h].bkeys += j->prog->nkeys;
        jobs[h].bnums += nums;
        j->batch = -1;
        continue;
      }
      flush_batch(r, jobs, bhead, ni, cmd);
      bhead[ni] = btail[ni] = i;
      j->batch = 1;
      j->bkeys = j->prog->nkeys;
      j->bnums = nums;
      continue;
    }
    flush_batch(r, jobs, bhead, ni, cmd);
    if (j->ask_node >= 0)
      redisAppendCommand(r->nodes[ni].c, "ASKING");
    sluice__rcl_build_job(cmd, r, j);
    redisAppendCommandArgv(r->nodes[ni].c, cmd->argc, cmd->argv, cmd->lens);
    j->sent = 1 + (j->ask_node >= 0);
    j->ask_node = -1;
  }
  for (k = 0; k < nused; k++)
    if (nerr[used[k]] == 0)
      flush_batch(r, jobs, bhead, used[k], cmd);
  /* Append WAIT, then write every pipeline before reading any reply, so
  ** the nodes work in parallel. */
  for (k = 0; k < nused; k++) {
    int ni = used[k], done = 0, e;
    if (nerr[ni] < 0 || !r->nodes[ni].c)
      continue;
    if (r->wait_replicas > 0)
      redisAppendCommand(r->nodes[ni].c, "WAIT %d %d", r->wait_replicas,
                         r->conf->timeout_ms);
    errno = 0;
    while (!done) {
      if (sluice__rcl_link_write(r->nodes[ni].c, r->nodes[ni].tls, &done) !=
          REDIS_OK) {
        e = errno;
        nerr[ni] = sluice__rcl_node_io_error(r, ni, e);
        break;
      }
    }
  }
  for (k = 0; k < nused; k++) {
    int ni = used[k], err = nerr[ni];
    r->st.round_trips++;
    for (i = 0; i < n; i++) {
      rcl_job *j = &jobs[i];
      void *rep = NULL;
      int m;
      if (!j->sent || j->node != ni || j->batch < 0)
        continue;
      if (err == 0 && j->sent == 2) { /* the ASKING reply */
        err = read_reply(r, ni, &rep);
        if (err == 0) {
          freeReplyObject(rep);
          rep = NULL;
        }
      }
      if (err == 0)
        err = read_reply(r, ni, &rep);
      if (err != 0) {
        for (m = i; m >= 0; m = jobs[m].bnext)
          job_fail(r, &jobs[m], err);
        continue;
      }
      call_reply(r, jobs, i, ni, rep, &reload[ni]);
      freeReplyObject(rep);
    }
    if (err == 0 && r->wait_replicas > 0 && r->nodes[ni].c) {
      void *rep = NULL;
      int short_rc = err = read_reply(r, ni, &rep);
      if (err == 0) {
        short_rc = sluice__rcl_wait_reply(r, ni, rep);
        freeReplyObject(rep);
      }
      for (i = 0; i < n && short_rc != SLUICE_OK; i++)
        if (jobs[i].sent && jobs[i].node == ni && !jobs[i].pending &&
            jobs[i].rc == SLUICE_OK)
          job_fail(r, &jobs[i], short_rc);
    }
    if (err == 0 && reload[ni]) {
      int rc = sluice__rcl_load_script(r, ni);
      if (rc != SLUICE_OK)
        for (i = 0; i < n; i++)
          if (jobs[i].pending && jobs[i].sent && jobs[i].node == ni)
            job_fail(r, &jobs[i], rc);
    }
  }
}

int sluice__rcl_run_jobs(rcl_store *r, rcl_job *jobs, int n) {
  rcl_cmd *cmd = &r->cmd;
  int round, i, left;
  sluice__rcl_fork_check(r);
  sluice__rcl_maybe_refresh(r);
  for (i = 0; i < n; i++) {
    jobs[i].pending = 1;
    jobs[i].ask_node = -1;
    jobs[i].rc = SLUICE_EUNAVAIL;
    /* A single server serves every slot: hash only in cluster mode (a
    ** MOVED can switch it on; run_round then hashes). */
    jobs[i].slot = r->cluster ? job_slot(r, &jobs[i]) : -1;
  }
  for (round = 0; round < RCL_ROUNDS; round++) {
    if (round > 0)
      sluice__rcl_maybe_refresh(r);
    run_round(r, jobs, n, cmd);
    for (i = 0, left = 0; i < n; i++)
      left += jobs[i].pending;
    if (!left)
      break;
  }
  for (i = 0; i < n; i++)
    if (jobs[i].pending) {
      sluice_store_seterr(&r->base, SLUICE_EUNAVAIL, 0,
                          "redis: redirections or TRYAGAIN exhausted");
      job_fail(r, &jobs[i], SLUICE_EUNAVAIL);
    }
  return SLUICE_OK;
}
