/*
** The request context: a request checked field by field and turned into
** everything its decision needs (route, tier, cost, scope ids)
** before any store work, so that a bad request changes nothing.
*/
#include <arpa/inet.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "declared.h"
#include "flow.h"

int sluice__id_ok(const char *s, int required, const char *field,
                  sluice_decision *d) {
  size_t n;
  if (!s) {
    if (!required)
      return SLUICE_OK;
    if (d)
      d->invalid_field = field;
    return SLUICE_EINVAL;
  }
  n = strnlen(s, SLUICE_POLICY_ID_MAX + 1);
  if (n == 0 || n > SLUICE_POLICY_ID_MAX) {
    if (d)
      d->invalid_field = field;
    return SLUICE_EKEY;
  }
  return SLUICE_OK;
}

void sluice__scope(const sluice_policy *p, const char *raw,
                   char out[SLUICE_SCOPE_ID_LEN + 1]) {
  sluice_scope_id(p->secret, raw, strlen(raw), out);
}

const char *sluice__ip_name(const sluice_policy *p, const char *raw,
                            char name[SLUICE__IP_NAME]) {
  unsigned char a[16];
  int bits = (int)p->cfg.ipv6_prefix, i;
  if (!strchr(raw, ':') || inet_pton(AF_INET6, raw, a) != 1)
    return raw; /* IPv4, or a caller's own client name */
  if (memcmp(a, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) == 0) {
    /* IPv4-mapped: the IPv4 address, whole, as a dual-stack socket saw it. */
    snprintf(name, SLUICE__IP_NAME, "%u.%u.%u.%u", a[12], a[13], a[14],
             a[15]);
    return name;
  }
  for (i = 0; i < 16; i++) {
    int keep = bits - 8 * i;
    if (keep < 8)
      a[i] &= (unsigned char)(keep <= 0 ? 0 : 0xff00 >> keep);
  }
  inet_ntop(AF_INET6, a, name, SLUICE__IP_NAME);
  snprintf(name + strlen(name), SLUICE__IP_NAME - strlen(name), "/%d", bits);
  return name;
}

void sluice__ip_scope(const sluice_policy *p, const char *raw,
                      char out[SLUICE_SCOPE_ID_LEN + 1]) {
  char name[SLUICE__IP_NAME];
  sluice__scope(p, sluice__ip_name(p, raw, name), out);
}

/* A route pattern against a request's path (before any '?'): literal
** bytes; a segment that is `*` (followed by more pattern) or `{NAME}`
** matches one non-empty segment; a `*` ending the pattern matches the
** rest, whatever it is (a prefix match).  With `name`, *v and *vn get the
** segment `{name}` matched. */
static int route_walk(const char *p, const char *r, const char *name,
                      size_t namelen, const char **v, size_t *vn) {
  const char *const p0 = p, *const end = r + strcspn(r, "?");
  while (*p) {
    int seg = p == p0 || p[-1] == '/';
    const char *close = seg && *p == '{' ? strchr(p, '}') : NULL;
    if (p[0] == '*' && p[1] == '\0')
      return 1;
    if (seg && ((p[0] == '*' && p[1] == '/') ||
                (close && (close[1] == '/' || close[1] == '\0')))) {
      const char *s = r;
      while (r < end && *r != '/')
        r++;
      if (r == s)
        return 0; /* a segment is never empty */
      if (close && name && (size_t)(close - p - 1) == namelen &&
          memcmp(p + 1, name, namelen) == 0) {
        *v = s;
        *vn = (size_t)(r - s);
      }
      p = close ? close + 1 : p + 1;
      continue;
    }
    if (r == end || *p != *r)
      return 0;
    p++;
    r++;
  }
  return r == end;
}

int sluice__route_match(const char *pm, const char *pr, const char *method,
                        const char *route) {
  if (strcmp(pm, "*") != 0 && strcmp(pm, method) != 0)
    return 0;
  return route_walk(pr, route, NULL, 0, NULL, NULL);
}

const char *sluice__route_param(const char *pattern, const char *route,
                                const char *name, size_t *n) {
  const char *v = NULL;
  size_t vn = 0;
  if (!route || !route_walk(pattern, route, name, strlen(name), &v, &vn))
    return NULL;
  *n = vn;
  return v;
}

/* A route of declared limits: its attributes are read when its program
** is built (declared.c); here only what the rest of the flow needs.  The
** tier, when given, must be configured (it may choose parameter sets, and
** it rows the counters). */
static int resolve_declared(sluice_policy *p, const sluice_request *q,
                            sluice__ctx *c, sluice_decision *d) {
  int rc;
  if (q->cost != 0) {
    d->invalid_field = "cost";
    return SLUICE_EINVAL; /* costs come from the file (a caller attribute) */
  }
  if ((rc = sluice__id_ok(q->client_ip, 0, "client_ip", d)))
    return rc;
  if (q->tier && (c->tier = sluice__policy_tier(p, q->tier)) < 0) {
    d->invalid_field = "tier";
    return SLUICE_ENOTFOUND;
  }
  sluice__decl_pick(c);
  if ((rc = sluice__decl_cost(c, &c->cost, d)))
    return rc;
  if (q->client_ip && p->cfg.ip_limit > 0)
    sluice__ip_scope(p, q->client_ip, c->I);
  return SLUICE_OK;
}

int sluice__resolve(sluice_policy *p, const sluice_request *q, sluice__ctx *c,
                    sluice_decision *d) {
  /* Not the attribute ids (flow.h): their bits say none is made. */
  memset(c, 0, offsetof(sluice__ctx, aid));
  c->p = p;
  c->req = q;
  c->tier = -1;
  c->droute = -1;
  if (q->nattrs && !q->attrs) {
    d->invalid_field = "attrs";
    return SLUICE_EINVAL;
  }
  if (!q->method || !q->route) {
    d->invalid_field = q->method ? "route" : "method";
    return SLUICE_EINVAL;
  }
  if (!p->decl || (c->droute = sluice__decl_match(p, q)) < 0) {
    d->invalid_field = "route";
    return SLUICE_ENOTFOUND;
  }
  return resolve_declared(p, q, c, d);
}
