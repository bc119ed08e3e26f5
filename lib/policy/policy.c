/*
** A policy's life: open (the configuration checked and turned into
** algorithm parameters once, so that a decision only builds keys and runs
** programs), close, and the tier lookup every entry point shares.  The
** request flow starts in decide.c.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "declared.h"
#include "policy_int.h"

static void derive(sluice_policy *p) {
  /* The Retry-After notice: its TTL comes from the denial (ttl_from). */
  p->notice = (sluice_lease_params){1, 1};
  p->ip_window =
      (sluice_window_params){p->cfg.ip_limit, p->cfg.ip_window_ns};
}

/* The breaker's parameters: probe_interval_ms is how long it stays open. */
static void breaker_params(const sluice__conf *c,
                           sluice__breaker_params *b) {
  b->window_ns = c->breaker_window_ns;
  b->min_calls = c->breaker_min_calls;
  b->failure_percent = c->breaker_failure_percent;
  b->run = c->breaker_run;
  b->open_ns = c->degraded_probe_ns;
  b->probes = c->breaker_probes;
}

/* A segment: the option when given, else the configuration's "host". */
#define HOST_URI(o, c, f) ((o)->f ? (o)->f : (c)->host_##f)

static void seterr(const sluice_policy_options *o, const char *msg) {
  if (o->errbuf && o->errlen && !o->errbuf[0])
    snprintf(o->errbuf, o->errlen, "%s", msg);
}

/* The host segments' strings, as the opens below will read them: a
** segment that cannot be named, or a parameter its open would refuse, is
** refused here before anything is attached. */
static int segments_check(const sluice_policy_options *o,
                          const sluice__conf *c, char *msg,
                          size_t len) {
  const char *u;
  char name[256], err[192];
  int rc;
  u = HOST_URI(o, c, counters);
  if (u && u[0] && (rc = sluice__seg_name("counters", u, name, msg, len)))
    return rc;
  u = HOST_URI(o, c, degraded_store);
  if (u && u[0]) {
    if ((rc = sluice__seg_name("degraded_store", u, name, msg, len)))
      return rc;
    if ((rc = sluice_store_check(u, err, sizeof err)) != SLUICE_OK) {
      int k = snprintf(msg, len, "degraded_store %s: ", name);
      if (k > 0 && (size_t)k < len)
        snprintf(msg + k, len - (size_t)k, "%s", err);
      return rc;
    }
  }
  u = HOST_URI(o, c, deny_cache);
  return u && u[0] ? sluice__deny_check(u, msg, len) : SLUICE_OK;
}

/* Everything open checks before it opens or attaches anything; *cfg gets
** the configuration, and *conf (when not NULL) a handle of it the policy
** keeps.  sluice_policy_check() is this alone. */
static int precheck(const sluice_policy_options *o, sluice__conf *cfg,
                    sluice__decl *dl, sluice_policy_config **conf, char *msg,
                    size_t len) {
  sluice_policy_config *h = NULL;
  int i, nonzero = 0, rc;
  if (o->flags & ~SLUICE_POLICY_SHADOW) {
    snprintf(msg, len, "unknown flags");
    return SLUICE_EINVAL;
  }
  for (i = 0; i < 16; i++)
    nonzero |= o->secret[i];
  if (!nonzero) {
    snprintf(msg, len,
             "secret: must not be all zero (scope ids would be guessable)");
    return SLUICE_EINVAL;
  }
  if (o->config) {
    rc = sluice__config_build(o->config, cfg, dl, msg, len);
    if (rc == SLUICE_OK && conf && !(h = sluice__config_clone(o->config)))
      rc = SLUICE_ENOMEM;
  } else {
    /* A file's or the defaults: its warning is not a failure. */
    rc = sluice_policy_config_new(&h, o->config_path, msg, len);
    if (rc == SLUICE_OK) {
      msg[0] = '\0';
      rc = sluice__config_build(h, cfg, dl, msg, len);
    }
  }
  if (rc == SLUICE_OK)
    rc = segments_check(o, cfg, msg, len);
  if (rc == SLUICE_OK && conf)
    *conf = h;
  else
    sluice_policy_config_free(h);
  return rc;
}

int sluice_policy_check(const sluice_policy_options *o) {
  sluice__conf cfg;
  char msg[512];
  int rc;
  if (!o)
    return SLUICE_EINVAL;
  if (o->errbuf && o->errlen)
    o->errbuf[0] = '\0';
  msg[0] = '\0';
  rc = precheck(o, &cfg, NULL, NULL, msg, sizeof msg);
  if (rc != SLUICE_OK)
    seterr(o, msg);
  return rc;
}

int sluice_policy_open(const sluice_policy_options *o, sluice_policy **out) {
  sluice__conf cfg;
  sluice__decl *dl;
  sluice_policy_config *conf = NULL;
  sluice_policy *p;
  char msg[512];
  int rc;

  if (!out)
    return SLUICE_EINVAL;
  *out = NULL;
  if (!o)
    return SLUICE_EINVAL;
  if (o->errbuf && o->errlen)
    o->errbuf[0] = '\0';
  msg[0] = '\0';
  dl = calloc(1, sizeof *dl);
  if (!dl)
    return SLUICE_ENOMEM;
  if ((rc = precheck(o, &cfg, dl, &conf, msg, sizeof msg)) != SLUICE_OK) {
    sluice__decl_free(dl);
    seterr(o, msg);
    return rc;
  }
  if (dl->nroutes == 0) {
    sluice__decl_free(dl);
    dl = NULL;
  }
  p = calloc(1, sizeof *p);
  if (!p) {
    sluice__decl_free(dl);
    sluice_policy_config_free(conf);
    return SLUICE_ENOMEM;
  }
  p->conf = conf;
  p->cfg = cfg;
  p->decl = dl;
  memcpy(p->secret, o->secret, 16);
  if (dl)
    sluice__decl_keyed(dl, p->secret);
  p->on_event = o->on_event;
  p->userdata = o->userdata;
  p->shadow = cfg.shadow || (o->flags & SLUICE_POLICY_SHADOW);
  derive(p);
  sluice__decl_check_built(p);
  {
    sluice__breaker_params bp;
    breaker_params(&cfg, &bp);
    if (sluice__breaker_init(&p->brk, &bp) != 0) {
      sluice__decl_free(p->decl);
      sluice_policy_config_free(p->conf);
      free(p);
      return SLUICE_ENOMEM;
    }
  }
  rc = sluice__counters_attach(p, HOST_URI(o, &p->cfg, counters), msg,
                               sizeof msg);
  if (rc != SLUICE_OK) {
    seterr(o, msg);
    sluice__breaker_destroy(&p->brk);
    sluice__decl_free(p->decl);
    sluice_policy_config_free(p->conf);
    free(p);
    return rc;
  }
  if (o->limiter) {
    p->lim = o->limiter;
  } else {
    rc = sluice_limiter_open(o->limiter_options, &p->lim, msg, sizeof msg);
    if (rc != SLUICE_OK) {
      seterr(o, msg);
      sluice__counters_detach(p);
      sluice__breaker_destroy(&p->brk);
      sluice__decl_free(p->decl);
      sluice_policy_config_free(p->conf);
      free(p);
      return rc;
    }
    p->own_lim = 1;
  }
  rc = sluice__range_check(p, msg, sizeof msg);
  /* degraded.c, deny_cache.c: in-process, or host-wide shm segments. */
  if (rc == SLUICE_OK)
    rc = sluice__degraded_open(p, HOST_URI(o, &p->cfg, degraded_store), msg,
                               sizeof msg);
  if (rc == SLUICE_OK &&
      (rc = sluice__deny_open(p, HOST_URI(o, &p->cfg, deny_cache), msg,
                              sizeof msg)) != SLUICE_OK)
    sluice_limiter_close(p->local);
  if (rc != SLUICE_OK) {
    if (p->own_lim)
      sluice_limiter_close(p->lim);
    sluice__counters_detach(p);
    sluice__breaker_destroy(&p->brk);
    sluice__decl_free(p->decl);
    sluice_policy_config_free(p->conf);
    free(p);
    seterr(o, msg);
    return rc;
  }
  *out = p;
  return SLUICE_OK;
}

void sluice_policy_close(sluice_policy *p) {
  if (!p)
    return;
  sluice_limiter_close(p->local);
  sluice__deny_close(p);
  if (p->own_lim)
    sluice_limiter_close(p->lim);
  sluice__counters_detach(p);
  sluice__breaker_destroy(&p->brk);
  sluice__decl_free(p->decl);
  sluice_policy_config_free(p->conf);
  free(p);
}

const sluice_policy_config *sluice_policy_config_of(const sluice_policy *p) {
  return p ? p->conf : NULL;
}

int sluice__conf_tier(const sluice__conf *c,
                      const char *name) {
  int i;
  if (!c || !name)
    return -1;
  for (i = 0; i < c->ntiers; i++)
    if (strcmp(c->tiers[i].name, name) == 0)
      return i;
  return -1;
}

int sluice__policy_tier(const sluice_policy *p, const char *name) {
  return sluice__conf_tier(&p->cfg, name);
}
