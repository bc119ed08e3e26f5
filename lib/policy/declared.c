/*
** Running a route of declared limits (declared.h): the request's attributes
** into each limit's parameter set, cost and keys, the limits as the steps
** of one program per hash-tag group (declared_conf.c, "Hash-tag groups"),
** and the programs' results into the decision.  In each group's program:
**
**   limit 0   its step over its record(s)   gate, always
**   limit i   its step                      gate, if every earlier passed
**
** A gate's denial undoes what the steps before it wrote, inside the one
** atomic call.  The groups run one after the other; the first that
** refuses ends the request, and the groups before it get back what they
** took, each in one more call (give_back(): a count ADJUSTed out of the
** window it went into, a bucket refunded, a lease released).  So a refused
** request is charged nothing by any limit once decided (README.md's
** invariant: a denied request consumes nothing); a concurrent request may meanwhile
** find a group charged and be refused, never admitted beyond a limit (each
** limit is decided inside its own group's call).  The binding limit is the
** one that refused, or, when every limit passed, the one with the least
** left as a fraction of its own limit (the first of equals).
**
** Keys (keys.c spells them): dl:{TAG}BODY, TAG the keyed hash of the
** scope's first attribute (name and value), BODY "n" and the limit's name
** for a scope of that attribute alone, else "h" and the keyed hash of the
** limit's name and its other attributes (a penalty's: of its name and
** every attribute, the box's id); a lease set's slot i appends ":i".  The
** attribute's name in each hash keeps two attributes with equal values
** apart.
*/
#include <string.h>

#include "declared.h"
#include "flow.h"
#include "keys.h"
#include "scope_id.h"
#include "wide.h"
#include "siphash.h"

int sluice__decl_match(const sluice_policy *p, const sluice_request *q) {
  const sluice__decl *dl = p->decl;
  const char *method = q->method, *route = q->route;
  int i;
  if (!dl || !method || !route)
    return -1;
  for (i = 0; i < dl->nroutes; i++) {
    const sluice__droute *dr = &dl->routes[i];
    /* The pattern's literal head first: a path that does not start with
    ** it never matches (a pattern has no '?', so neither has the path
    ** there). */
    if (strncmp(route, dr->route, dr->lit) != 0 ||
        !sluice__route_match(dr->method, dr->route, method, route))
      continue;
    if (dr->when) {
      /* The request's own attributes (a settle's report never moves it
      ** to another route), and this route's path parameters. */
      sluice__ctx c;
      memset(&c, 0, sizeof c);
      c.p = (sluice_policy *)p;
      c.req = q;
      c.droute = i;
      if (!sluice__match_ok(&c, dr->when))
        continue;
    }
    return i;
  }
  return -1;
}

int sluice__decl_exempt(const sluice__ctx *c) {
  const sluice__droute *dr;
  if (c->droute < 0)
    return 0;
  dr = &c->p->decl->routes[c->droute];
  return dr->n == 0 && dr->pen == 0;
}

/* Attribute a's value for this request (NULL: not given), its length in
** *n. */
static const char *attr_value(const sluice__ctx *c, int a, size_t *n) {
  const sluice_request *q = c->req;
  const char *v = NULL;
  size_t i;
  switch (a) {
  case SLUICE__A_TENANT:
    v = q->tenant_id;
    break;
  case SLUICE__A_KEY:
    v = q->api_key_id;
    break;
  case SLUICE__A_IP:
    v = q->client_ip;
    break;
  case SLUICE__A_METHOD:
    v = q->method;
    break;
  case SLUICE__A_ROUTE:
    if ((v = q->route) != NULL) {
      *n = strcspn(v, "?");
      return v;
    }
    break;
  case SLUICE__A_PATTERN:
    v = c->droute >= 0 ? c->p->decl->routes[c->droute].route : NULL;
    break;
  case SLUICE__A_TIER:
    v = q->tier;
    break;
  default: {
    const char *name = c->p->decl->attr[a - SLUICE__A__BUILTIN];
    for (i = 0; i < c->nsettle; i++) /* a settle's report comes first */
      if (!strcmp(c->settle[i].name, name)) {
        v = c->settle[i].value;
        break;
      }
    for (i = 0; !v && i < q->nattrs && q->attrs; i++)
      if (q->attrs[i].name && !strcmp(q->attrs[i].name, name)) {
        v = q->attrs[i].value;
        break;
      }
    /* Not given: the route pattern's `{name}` segment, if it has one. */
    if (!v && c->droute >= 0 &&
        (v = sluice__route_param(c->p->decl->routes[c->droute].route,
                                 q->route, name, n)) != NULL)
      return v;
  }
  }
  if (v)
    *n = strnlen(v, SLUICE_POLICY_ID_MAX + 1);
  return v;
}

const char *sluice__decl_attr_value(const sluice__ctx *c, int a, size_t *n) {
  return attr_value(c, a, n);
}

/* 1 when attribute a, first in a scope, is unauthenticated input, so
** that the records it keys are strangers' (their own bound in a store of
** finite room, docs/backends.md "Record classes"): the client address, an
** attribute the file lists in `untrusted`, or a path parameter the caller
** did not give (anyone can write any path). */
static int untrusted(const sluice__ctx *c, int a) {
  const sluice_request *q = c->req;
  const char *name;
  size_t i, n;
  if (a == SLUICE__A_IP)
    return 1;
  if (a < SLUICE__A__BUILTIN || c->droute < 0)
    return 0;
  if (c->p->decl->untrusted >> (a - SLUICE__A__BUILTIN) & 1u)
    return 1;
  name = c->p->decl->attr[a - SLUICE__A__BUILTIN];
  for (i = 0; i < q->nattrs && q->attrs; i++)
    if (q->attrs[i].name && !strcmp(q->attrs[i].name, name))
      return 0;
  return sluice__route_param(c->p->decl->routes[c->droute].route, q->route,
                             name, &n) != NULL;
}

int sluice__decl_group_class(const sluice__ctx *c, int tg) {
  const sluice__droute *dr = &c->p->decl->routes[c->droute];
  const sluice__penalty *pn =
      dr->gpen[tg] ? &c->p->decl->penalties[dr->gpen[tg] - 1] : NULL;
  size_t n = 0;
  const char *v;
  int i;
  if (!untrusted(c, dr->tgattr[tg]))
    return SLUICE_CLASS_SERVICE;
  /* A report that names a known client's failure keeps its records. */
  if (pn && pn->nkept && (v = attr_value(c, pn->report, &n)))
    for (i = 0; i < pn->nkept; i++)
      if (strlen(pn->kept[i]) == n && !memcmp(pn->kept[i], v, n))
        return SLUICE_CLASS_UNTRUSTED_KEPT;
  return SLUICE_CLASS_UNTRUSTED;
}

/* A decimal attribute (ranges and caller costs): 0..2^62. */
static int attr_int(const sluice__ctx *c, int a, int64_t *out) {
  size_t n = 0, i;
  const char *v = attr_value(c, a, &n);
  int64_t x = 0;
  if (!v || n == 0 || n > 18)
    return 0;
  for (i = 0; i < n; i++) {
    if (v[i] < '0' || v[i] > '9')
      return 0;
    x = x * 10 + (v[i] - '0');
  }
  *out = x;
  return 1;
}

static int is_lease(int algo);

static const sluice__lparams *pick_set(const sluice__ctx *c,
                                       const sluice__limit *lm) {
  const char *v;
  size_t n = 0;
  int i, a = lm->psw[0].attr[0];
  for (i = 0; i < lm->npsets; i++)
    if (lm->psw[i].n != 1 || lm->psw[i].attr[0] != a)
      break;
  if (i < lm->npsets) { /* sets of several attributes */
    for (i = 0; i < lm->npsets; i++) /* the first set the request matches */
      if (sluice__match_ok(c, &lm->psw[i]))
        return &lm->ps[i];
    return &lm->base;
  }
  /* Every set by one attribute (`by`, the usual form): its value read
  ** once, not once a set. */
  if (!(v = attr_value(c, a, &n)) || n == 0)
    return &lm->base;
  for (i = 0; i < lm->npsets; i++)
    if (sluice__match_value(lm->psw[i].val[0], v, n))
      return &lm->ps[i];
  return &lm->base;
}

/* Limit lm's parameter set for this request. */
static const sluice__lparams *pick1(const sluice__ctx *c,
                                    const sluice__limit *lm) {
  return lm->npsets == 0 ? &lm->base : pick_set(c, lm);
}

void sluice__decl_pick(sluice__ctx *c) {
  const sluice__droute *dr = &c->p->decl->routes[c->droute];
  int i;
  for (i = 0; i < dr->n; i++) {
    const sluice__limit *lm = &c->p->decl->limits[dr->limit[i]];
    /* c->tier is the request's tier, resolved (request.c). */
    if (lm->bytier && c->tier >= 0)
      c->ps[i] = lm->tierset[c->tier] < 0 ? &lm->base
                                          : &lm->ps[lm->tierset[c->tier]];
    else
      c->ps[i] = pick1(c, lm);
  }
}

/* Limit lm's set for each tier, when its sets are chosen by the tier
** alone: what pick_set() finds for a request naming that tier. */
static void tier_sets(const sluice_policy *p, sluice__limit *lm) {
  int i, t;
  lm->bytier = lm->npsets > 0;
  for (i = 0; i < lm->npsets; i++)
    lm->bytier &= lm->psw[i].n == 1 && lm->psw[i].attr[0] == SLUICE__A_TIER;
  for (t = 0; lm->bytier && t < p->cfg.ntiers; t++) {
    const char *name = p->cfg.tiers[t].name;
    lm->tierset[t] = -1;
    for (i = 0; i < lm->npsets && lm->tierset[t] < 0; i++)
      if (name[0] && sluice__match_value(lm->psw[i].val[0], name, strlen(name)))
        lm->tierset[t] = (signed char)i;
  }
}

/* Limit i of the route's parameter set: a decision asks for each several
** times (its step, its report, the binding one's answer), and matching a
** set reads attributes, so they are picked once a request. */
static inline const sluice__lparams *pick(const sluice__ctx *c, int i) {
  return c->ps[i];
}

/* The cost of limit k of the route; 0 with d->invalid_field on a bad
** attribute. */
static int cost_of(const sluice__ctx *c, const sluice__cost *co,
                   const sluice__limit *lm, int k, int64_t *out,
                   sluice_decision *d) {
  int64_t v;
  int i;
  switch (co->kind) {
  case SLUICE__C_METHOD:
    *out = co->value;
    for (i = 0; i < co->n; i++)
      if (c->req->method && !strcmp(co->e[i].method, c->req->method))
        *out = co->e[i].cost;
    return SLUICE_OK;
  case SLUICE__C_RANGE:
    if (!attr_int(c, co->attr, &v)) {
      size_t n = 0;
      /* An optional attribute not given reads as 0: the first range. */
      if (!sluice__decl_optional(c->p->decl, co->attr) ||
          (sluice__decl_attr_value(c, co->attr, &n) && n)) {
        d->invalid_field = sluice__attr_name(c->p->decl, co->attr);
        return SLUICE_EINVAL;
      }
      v = 0;
    }
    if (v < 0) { /* a range is of a size or a length: never below 0 */
      d->invalid_field = sluice__attr_name(c->p->decl, co->attr);
      return SLUICE_EINVAL;
    }
    *out = co->value;
    for (i = co->n - 1; i >= 0; i--)
      if (v <= co->e[i].upto)
        *out = co->e[i].cost;
    return SLUICE_OK;
  case SLUICE__C_ATTR:
    if (!attr_int(c, co->attr, &v)) {
      d->invalid_field = sluice__attr_name(c->p->decl, co->attr);
      return SLUICE_EINVAL;
    }
    if (v < (c->settle ? 0 : 1) || v > co->max ||
        (lm->algo == SLUICE__L_GCRA && v > pick(c, k)->g.burst) ||
        (lm->algo != SLUICE__L_GCRA && v > pick(c, k)->w.limit)) {
      d->invalid_field = sluice__attr_name(c->p->decl, co->attr);
      return SLUICE_ERANGE;
    }
    *out = v;
    return SLUICE_OK;
  default:
    *out = co->value;
    return SLUICE_OK;
  }
}

int sluice__decl_cost(const sluice__ctx *c, int64_t *cost,
                      sluice_decision *d) {
  const sluice__droute *dr = &c->p->decl->routes[c->droute];
  const sluice__limit *lm;
  *cost = dr->n > 0; /* a route of boxes alone charges nothing */
  if (dr->n == 0) /* (a file may declare no limits: no array to index) */
    return SLUICE_OK;
  lm = &c->p->decl->limits[dr->limit[0]];
  if (lm->algo == SLUICE__L_CAP || is_lease(lm->algo))
    return SLUICE_OK; /* a lease, a count: 1 */
  return cost_of(c, &dr->cost[0], lm, 0, cost, d);
}

/* Attribute a's value as "name=value\x1f" into buf (room for any),
** returning its length; 0 with d->invalid_field when it is missing (EINVAL)
** or empty or too long (EKEY), *rc saying which. */
static size_t scope_part(const sluice__ctx *c, int a, char *buf, int *rc,
                         sluice_decision *d) {
  size_t n = 0, al;
  const char *v = attr_value(c, a, &n);
  char ipn[SLUICE__IP_NAME];
  if (!v || n == 0 || n > SLUICE_POLICY_ID_MAX) {
    d->invalid_field = sluice__attr_name(c->p->decl, a);
    *rc = v ? SLUICE_EKEY : SLUICE_EINVAL;
    return 0;
  }
  /* An IPv6 client counts by its prefix, as everywhere in the policy. */
  if (a == SLUICE__A_IP) {
    v = sluice__ip_name(c->p, v, ipn);
    n = strlen(v);
  }
  if (a < SLUICE__A__BUILTIN) { /* a fixed copy, its padding overwritten */
    memcpy(buf, sluice__builtin_attrs[a].name, 8);
    al = sluice__builtin_attrs[a].len;
  } else {
    const char *an = sluice__attr_name(c->p->decl, a);
    al = strlen(an);
    memcpy(buf, an, al);
  }
  buf[al] = '=';
  memcpy(buf + al + 1, v, n);
  buf[al + 1 + n] = '\x1f';
  return al + n + 2;
}

/* Attribute a's id for this request: the keyed hash of scope_part()'s
** "name=value\x1f", made at its first use and kept in the context, so a
** value several scopes name (the tenant of a route's tag and of its
** penalty's id, the key of a bucket and of a box) is hashed once. */
static int attr_id(sluice__ctx *c, int a, const uint64_t **out,
                   sluice_decision *d) {
  char buf[SLUICE_POLICY_ID_MAX + SLUICE__DNAME + 2];
  size_t n;
  int rc = SLUICE_OK;
  if (!(c->aid_have >> a & 1u)) {
    if (!(n = scope_part(c, a, buf, &rc, d)))
      return rc;
    sluice__siphash128(c->p->secret, buf, n, (uint8_t *)c->aid[a]);
    c->aid_have |= 1u << a;
  }
  *out = c->aid[a];
  return SLUICE_OK;
}

/* The events' tenant scope id (sluice_event.tenant_scope_id, a webhook's
** per-tenant group): sluice_scope_id() of the request's tenant, as
** `sluice release` writes it in its audit record; NULL when the request
** names no tenant.  Spelled only when an event needs it. */
const char *sluice__decl_tenant_hex(sluice__ctx *c) {
  const char *v = c->req ? c->req->tenant_id : NULL;
  if (!c->T[0] && v && v[0] &&
      sluice_scope_id(c->p->secret, v, strlen(v), c->T) != SLUICE_OK)
    c->T[0] = '\0';
  return c->T[0] ? c->T : NULL;
}

_Static_assert(SLUICE__A__BUILTIN + SLUICE__ATTRS_MAX <= SLUICE__AID_MAX &&
                   SLUICE__AID_MAX <= 32,
               "flow.h's attribute ids: one for each attribute, one bit each");

void sluice__decl_keyed(sluice__decl *dl, const uint8_t secret[16]) {
  int i;
  for (i = 0; i < dl->nlimits; i++)
    sluice__siphash128(secret, dl->limits[i].name, strlen(dl->limits[i].name),
                      (uint8_t *)dl->limits[i].nid);
  for (i = 0; i < dl->npenalties; i++)
    sluice__siphash128(secret, dl->penalties[i].name,
                      strlen(dl->penalties[i].name),
                      (uint8_t *)dl->penalties[i].nid);
}

/* The keys' parts of one decision: TAG, the first scope attribute's id
** (every limit of a route's hash-tag group starts with the same one, so
** it is spelled once), and each limit's BODY: "n" and its name for a
** scope of that attribute alone (nothing more to hide), else "h" and the
** id of the limit's name with its other attributes' ids folded in, in
** the scope's order (sluice__id_fold(); a penalty's: every attribute's).
** The ids are kept as they came (the settle check folds them, a
** penalty's id spells its body's in hex) and spelled in the key in
** base64url. */
typedef struct sluice__keyparts {
  uint64_t tagh[2];             /* the tag's id */
  uint64_t bodyh[2];            /* the body's id ("h" bodies) */
  char tag[SLUICE__ID64_LEN];   /* the tag's id in base64url */
  int tagged;                   /* tag computed */
  char body[1 + SLUICE__DNAME]; /* "h" + an id, or "n" + a name */
  size_t bodylen;
  int folded; /* its tag folded into the settle check (fold_scope()) */
} keyparts;

static int scope_ids(sluice__ctx *c, const char *name, const uint64_t nid[2],
                     const int *scope, int nscope, int hashed, keyparts *kp,
                     sluice_decision *d) {
  const uint64_t *id;
  size_t len;
  int i, rc;
  if (!kp->tagged) {
    if ((rc = attr_id(c, scope[0], &id, d)))
      return rc;
    kp->tagh[0] = id[0];
    kp->tagh[1] = id[1];
    sluice__id_b64((const uint8_t *)kp->tagh, kp->tag);
    kp->tagged = 1;
  }
  if (nscope == 1 && !hashed) {
    len = strlen(name);
    kp->body[0] = 'n';
    memcpy(kp->body + 1, name, len);
    kp->bodylen = len + 1;
    return SLUICE_OK;
  }
  /* A limit's key has the first attribute in its TAG already: its BODY
  ** folds the others in.  A penalty's BODY is its id too: all of them. */
  kp->bodyh[0] = nid[0];
  kp->bodyh[1] = nid[1];
  for (i = hashed ? 0 : 1; i < nscope; i++) {
    if ((rc = attr_id(c, scope[i], &id, d)))
      return rc;
    sluice__id_fold(kp->bodyh, id);
  }
  kp->body[0] = 'h';
  sluice__id_b64((const uint8_t *)kp->bodyh, kp->body + 1);
  kp->bodylen = 1 + SLUICE__ID64_LEN;
  return SLUICE_OK;
}

/* A request's key parts, each hashed once whatever calls need them (the
** check of a route spanning groups, each group's program, a give-back):
** per hash-tag group its tag (and a penalty's body), per limit of the
** route its tag and body. */
typedef struct sluice__kcache {
  keyparts g[SLUICE__TG_MAX];
  keyparts l[SLUICE__RLIMITS_MAX];
  unsigned have; /* bit i: l[i] is computed */
} kcache;

static void kcache_init(kcache *kc, const sluice__droute *dr) {
  int k;
  kc->have = 0;
  for (k = 0; k < dr->ntg; k++) /* cheaper than clearing the buffers */
    kc->g[k].tagged = kc->g[k].folded = 0;
}

/* Limit i's key parts for a route spanning groups: computed at the
** first call, kept for the next (its check, its give-back). */
static int kept_parts(sluice__ctx *c, kcache *kc, int i,
                      const sluice__limit *lm, const keyparts **out,
                      sluice_decision *d) {
  const sluice__droute *dr = &c->p->decl->routes[c->droute];
  keyparts *gk = &kc->g[dr->tg[i]];
  int rc;
  if (!(kc->have >> i & 1u)) {
    if ((rc = scope_ids(c, lm->name, lm->nid, lm->scope, lm->nscope, 0, gk,
                        d)))
      return rc;
    kc->l[i] = *gk;
    kc->have |= 1u << i;
  }
  *out = &kc->l[i];
  return SLUICE_OK;
}

/* Limit i (lm) of the route's key parts.  A route of one group asks once
** for each: they are read where they are made, in the group's parts,
** valid until its next limit's. */
static inline int limit_parts(sluice__ctx *c, kcache *kc, int i,
                              const sluice__limit *lm, const keyparts **out,
                              sluice_decision *d) {
  if (c->p->decl->routes[c->droute].ntg == 1) {
    *out = &kc->g[0];
    return scope_ids(c, lm->name, lm->nid, lm->scope, lm->nscope, 0,
                     &kc->g[0], d);
  }
  return kept_parts(c, kc, i, lm, out, d);
}

/* The key of a limit's (or a penalty's) record: keys.c's layout. */
static sluice_key dkey(char *out, const keyparts *kp, int slot, char sfx) {
  return sluice__key_declared(out, kp->tag, kp->body, kp->bodylen, slot, sfx);
}

int sluice__decl_pen_recs(sluice__ctx *c, const sluice__penalty *pn,
                          sluice__prog *g, int notice,
                          char id[SLUICE_SCOPE_ID_LEN + 1],
                          struct sluice__keyparts *shared,
                          sluice_decision *d) {
  keyparts own = {{0}}, *kp = shared ? shared : &own;
  int rc;
  if ((rc = scope_ids(c, pn->name, pn->nid, pn->scope, pn->nscope, 1, kp,
                      d)))
    return rc;
  if (id)
    sluice__id_hex((const uint8_t *)kp->bodyh, id);
  if (g) {
    g->keys[g->nk] = dkey(g->kbuf[g->nk], kp, -1, 'b');
    g->nk++;
    if (notice) {
      g->keys[g->nk] = dkey(g->kbuf[g->nk], kp, -1, 'r');
      g->nk++;
    }
  }
  return SLUICE_OK;
}

void sluice__decl_kp_id(const keyparts *kp, uint64_t id[2]) {
  id[0] = kp->bodyh[0];
  id[1] = kp->bodyh[1];
}

int sluice__decl_pen_rec(sluice__ctx *c, const sluice__penalty *pn,
                         sluice__prog *g, char sfx, sluice_decision *d) {
  keyparts kp = {{0}};
  int rc;
  if ((rc = scope_ids(c, pn->name, pn->nid, pn->scope, pn->nscope, 1, &kp,
                      d)))
    return rc;
  g->keys[g->nk] = dkey(g->kbuf[g->nk], &kp, -1, sfx);
  g->nk++;
  return SLUICE_OK;
}

int sluice__decl_pen_stuffing_recs(sluice__ctx *c,
                                   const sluice__penalty *pn, sluice__prog *g,
                                   sluice_decision *d) {
  int rc = sluice__decl_pen_rec(c, pn, g, 's', d);
  return rc ? rc : sluice__decl_pen_rec(c, pn, g, 'd', d);
}

static const int step_algo[SLUICE__L__COUNT] = {
    SLUICE_ALGO_GCRA,  SLUICE_ALGO_SWINDOW, SLUICE_ALGO_FWINDOW,
    SLUICE_ALGO_LEASE, SLUICE_ALGO_LEASE,   SLUICE_ALGO_FWINDOW};

int sluice__decl_step_algo(int algo) { return step_algo[algo]; }

static int is_lease(int algo) {
  return algo == SLUICE__L_CONCURRENCY || algo == SLUICE__L_LOCK;
}

/* A counted lease set (lib/algo/lease_count.c): its grant names the id to
** release it by, and a renewal would name a new one. */
static int is_counted(int algo, const sluice__lparams *ps) {
  return algo == SLUICE__L_CONCURRENCY && ps->l.max > SLUICE_GROUP_MAX;
}

/* The records of limit lm on parameter set ps into g, keyed as every
** call keys them (a decision, a give-back, an inspection): a lease set's
** slots ":i", a counted set's one record ":n", else one record; returns
** how many. */
static inline int limit_recs(sluice__prog *g, const keyparts *kp,
                             const sluice__limit *lm,
                             const sluice__lparams *ps) {
  int counted = is_counted(lm->algo, ps), j;
  int slots = lm->algo == SLUICE__L_CONCURRENCY && !counted;
  int n = slots ? (int)ps->l.max : 1;
  if (lm->algo != SLUICE__L_CONCURRENCY) { /* the usual: one, no suffix */
    g->keys[g->nk] = dkey(g->kbuf[g->nk], kp, -1, 0);
    return g->nk++, 1;
  }
  for (j = 0; j < n; j++, g->nk++)
    g->keys[g->nk] =
        dkey(g->kbuf[g->nk], kp, slots ? j : -1, counted ? 'n' : 0);
  return n;
}

/* A settle check's part of a limit's scope: the keyed hashes its keys are
** made of (the tag for the first limit, a hashed body for a scope of
** several attributes; a body "n" NAME is the tag's).  So the check tells
** scopes apart at no hashing of its own. */
static uint64_t fold_scope(uint64_t h, const keyparts *kp, int *folded) {
  if (!*folded) { /* the first limit of its hash-tag group */
    *folded = 1;
    h = sluice__mix64(h ^ kp->tagh[0]) ^ kp->tagh[1];
  }
  if (kp->body[0] == 'h')
    h = sluice__mix64(h ^ kp->bodyh[0]) ^ kp->bodyh[1];
  return sluice__mix64(h);
}

/* The degraded limiter's numbers for a limit: degraded_percent of its
** rate and burst (or window limit). */
static void degrade(const sluice_policy *p, const sluice__limit *lm,
                    const sluice__lparams *ps, sluice__lparams *out) {
  int64_t pct = p->cfg.degraded_percent, b;
  *out = *ps;
  if (lm->algo == SLUICE__L_GCRA) {
    b = ps->g.burst * pct / 100;
    out->g.rate = ps->g.rate * pct;
    out->g.period_ns = ps->g.period_ns * 100;
    out->g.burst = b < 1 ? 1 : b;
  } else {
    b = ps->w.limit * pct / 100;
    out->w.limit = b < 1 ? 1 : b;
  }
}

/* 1 when limit i of the route is in the program of hash-tag group tg
** (tg < 0: every group, the degraded limiter's one program). */
static int in_group(const sluice__droute *dr, int i, int tg) {
  return tg < 0 || dr->tg[i] == tg;
}

/* build()'s kind for a box only looked at: another box of the route
** refused the request, and the longer box is the one reported. */
#define LOOK (-2)

/* The program of hash-tag group tg (tg < 0: all groups, for the local
** degraded limiter, which has no slots): kind < 0 decides (each limit's own
** step); ADJUST adjusts each limit i by costs[i] (in; 0: not in the
** program), the settled charge made at id, one step per limit (grouped
** buckets too); LOOK checks the group's box alone; else every lease limit
** gets `kind` (LEASE_RELEASE, RENEW) with id.  st[i] is limit i's step, -1
** when not in the program; st[] and costs[] of other groups' limits are
** left as they are.  prs, when not NULL and a penalty lives in tg, puts
** it in at prs[tg] (the box first, a strike after each rate limit).  dg, when not NULL, makes the degraded limiter's
** program instead: the rate limits only, at degraded_percent (dg holds
** their numbers).  c->scope_mix folds every limit's scope in, for the
** settle check (the caller zeroes it once for all groups). */
static int build(sluice__ctx *c, int kind, uint64_t id, sluice__prog *g,
                 int st[SLUICE__RLIMITS_MAX],
                 int64_t costs[SLUICE__RLIMITS_MAX], sluice__pen_run *prs,
                 sluice__lparams *dg, sluice_gcra_params *gp, int tg,
                 kcache *kc, sluice_decision *d) {
  const sluice__droute *dr = &c->p->decl->routes[c->droute];
  sluice__pen_run *pr = NULL;
  int i, rc, head = 0, hfirst = 0;
  for (i = 0; i < dr->ntg; i++) /* each group's tag folds in once a build */
    kc->g[i].folded = 0;
  /* A group keyed by unauthenticated input (the client address, an
  ** attribute of `untrusted`, a path parameter) keys strangers' records:
  ** they live within that class's own bound (docs/backends.md, Record
** classes).  Every other
  ** scope is the service's own. */
  g->nk = g->ns = 0;
  g->rclass = tg >= 0 || dr->n > 0
                  ? sluice__decl_group_class(c, tg >= 0 ? tg : dr->tg[0])
                  : SLUICE_CLASS_SERVICE;
  if (prs && tg >= 0 && dr->gpen[tg]) {
    pr = &prs[tg];
    pr->pn = &c->p->decl->penalties[dr->gpen[tg] - 1];
  }
  /* The penalty's scope starts with its group's attribute: one tag. */
  if (pr && (rc = sluice__pen_head(c, g, pr, &kc->g[tg], d)))
    return rc;
  if (kind == LOOK) { /* the box alone, noted */
    if (pr)
      sluice__when(g, pr->box, SLUICE_WHEN_ALWAYS, 0, SLUICE_FOLD_NOTE);
    return SLUICE_OK;
  }
  for (i = 0; i < dr->n; i++)
    if (in_group(dr, i, tg)) {
      st[i] = -1;
      if (kind != SLUICE_OP_ADJUST)
        costs[i] = 1;
    }
  if (pr && kind < 0 && (rc = sluice__pen_report(c, g, pr, d)) != 0)
    return rc < 0 ? rc : SLUICE_OK; /* a report: no limits */
  for (i = 0; i < dr->n; i++) {
    const sluice__limit *lm = &c->p->decl->limits[dr->limit[i]];
    const sluice__lparams *ps = pick(c, i);
    const keyparts *kp;
    int64_t cost = 1;
    int first = g->nk, nrec = 1, s, j;
    int adj = kind == SLUICE_OP_ADJUST;
    if (!in_group(dr, i, tg))
      continue;
    st[i] = -1;
    if (adj ? costs[i] == 0 : kind >= 0 && !is_lease(lm->algo))
      continue;
    if (adj)
      cost = costs[i];
    if (!adj && dr->group[i] >= 2) {
      head = i;
      hfirst = g->nk;
    }
    if (dg && !sluice__decl_strikes(lm->algo))
      continue; /* no leases or caps on the degraded limiter */
    if ((rc = limit_parts(c, kc, i, lm, &kp, d)))
      return rc;
    c->scope_mix = fold_scope(c->scope_mix, kp, &kc->g[dr->tg[i]].folded);
    if (kind >= 0 || lm->algo == SLUICE__L_CAP || is_lease(lm->algo))
      ; /* a lease, a count, a settle's or a release's: as given */
    else if (dr->cost[i].kind == SLUICE__C_CONST) /* the usual, checked at load */
      cost = dr->cost[i].value;
    else if ((rc = cost_of(c, &dr->cost[i], lm, i, &cost, d)))
      return rc;
    costs[i] = cost;
    if (dg) {
      degrade(c->p, lm, ps, &dg[i]);
      ps = &dg[i];
      if (cost > (lm->algo == SLUICE__L_GCRA ? ps->g.burst : ps->w.limit))
        return SLUICE_ERANGE; /* never fits the degraded bucket */
    }
    nrec = limit_recs(g, kp, lm, ps);
    if (!adj && dr->group[i] != 0) {
      /* Buckets head .. i of a `group` as one GCRA step (both charged or
      ** neither; the binding one, as the algorithm reports it, the one
      ** left with the fewest points, or, refused, the one that must wait
      ** longest), their numbers side by side in gp (one per record), once
      ** the last is keyed.  They share their hash-tag group
      ** (declared_conf.c). */
      gp[i] = ps->g;
      if (i + 1 < dr->n && dr->group[i + 1] < 0)
        continue;
      s = sluice__step(g, SLUICE_ALGO_GCRA, SLUICE_OP_CONSUME, hfirst,
                       i - head + 1, gp + head, cost, 0);
      if (s > 0)
        sluice__when(g, s, SLUICE_WHEN_PASSED, 0, SLUICE_FOLD_GATE);
      for (j = head; j <= i; j++)
        st[j] = s;
      if (pr)
        sluice__pen_after(c, g, pr, head, s);
      continue;
    }
    s = sluice__step(g, step_algo[lm->algo],
                     kind >= 0            ? kind
                     : is_lease(lm->algo) ? SLUICE_OP_ACQUIRE
                                          : SLUICE_OP_CONSUME,
                     first, nrec, ps, is_lease(lm->algo) ? 0 : cost,
                     is_lease(lm->algo) || adj ? id : 0);
    if (kind >= 0)
      sluice__when(g, s, SLUICE_WHEN_ALWAYS, 0, SLUICE_FOLD_NOTE);
    else if (s > 0)
      sluice__when(g, s, SLUICE_WHEN_PASSED, 0, SLUICE_FOLD_GATE);
    st[i] = s;
    if (pr)
      sluice__pen_after(c, g, pr, i, s);
  }
  return SLUICE_OK;
}

/* Give back what hash-tag group tg took for this request, which passed
** it and was refused by a later group (or could not reach it): each bucket
** refunded its cost, each window or cap count taken out of the window it
** went into (ADJUST at the time r says the group ran), each lease
** released (a counted set's by the id its grant named, st[i] its step).
** One program, one store call, every step a note; the records are the
** ones build() keyed (kc has their parts). */
static int give_back(sluice__ctx *c, int tg, const sluice_program_result *r,
                     const int64_t costs[SLUICE__RLIMITS_MAX],
                     const int st[SLUICE__RLIMITS_MAX], uint64_t id,
                     kcache *kc, sluice__prog *g) {
  const sluice__droute *dr = &c->p->decl->routes[c->droute];
  sluice_program_result res;
  sluice_decision scratch;
  int i, s, rc, err = c->store_err;
  memset(&scratch, 0, sizeof scratch);
  g->nk = g->ns = 0;
  g->rclass = sluice__decl_group_class(c, tg);
  for (i = 0; i < dr->n; i++) {
    const sluice__limit *lm = &c->p->decl->limits[dr->limit[i]];
    const sluice__lparams *ps = pick(c, i);
    const keyparts *kp;
    uint64_t lid = id;
    int first = g->nk, nrec = 1;
    if (dr->tg[i] != tg)
      continue;
    if ((rc = limit_parts(c, kc, i, lm, &kp, &scratch)))
      return rc;
    nrec = limit_recs(g, kp, lm, ps);
    if (is_counted(lm->algo, ps) && st[i] >= 0 && sluice__ran(r, st[i]))
      lid = r->v[st[i]].lease_id; /* a counted set's grant names it */
    if (is_lease(lm->algo))
      s = sluice__step(g, SLUICE_ALGO_LEASE, SLUICE_OP_LEASE_RELEASE, first,
                       nrec, ps, 0, lid);
    else
      s = sluice__step(g, step_algo[lm->algo], SLUICE_OP_ADJUST, first, 1, ps,
                       -costs[i], (uint64_t)r->now_ns);
    sluice__when(g, s, SLUICE_WHEN_ALWAYS, 0, SLUICE_FOLD_NOTE);
  }
  rc = sluice__run(c, g, &res);
  /* A give-back that fails leaves the charge (the request is refused or
  ** failed already): it is no store failure of the decision's. */
  c->store_err = err;
  return rc == SLUICE__PENDING ? rc : SLUICE_OK;
}

static int route_leases(const sluice__ctx *c) {
  return c->p->decl->routes[c->droute].leases;
}

/* A fraction of the limit left, in 1/1024ths (integers only). */
static int64_t left(const sluice_verdict *v) {
  return v->limit > 0 ? v->remaining * 1024 / v->limit : 0;
}

static void fill(sluice__ctx *c, const sluice__limit *lm,
                 const sluice__lparams *ps, const sluice_verdict *v,
                 sluice_decision *d) {
  d->binding = SLUICE_BINDING_LIMIT;
  d->limit_name = lm->name;
  d->limit_unit = lm->unit;
  d->limit = v->limit;
  d->remaining = v->remaining;
  d->reset_ns = v->reset_ns;
  if (lm->algo == SLUICE__L_GCRA) {
    d->refill_rate = ps->g.rate;
    d->refill_period_ns = ps->g.period_ns;
    d->policy_window_ns = ps->g.burst * ps->g.period_ns / ps->g.rate;
  } else if (!is_lease(lm->algo)) {
    d->policy_window_ns = ps->w.window_ns;
  }
  (void)c;
}

/* What the store said of a decision: each hash-tag group's result, the
** groups whose programs ran (bit per group) and those whose charges were
** given back after a later group's refusal. */
typedef struct sluice__dres {
  sluice_program_result res[SLUICE__TG_MAX];
  unsigned done, given;
  unsigned look; /* groups whose box was only looked at */
  int reports;   /* the request is a report to a box of the route */
} dres;

/* Limit i's group result, NULL when its group's program did not run or
** was given back. */
static const sluice_program_result *res_of(const sluice__droute *dr,
                                           const dres *r, int i) {
  int tg = dr->tg[i];
  return (r->done >> tg & 1u) && !((r->given | r->look) >> tg & 1u)
             ? &r->res[tg]
             : NULL;
}

/* Every limit of the route into d->limits, in the route's order: what a
** decision says about each limit the request met, besides the binding
** one's fields (docs/policy.md, "What a decision says").  A limit after
** the one that refused, or in a group whose charge was given back, took
** nothing: its remaining and reset are unknown. */
static void report(sluice__ctx *c, const sluice__droute *dr, const dres *rs,
                   const int *st, const int64_t *costs, int bind,
                   const sluice__lparams *dg, sluice_decision *d) {
  int i, head = 0;
  d->nlimits = dr->n;
  for (i = 0; i < dr->n; i++) {
    const sluice__limit *lm = &c->p->decl->limits[dr->limit[i]];
    const sluice__lparams *ps = dg && sluice__decl_strikes(lm->algo)
                                    ? &dg[i]
                                    : pick(c, i);
    const sluice_program_result *res = res_of(dr, rs, i);
    sluice_decision_limit *o = &d->limits[i];
    int ran = res && st[i] >= 0 && (res->ran >> st[i] & 1u);
    if (dr->group[i] >= 2)
      head = i;
    o->name = lm->name;
    o->unit = lm->unit;
    o->cost = costs[i];
    if (lm->algo == SLUICE__L_GCRA) {
      int64_t bp;
      o->quota = ps->g.burst;
      /* burst * period fits 64 bits for any bucket a store can decide
      ** exactly (2^62); the 128-bit division is the rare way round. */
      o->window_ns =
          __builtin_mul_overflow(ps->g.burst, ps->g.period_ns, &bp)
              ? sluice__clamp64((sluice__i128)ps->g.burst * ps->g.period_ns /
                                ps->g.rate)
              : bp / ps->g.rate;
    } else if (is_lease(lm->algo)) {
      o->quota = ps->l.max;
    } else {
      o->quota = ps->w.limit;
      o->window_ns = ps->w.window_ns;
    }
    if (ran && dr->group[i] != 0 &&
        head + res->v[st[i]].binding != i) {
      /* A group step reports its binding bucket only. */
      o->remaining = o->reset_ns = -1;
      o->flags |= SLUICE_LIMIT_GROUPED;
    } else if (ran) {
      o->remaining = res->v[st[i]].remaining;
      o->reset_ns = res->v[st[i]].reset_ns;
      if (st[i] == res->denied_by)
        o->flags |= SLUICE_LIMIT_DENIED;
      if (dr->group[i] != 0)
        o->flags |= SLUICE_LIMIT_GROUPED;
    } else {
      o->remaining = o->reset_ns = -1;
      o->flags |= SLUICE_LIMIT_NOT_RUN;
    }
    if (i == bind)
      o->flags |= SLUICE_LIMIT_BINDING;
  }
}

/* The programs' results into the decision: the box, then the binding
** limit (the one that refused, else the one with the least left). */
static int read(sluice__ctx *c, const dres *rs,
                const int st[SLUICE__RLIMITS_MAX],
                const int64_t costs[SLUICE__RLIMITS_MAX],
                const sluice__pen_run *prs, const sluice__lparams *dg,
                uint64_t id, sluice_decision *d) {
  const sluice__droute *dr = &c->p->decl->routes[c->droute];
  const sluice_program_result *br = NULL;
  int i, k, bind = -1, pass, denied = 0, boxed = 0, reported = 0;
  int64_t smin = INT64_MAX, bleft = 0; /* the binding one's left() */
  /* The boxes, in the order they ran: the one that refused, then those
  ** only looked at (the longer box is reported); or a report's strikes. */
  for (k = 0; prs && k < dr->npen; k++) {
    int tg = dr->pord[k];
    if (!(rs->done >> tg & 1u))
      continue;
    if (rs->look >> tg & 1u)
      sluice__pen_look_read(c, &prs[tg], &rs->res[tg], d);
    else if (sluice__pen_boxed(c, &prs[tg], &rs->res[tg], d))
      boxed = 1;
    else {
      /* Not boxed: the fewest strikes left of the route's boxes. */
      if (d->strikes_remaining < smin)
        smin = d->strikes_remaining;
      reported |= prs[tg].report;
    }
  }
  if (boxed)
    return SLUICE_OK;
  if (smin != INT64_MAX)
    d->strikes_remaining = smin;
  if (reported)
    d->strikes_remaining = INT64_MAX; /* the reports' own, below */
  for (k = 0; reported && k < dr->npen; k++) {
    int tg = dr->pord[k];
    if ((rs->done >> tg & 1u) && prs[tg].report)
      sluice__pen_report_read(c, &prs[tg], &rs->res[tg], d);
  }
  if (d->strikes_remaining == INT64_MAX)
    d->strikes_remaining = smin;
  if (reported || rs->reports)
    return SLUICE_OK;
  /* The limit that refused; else, among the rate limits (leases, locks
  ** and caps bind only a route that has nothing else), the one with the
  ** least left.  A group is one candidate: its binding bucket. */
  for (pass = 0; pass < 2 && bind < 0; pass++)
    for (i = 0; i < dr->n; i++) {
      const sluice_program_result *res = res_of(dr, rs, i);
      int m = i;
      if (!res || st[i] < 0 || dr->group[i] < 0)
        continue;
      if (dr->group[i] >= 2)
        m = i + res->v[st[i]].binding;
      if (st[i] == res->denied_by) {
        bind = m;
        br = res;
        denied = 1;
        pass = 2;
        break;
      }
      if (pass == 0 &&
          !sluice__decl_strikes(c->p->decl->limits[dr->limit[i]].algo))
        continue;
      if (bind < 0 || left(&res->v[st[i]]) < bleft) {
        bind = m;
        br = res;
        bleft = left(&res->v[st[i]]); /* a group's step is its binding's */
      }
    }
  if (bind < 0)
    return SLUICE_OK; /* degraded, a route of leases only: let it through */
  {
    const sluice__limit *lm = &c->p->decl->limits[dr->limit[bind]];
    const sluice__lparams *ps = dg ? &dg[bind] : pick(c, bind);
    const sluice_verdict *v = &br->v[st[bind]];
    fill(c, lm, ps, v, d);
    d->cost = costs[bind];
    report(c, dr, rs, st, costs, bind, dg, d);
    if (!denied) {
      d->outcome = SLUICE_OUTCOME_ALLOW;
      /* The store's time (a Redis store's TIME) of the first group's
      ** program: a settle finds the windows these charges went into by
      ** it. */
      if (!dg) { /* the degraded limiter's charges are not the store's */
        d->now_ns = rs->res[dr->run[0]].now_ns;
        d->settle_check = sluice__settle_check(c, costs, d->now_ns);
      }
      if (id) {
        int64_t ttl = INT64_MAX;
        for (i = 0; i < dr->n; i++) {
          const sluice__limit *l2 = &c->p->decl->limits[dr->limit[i]];
          if (is_lease(l2->algo) && pick(c, i)->l.ttl_ns < ttl)
            ttl = pick(c, i)->l.ttl_ns;
          /* The route's only lease limit (the loader sees to it). */
          if (is_counted(l2->algo, pick(c, i)) && st[i] >= 0 &&
              res_of(dr, rs, i))
            id = res_of(dr, rs, i)->v[st[i]].lease_id;
        }
        d->lease_id = id;
        d->lease_ttl_ns = ttl;
      }
      return SLUICE_OK;
    }
    d->retry_after_ns = v->retry_after_ns;
    if (lm->retry_max_ns && d->retry_after_ns > lm->retry_max_ns)
      d->retry_after_ns = lm->retry_max_ns;
    if (lm->algo == SLUICE__L_LOCK || lm->status == 409)
      d->outcome = SLUICE_OUTCOME_CONFLICT;
    else if (lm->algo == SLUICE__L_CONCURRENCY)
      d->outcome = SLUICE_OUTCOME_CONCURRENCY;
    else
      d->outcome = SLUICE_OUTCOME_THROTTLED;
    if (is_lease(lm->algo)) {
      d->cap_limit = ps->l.max;
      atomic_fetch_add_explicit(
          &c->p->ctr->lease_denials[SLUICE__CTR_ROW(c->p, c->droute)], 1,
          memory_order_relaxed);
    }
    /* A lease, lock or count cap refused: LEASE_DENIED, as the built-in
    ** flow's heavy endpoints said (the tenant's scope when the limit's
    ** starts with it). */
    if (is_lease(lm->algo) || lm->algo == SLUICE__L_CAP)
      sluice__emit(c, SLUICE_EVENT_LEASE_DENIED,
                   lm->scope[0] == SLUICE__A_TENANT ? SLUICE_SCOPE_TENANT
                   : lm->scope[0] == SLUICE__A_IP   ? SLUICE_SCOPE_IP
                                                    : SLUICE_SCOPE_KEY,
                   0, lm->scope[0] == SLUICE__A_TENANT ? sluice__decl_tenant_hex(c) : NULL,
                   0, d->outcome);
    if (prs && dr->gpen[dr->tg[bind]]) {
      int tg = dr->tg[bind];
      for (i = bind; dr->group[i] < 0; i--)
        ; /* a group's strikes are its first bucket's */
      sluice__pen_denied(c, &prs[tg], &rs->res[tg], i, d);
    }
  }
  return SLUICE_OK;
}

/* Every limit's attributes and cost are there and fit, before any group
** charges anything: a route spanning groups refuses a bad request before
** its first store call, as a one-group route does. */
static int check_request(sluice__ctx *c, kcache *kc, sluice_decision *d) {
  const sluice__droute *dr = &c->p->decl->routes[c->droute];
  const keyparts *kp;
  int64_t cost;
  int i, rc;
  for (i = 0; i < dr->n; i++) {
    const sluice__limit *lm = &c->p->decl->limits[dr->limit[i]];
    if ((rc = limit_parts(c, kc, i, lm, &kp, d)) ||
        (lm->algo != SLUICE__L_CAP && !is_lease(lm->algo) &&
         (rc = cost_of(c, &dr->cost[i], lm, i, &cost, d))))
      return rc;
  }
  return SLUICE_OK;
}

/* A box's spread (a subject failing from too many addresses) that
** reached its limit in group tg's program trips the box it names to level
** 3 in that box's program, which runs later. */
static void spread_signal(const sluice__droute *dr, sluice__pen_run *prs,
                          int tg, const sluice_program_result *r) {
  const sluice__pen_run *pr = &prs[tg];
  int k;
  if (pr->rspread < 0 || !sluice__ran(r, pr->rspread) ||
      r->v[pr->rspread].allowed)
    return;
  for (k = 0; k < dr->ntg; k++)
    if (dr->gpen[k] - 1 == pr->pn->spread_trips)
      prs[k].force3 = 1;
}

/* A route's programs, one per hash-tag group in the route's run order
** (declared_conf.c, "Hash-tag groups"), each one atomic store call.  The
** first group that refuses ends the run, and the groups before it get back
** what they took (give_back()): a refused request consumes nothing anywhere.
** Not atomic across groups: between a group's charge and its give-back
** another request may find that group charged and be refused for it;
** none is ever admitted beyond a limit, since every limit is decided
** inside its own group's call. */
int sluice__decide_declared(sluice__ctx *c, sluice_decision *d) {
  const sluice__droute *dr = &c->p->decl->routes[c->droute];
  dres rs;
  sluice__prog gp, *g = &gp;
  sluice__pen_run pens[SLUICE__TG_MAX], *prs = NULL;
  kcache kc;
  int64_t costs[SLUICE__RLIMITS_MAX];
  sluice_gcra_params bp[SLUICE__RLIMITS_MAX];
  int st[SLUICE__RLIMITS_MAX], rc = SLUICE_OK, k, tg, i, reports, boxed = 0;
  uint64_t id = 0;
  if (dr->pen)
    prs = pens; /* filled by the programs' builds */
  if (route_leases(c) && (rc = sluice__random_id(c, &id)) != SLUICE_OK)
    return rc;
  kcache_init(&kc, dr);
  if (dr->ntg > 1 && (rc = check_request(c, &kc, d)) != SLUICE_OK)
    return rc;
  reports = prs && sluice__pen_is_report(c);
  rs.done = rs.given = rs.look = 0;
  rs.reports = reports;
  c->scope_mix = 0;
  for (i = 0; i < dr->n; i++) {
    st[i] = -1;
    costs[i] = 1;
  }
  for (k = 0; k < SLUICE__TG_MAX; k++)
    pens[k].force3 = 0;
  for (k = 0; k < dr->ntg; k++) {
    tg = dr->run[k];
    if ((reports || boxed) && !dr->gpen[tg])
      continue; /* a report, or boxed: the boxes' groups alone */
    if (dr->gpen[tg] &&
        sluice__pen_skipped(c, &c->p->decl->penalties[dr->gpen[tg] - 1]))
      continue; /* an optional attribute not given: no such box */
    rc = build(c, boxed ? LOOK : -1, id, g, st, costs, prs, NULL, bp, tg, &kc,
               d);
    if (rc == SLUICE_OK)
      rc = sluice__run_as(c, g, &rs.res[tg], dr->built && !boxed && !reports);
    if (rc != SLUICE_OK)
      break;
    rs.done |= 1u << tg;
    if (prs && dr->gpen[tg])
      spread_signal(dr, prs, tg, &rs.res[tg]);
    if (boxed)
      rs.look |= 1u << tg;
    else if (dr->gpen[tg] && rs.res[tg].denied_by == prs[tg].box)
      boxed = k + 1; /* the other boxes are looked at, nothing more */
    else if (rs.res[tg].denied_by >= 0)
      break;
  }
  if (rc == SLUICE__PENDING)
    return rc;
  if (boxed)
    k = boxed - 1;
  if (rc != SLUICE_OK || k < dr->ntg) {
    /* Refused by group run[k] (or a store failure there): the groups
    ** before it give back, the latest first. */
    int e;
    for (e = k - 1; e >= 0; e--) {
      tg = dr->run[e];
      if (!(rs.done >> tg & 1u))
        continue;
      if (give_back(c, tg, &rs.res[tg], costs, st, id, &kc, g) ==
          SLUICE__PENDING)
        return SLUICE__PENDING;
      rs.given |= 1u << tg;
    }
  }
  if (rc != SLUICE_OK)
    return rc;
  return read(c, &rs, st, costs, prs, NULL, id, d);
}

/* Checked at open.  A decision's program (build() deciding, neither a
** report nor a box only looked at) is its route's shape filled with the
** request's parameter sets, costs and key bytes.  So each route's programs
** are built here for a stand-in request (every attribute "1"), once with
** each parameter set of its limits (the j-th of each) and with the box in
** shadow or not, each penalty's sets swapped in for the one picked, and put
** through the store's validator.  A route whose programs all pass runs its
** decisions unvalidated (sluice__run_as()): what a request changes cannot
** make them invalid, since a cost the request names is checked against its
** set when it comes (cost_of()) and every other cost against every set at
** load (declared_conf.c), and the keys are of fixed lengths under one tag. */
static int swap_ok(const sluice__prog *g, const sluice__pen_run *pr) {
  sluice_step st[SLUICE_PROGRAM_STEPS];
  sluice_program pg;
  int v, s;
  sluice__prog_program(g, &pg);
  pg.steps = st;
  /* Each of the penalty's sets (-1: its base) in place of the one picked. */
  for (v = -1; v < (pr ? pr->pn->npsets : 0); v++) {
    memcpy(st, g->st, sizeof st);
    for (s = 0; pr && s < g->ns; s++)
      if (st[s].params == &pr->ps->pp)
        st[s].params = v < 0 ? &pr->pn->base.pp : &pr->pn->ps[v].pp;
    if (sluice_program_validate(&pg) != SLUICE_OK)
      return 0;
  }
  return 1;
}

static int built_ok(sluice_policy *p, int r, int j, unsigned shadow) {
  const sluice__decl *dl = p->decl;
  const sluice__droute *dr = &dl->routes[r];
  sluice_attr at[SLUICE__ATTRS_MAX];
  sluice_request q;
  sluice__ctx c;
  sluice__prog g;
  sluice__pen_run pens[SLUICE__TG_MAX];
  sluice_decision d;
  kcache kc;
  int64_t costs[SLUICE__RLIMITS_MAX];
  sluice_gcra_params bp[SLUICE__RLIMITS_MAX];
  int st[SLUICE__RLIMITS_MAX], i, tg;
  memset(&q, 0, sizeof q);
  for (i = 0; i < dl->nattrs; i++) {
    at[i].name = dl->attr[i];
    at[i].value = "1";
  }
  q.tenant_id = q.api_key_id = q.client_ip = q.tier = "1";
  q.method = strcmp(dr->method, "*") ? dr->method : "GET";
  q.route = dr->route;
  q.attrs = at;
  q.nattrs = (size_t)dl->nattrs;
  memset(&c, 0, sizeof c);
  memset(&d, 0, sizeof d);
  c.p = p;
  c.req = &q;
  c.tier = -1;
  c.droute = r;
  c.shadow = shadow;
  for (i = 0; i < dr->n; i++) {
    const sluice__limit *lm = &dl->limits[dr->limit[i]];
    c.ps[i] = j == 0 || lm->npsets == 0
                  ? &lm->base
                  : &lm->ps[j <= lm->npsets ? j - 1 : lm->npsets - 1];
  }
  if (dr->pen && sluice__pen_is_report(&c))
    return 0; /* the stand-in is a report: its plain shape is not seen */
  kcache_init(&kc, dr);
  for (i = 0; i < SLUICE__TG_MAX; i++)
    pens[i].force3 = 0;
  for (tg = 0; tg < dr->ntg; tg++)
    if (build(&c, -1, 1, &g, st, costs, dr->pen ? pens : NULL, NULL, bp, tg,
              &kc, &d) != SLUICE_OK ||
        (g.ns > 0 && !swap_ok(&g, dr->gpen[tg] ? &pens[tg] : NULL)))
      return 0;
  return 1;
}

void sluice__decl_check_built(sluice_policy *p) {
  sluice__decl *dl = p->decl;
  int r, i, j, sets;
  for (i = 0; dl && i < dl->nlimits; i++)
    tier_sets(p, &dl->limits[i]);
  for (r = 0; dl && r < dl->nroutes; r++) {
    sluice__droute *dr = &dl->routes[r];
    for (i = sets = 0; i < dr->n; i++)
      if (dl->limits[dr->limit[i]].npsets > sets)
        sets = dl->limits[dr->limit[i]].npsets;
    dr->built = 1;
    for (j = 0; j <= sets && dr->built; j++)
      dr->built = built_ok(p, r, j, 0) &&
                  built_ok(p, r, j, SLUICE_SHADOW_PENALTY);
  }
}

int sluice__decl_degraded(sluice__ctx *c, sluice_decision *d) {
  const sluice__droute *dr = &c->p->decl->routes[c->droute];
  dres rs;
  sluice_program pg;
  sluice__prog gp, *g = &gp;
  sluice__lparams dg[SLUICE__RLIMITS_MAX];
  int64_t costs[SLUICE__RLIMITS_MAX];
  sluice_gcra_params bp[SLUICE__RLIMITS_MAX];
  int st[SLUICE__RLIMITS_MAX], rc, i;
  sluice_decision scratch;
  kcache kc;
  if (!dr->degraded || sluice__pen_is_report(c))
    return 0; /* a report that cannot be counted fails closed */
  d->flags |= SLUICE_DECISION_DEGRADED;
  /* The request's attributes were checked when the store was asked; the
  ** breaker's skip never asked it, so a bad one fails closed here.  The
  ** local limiter has no slots: every group is one program there. */
  memset(&scratch, 0, sizeof scratch);
  kcache_init(&kc, dr);
  rc = build(c, -1, 0, g, st, costs, NULL, dg, bp, -1, &kc, &scratch);
  if (rc == SLUICE_ERANGE) {
    d->outcome = SLUICE_OUTCOME_THROTTLED;
    d->retry_after_ns = c->p->cfg.fail_closed_retry_after_ns;
    return 1;
  }
  if (rc == SLUICE_OK && g->ns == 0)
    return 1; /* no rate limit on the route: nothing to hold it */
  if (rc == SLUICE_OK) {
    sluice__prog_program(g, &pg);
    rc = sluice_limiter_decide(c->p->local, 1, &pg, c->now, &rs.res[0], NULL);
  }
  if (rc != SLUICE_OK) {
    d->flags &= ~SLUICE_DECISION_DEGRADED;
    return 0;
  }
  /* One result for every group: each limit reads it. */
  rs.done = (1u << dr->ntg) - 1;
  rs.given = rs.look = 0;
  rs.reports = 0; /* a report fails closed before this */
  for (i = 1; i < dr->ntg; i++)
    rs.res[i] = rs.res[0];
  read(c, &rs, st, costs, NULL, dg, 0, d);
  return 1;
}

/* Each hash-tag group with a lease gets `kind` (release, renew) for lease
** id, a store call per group. */
int sluice__declared_lease_op(sluice__ctx *c, uint64_t id, int kind) {
  const sluice__droute *dr = &c->p->decl->routes[c->droute];
  sluice_decision d;
  sluice_program_result r;
  sluice__prog gp, *g = &gp;
  int64_t costs[SLUICE__RLIMITS_MAX];
  sluice_gcra_params bp[SLUICE__RLIMITS_MAX];
  int st[SLUICE__RLIMITS_MAX], rc = SLUICE_OK, s, ok = 1, k;
  kcache kc;
  if (!route_leases(c))
    return SLUICE_EINVAL;
  kcache_init(&kc, dr);
  /* A counted lease's renewal moves it and gives it a new id, which this
  ** call cannot hand back: its holder releases, or lets the TTL run. */
  for (s = 0; kind == SLUICE_OP_RENEW && s < dr->n; s++) {
    const sluice__limit *lm = &c->p->decl->limits[dr->limit[s]];
    if (is_counted(lm->algo, pick(c, s)))
      return SLUICE_EINVAL;
  }
  memset(&d, 0, sizeof d);
  for (k = 0; k < dr->ntg && rc == SLUICE_OK; k++) {
    rc = build(c, kind, id, g, st, costs, NULL, NULL, bp, dr->run[k], &kc,
               &d);
    if (rc == SLUICE_OK && g->ns > 0)
      rc = sluice__run(c, g, &r);
    else
      continue;
    if (rc == SLUICE_OK)
      for (s = 0; s < g->ns; s++)
        ok = ok && r.v[s].allowed;
  }
  return rc != SLUICE_OK ? rc : ok ? SLUICE_OK : SLUICE_ENOTFOUND;
}

int sluice__decl_costs(sluice__ctx *c, int64_t costs[], sluice_decision *d) {
  const sluice__droute *dr = &c->p->decl->routes[c->droute];
  kcache kc;
  const keyparts *kp;
  int i, k, rc;
  kcache_init(&kc, dr);
  c->scope_mix = 0;
  /* In the order a decision builds its programs: the same scope_mix. */
  for (k = 0; k < dr->ntg; k++)
    for (i = 0; i < dr->n; i++) {
      const sluice__limit *lm = &c->p->decl->limits[dr->limit[i]];
      if (dr->tg[i] != dr->run[k])
        continue;
      costs[i] = 0;
      if ((rc = limit_parts(c, &kc, i, lm, &kp, d)))
        return rc;
      c->scope_mix =
          fold_scope(c->scope_mix, kp, &kc.g[dr->tg[i]].folded);
      if (lm->algo != SLUICE__L_CAP && !is_lease(lm->algo) &&
          (rc = cost_of(c, &dr->cost[i], lm, i, &costs[i], d)))
        return rc;
    }
  return SLUICE_OK;
}

/* A settle: each hash-tag group's limits adjusted in one store call. */
int sluice__decl_adjust(sluice__ctx *c, int64_t delta[], uint64_t at) {
  const sluice__droute *dr = &c->p->decl->routes[c->droute];
  sluice_decision d;
  sluice_program_result r;
  sluice__prog gp;
  sluice_gcra_params bp[SLUICE__RLIMITS_MAX];
  int st[SLUICE__RLIMITS_MAX], rc = SLUICE_OK, k;
  kcache kc;
  memset(&d, 0, sizeof d);
  kcache_init(&kc, dr);
  for (k = 0; k < dr->ntg && rc == SLUICE_OK; k++) {
    rc = build(c, SLUICE_OP_ADJUST, at, &gp, st, delta, NULL, NULL, bp,
               dr->run[k], &kc, &d);
    if (rc == SLUICE_OK && gp.ns > 0)
      rc = sluice__run(c, &gp, &r);
  }
  return rc;
}

uint64_t sluice__settle_check(const sluice__ctx *c, const int64_t costs[],
                              int64_t at) {
  const sluice__droute *dr = &c->p->decl->routes[c->droute];
  uint64_t h, k;
  int i;
  memcpy(&k, c->p->secret, sizeof k); /* not guessable from outside */
  h = sluice__mix64(k ^ (uint64_t)c->droute) ^ sluice__mix64((uint64_t)at) ^ c->scope_mix;
  for (i = 0; i < dr->n; i++) {
    int algo = c->p->decl->limits[dr->limit[i]].algo;
    if (!is_lease(algo) && algo != SLUICE__L_CAP)
      h = sluice__mix64(h ^ (uint64_t)costs[i] ^ ((uint64_t)i << 56));
  }
  return h ? h : 1;
}

/* For declared_info.c (sluice_policy_inspect() of a limit): the record
** keys of limit `limit` for the request in c, as a decision builds them,
** into g->keys[0..*nrec), and the parameter set it would use.  c->droute may be
** -1 when the limit's scope has no `pattern`. */
int sluice__decl_keys(sluice__ctx *c, int limit, sluice__prog *g, int *nrec,
                      const sluice__lparams **ps, sluice_decision *d) {
  const sluice__limit *lm = &c->p->decl->limits[limit];
  keyparts kp = {{0}};
  int rc;
  if ((rc = scope_ids(c, lm->name, lm->nid, lm->scope, lm->nscope, 0, &kp,
                      d)))
    return rc;
  *ps = pick1(c, lm);
  g->nk = 0;
  *nrec = limit_recs(g, &kp, lm, *ps);
  return SLUICE_OK;
}
