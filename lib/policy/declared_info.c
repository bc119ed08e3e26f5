/*
** The declared limits of an open policy, read back for tools (`sluice
** replay --policy` checks a log's columns against the file's attributes;
** `sluice inspect --limit` reads a limit's state for one scope): the
** limits, penalties and attributes the file declares, and one limit's
** records read without changing them.
**
** The keys and the parameter set are declared.c's own (sluice__decl_keys),
** so what is read is exactly what a decision of that request writes.  A
** bucket or window is read with its PEEK step on a copy; a lease slot is
** its holder and end, as inspect.c reads the ledger's leases.  A record
** the parameters could not have written (a bucket full later than an
** empty one takes, a window counting past its limit) is flagged unfit: the
** configuration given is not the one that wrote it.
*/
#include <string.h>

#include "declared.h"
#include "flow.h"
#include "wide.h"
#include "op.h"

static void limit_info(const sluice__decl *dl, const sluice__limit *lm,
                       sluice_declared_info *out) {
  int j;
  out->name = lm->name;
  out->unit = lm->unit;
  out->algorithm = sluice__limit_algo_name(lm->algo);
  out->status = lm->status;
  out->nscope = lm->nscope;
  for (j = 0; j < lm->nscope; j++)
    out->scope[j] = sluice__attr_name(dl, lm->scope[j]);
  out->by = lm->select >= 0 ? sluice__attr_name(dl, lm->select) : NULL;
}

int sluice_policy_declared_at(const sluice_policy *p, int kind, int i,
                              sluice_declared_info *out) {
  const sluice__decl *dl;
  int n;
  if (!p || !out || kind < SLUICE_DECLARED_LIMIT ||
      kind > SLUICE_DECLARED_ATTRIBUTE)
    return SLUICE_EINVAL;
  dl = p->decl;
  n = !dl                               ? 0
      : kind == SLUICE_DECLARED_LIMIT   ? dl->nlimits
      : kind == SLUICE_DECLARED_PENALTY ? dl->npenalties
                                        : dl->nattrs;
  if (i < 0 || i >= n)
    return SLUICE_ENOTFOUND;
  memset(out, 0, sizeof *out);
  if (kind == SLUICE_DECLARED_LIMIT)
    limit_info(dl, &dl->limits[i], out);
  else if (kind == SLUICE_DECLARED_PENALTY)
    out->name = dl->penalties[i].name;
  else
    out->name = dl->attr[i];
  return SLUICE_OK;
}

static int limit_index(const sluice_policy *p, const char *name) {
  int i;
  for (i = 0; p->decl && i < p->decl->nlimits; i++)
    if (!strcmp(p->decl->limits[i].name, name))
      return i;
  return -1;
}

int sluice__inspect_ctx(sluice_policy *p, const sluice_request *req,
                        sluice__ctx *c, sluice_decision *d,
                        const char **field) {
  /* A tier the policy does not know, as sluice_policy_decide() says. */
  if (req->tier && sluice__policy_tier(p, req->tier) < 0) {
    if (field)
      *field = "tier";
    return SLUICE_ENOTFOUND;
  }
  memset(c, 0, sizeof *c);
  memset(d, 0, sizeof *d);
  c->p = p;
  c->req = req;
  c->droute = sluice__decl_match(p, req);
  c->now = sluice_limiter_now(p->lim);
  return SLUICE_OK;
}

int sluice__inspect_limit(sluice_policy *p, const char *limit,
                          const sluice_request *req, sluice_limit_state *out,
                          const char **field) {
  sluice__ctx c;
  sluice__prog g;
  sluice_decision d;
  const sluice__lparams *ps;
  const sluice__limit *lm;
  sluice_limit_state st;
  int li, nrec, i, rc, err = 0, got;
  if (field)
    *field = NULL;
  if (!p || !limit || !req || !out)
    return SLUICE_EINVAL;
  if ((li = limit_index(p, limit)) < 0)
    return SLUICE_ENOTFOUND;
  if ((rc = sluice__inspect_ctx(p, req, &c, &d, field)))
    return rc;
  lm = &p->decl->limits[li];
  rc = sluice__decl_keys(&c, li, &g, &nrec, &ps, &d);
  if (rc != SLUICE_OK) {
    if (field)
      *field = d.invalid_field;
    return rc;
  }
  memset(&st, 0, sizeof st);
  st.now_ns = c.now;
  if (lm->algo == SLUICE__L_CONCURRENCY && ps->l.max > SLUICE_GROUP_MAX) {
    /* A counted set: a release of id 1 (which names a bucket long ended)
    ** changes nothing and reports the live count and the last end. */
    sluice_state s, o;
    sluice_verdict v;
    if ((got = sluice__inspect_get(p, g.keys[0], &s, &err)) < 0)
      return err;
    st.present = got;
    st.quota = ps->l.max;
    if (sluice__lease_step(&ps->l, &s, c.now, SLUICE_OP_LEASE_RELEASE, 1, &o,
                          &v) != SLUICE_OK) {
      st.unfit = 1;
    } else {
      st.held = (int)(ps->l.max - v.remaining);
      st.remaining = v.remaining;
      st.reset_ns = v.reset_ns;
      /* Later than a lease's TTL and its bucket: another TTL wrote it. */
      if (v.reset_ns > ps->l.ttl_ns + ps->l.ttl_ns / 3 + 4 * 1000000)
        st.unfit = 1;
    }
  } else if (lm->algo == SLUICE__L_CONCURRENCY || lm->algo == SLUICE__L_LOCK) {
    int64_t last = 0;
    st.quota = ps->l.max;
    for (i = 0; i < nrec; i++) {
      sluice_state s;
      if ((got = sluice__inspect_get(p, g.keys[i], &s, &err)) < 0)
        return err;
      st.present |= got;
      if (s.w[0] != 0 && (int64_t)s.w[1] > c.now) {
        st.held++;
        if ((int64_t)s.w[1] - c.now > last)
          last = (int64_t)s.w[1] - c.now;
        /* A lease longer than its TTL from now: another TTL wrote it. */
        if ((int64_t)s.w[1] - c.now > ps->l.ttl_ns)
          st.unfit = 1;
      }
    }
    if (st.held > st.quota) /* a lock of one record holds one lease */
      st.unfit = 1;
    st.remaining = st.quota - st.held < 0 ? 0 : st.quota - st.held;
    st.reset_ns = last;
  } else {
    sluice_state s, o;
    sluice_verdict v;
    int step;
    if ((got = sluice__inspect_get(p, g.keys[0], &s, &err)) < 0)
      return err;
    st.present = got;
    if (lm->algo == SLUICE__L_GCRA) {
      st.quota = ps->g.burst;
      st.window_ns = sluice__clamp64((sluice__i128)ps->g.burst *
                                     ps->g.period_ns / ps->g.rate);
      step = sluice__gcra_step(&ps->g, &s, c.now, SLUICE_OP_PEEK, 0, &o, &v);
    } else {
      st.quota = ps->w.limit;
      st.window_ns = ps->w.window_ns;
      step = lm->algo == SLUICE__L_SLIDING
                 ? sluice__swindow_step(&ps->w, &s, c.now, SLUICE_OP_PEEK, 0,
                                       &o, &v)
                 : sluice__fwindow_step(&ps->w, &s, c.now, SLUICE_OP_PEEK, 0,
                                       &o, &v);
    }
    if (step != SLUICE_OK) {
      st.unfit = 1;
    } else {
      st.remaining = v.remaining;
      st.reset_ns = v.reset_ns;
      /* Full later than an empty bucket takes to fill, or a window reset
      ** beyond two of its lengths: other parameters wrote it. */
      if (lm->algo == SLUICE__L_GCRA && v.reset_ns > st.window_ns + 1)
        st.unfit = 1;
      if (lm->algo != SLUICE__L_GCRA && v.reset_ns > 2 * st.window_ns)
        st.unfit = 1;
    }
  }
  *out = st;
  return SLUICE_OK;
}
