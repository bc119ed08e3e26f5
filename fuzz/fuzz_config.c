/*
** fuzz_config: the policy configuration loader (libconfig syntax,
** sluice_policy_config_new) on arbitrary files.
**
** Checks: the loader returns SLUICE_OK, SLUICE_ECONFIG or SLUICE_EIO, with
** a NUL-terminated message on failure that fits its buffer; a
** configuration it accepts opens a policy on a "mem" store (or, declaring
** no route, is refused with EINVAL naming routes) and decides one
** request of each of its tiers (each decide returns SLUICE_OK or an input
** error, never a store error); loading the same bytes twice gives the same
** values in force (the settings table's, the tiers').
*/
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "sluice.h"

/* The values in force that say most: the tiers and every table setting. */
static void dump(const sluice_policy_config *c, char *out, size_t n) {
  const sluice_policy_setting *st;
  char p[96], v[256];
  size_t used = 0;
  int i;
  out[0] = '\0';
  CHECK(sluice_policy_config_get(c, "tiers", v, sizeof v) == SLUICE_OK,
        "tiers");
  used += (size_t)snprintf(out, n, "tiers=%s\n", v);
  for (i = 0; (st = sluice_policy_setting_at(i)) != NULL && used < n; i++) {
    snprintf(p, sizeof p, "%s.%s", st->group, st->name);
    CHECK(sluice_policy_config_get(c, p, v, sizeof v) == SLUICE_OK, "%s", p);
    used += (size_t)snprintf(out + used, n - used, "%s=%s\n", p, v);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char d1[8192], d2[8192];
  sluice_policy_config *c1, *c2;
  char path[64], err[256], err2[256];
  int fd, rc, rc2;
  if (size > 1 << 16)
    return 0;
  fd = memfd_create("fuzz-config", MFD_CLOEXEC);
  CHECK(fd >= 0, "memfd");
  CHECK(write(fd, data, size) == (ssize_t)size, "write");
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  memset(err, 'x', sizeof err);
  rc = sluice_policy_config_new(&c1, path, err, sizeof err);
  rc2 = sluice_policy_config_new(&c2, path, err2, sizeof err2);
  close(fd);
  CHECK(rc == SLUICE_OK || rc == SLUICE_ECONFIG || rc == SLUICE_EIO,
        "load rc %d (%s)", rc, sluice_err_name(rc));
  CHECK(rc == rc2, "load not deterministic: %d then %d", rc, rc2);
  CHECK(memchr(err, '\0', sizeof err) != NULL, "message not terminated");
  if (rc != SLUICE_OK) {
    CHECK(err[0] != '\0', "failure without a message");
    CHECK(strcmp(err, err2) == 0, "messages differ");
    CHECK(!c1 && !c2, "a failed load gave a configuration");
    return 0;
  }
  dump(c1, d1, sizeof d1);
  dump(c2, d2, sizeof d2);
  CHECK(strcmp(d1, d2) == 0, "two loads differ");
  sluice_policy_config_free(c2);
  {
    sluice_policy_options po = {0};
    sluice_policy *p = NULL;
    sluice_clock *clk = NULL;
    sluice_limiter_options lo = {0};
    CHECK(sluice_clock_manual(1000000000, &clk) == SLUICE_OK, "clock");
    lo.clock = clk;
    po.limiter_options = &lo;
    po.config = c1;
    memset(po.secret, 7, sizeof po.secret);
    po.errbuf = err;
    po.errlen = sizeof err;
    rc = sluice_policy_open(&po, &p);
    /* A file may be built on by sluice_policy_config_set, so the loader
    ** takes one without routes; open refuses it, as docs/policy.md says. */
    if (rc == SLUICE_EINVAL && strstr(err, ": routes: no route (")) {
      sluice_clock_free(clk);
      sluice_policy_config_free(c1);
      return 0;
    }
    CHECK(rc == SLUICE_OK, "open with an accepted config: %s (%s)",
          sluice_err_name(rc), err);
    /* A request as every caller names one: method and route (the fuzzed
    ** file's routes pick the limits), in a few tiers (a tier a limit's
    ** `by` does not list takes its own numbers). */
    for (int i = 0; i < 4; i++) {
      static const char *const tiers[] = {"sandbox", "growth", "enterprise",
                                          "other"};
      sluice_request rq = {0};
      sluice_decision d;
      rq.tenant_id = "t1";
      rq.api_key_id = "k1";
      rq.tier = tiers[i];
      rq.method = "GET";
      rq.route = "/v1/ledgers/x";
      rc = sluice_policy_decide(p, 1, &rq, &d, NULL);
      CHECK(rc == SLUICE_OK || rc == SLUICE_ERANGE ||
                rc == SLUICE_ENOTFOUND || rc == SLUICE_EINVAL,
            "routed decide on tier %s: %s", rq.tier, sluice_err_name(rc));
      if (rc == SLUICE_OK)
        CHECK(d.store_error == 0,
              "first request of tier %s: store error %d", rq.tier,
              d.store_error);
    }
    sluice_policy_close(p);
    sluice_clock_free(clk);
  }
  sluice_policy_config_free(c1);
  return 0;
}
