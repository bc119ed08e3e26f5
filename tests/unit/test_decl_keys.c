/*
** The declared limits' key layout (lib/policy/keys.c): dl:{TAG}BODY with
** 128-bit ids in base64url.  Each expected key is built here from the
** documented inputs (the keyed SipHash-2-4-128 of "attr=value" and a US
** separator, of a limit's or penalty's name, and the fold of the ids of a
** scope of several attributes) with a fold and an encoder of this file's
** own, and read back from the store a decision wrote, so a change of
** layout, hash input, fold or encoding fails here.
*/
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "scope_id.h"
#include "sluice.h"
#include "sluice/backend.h"
#include "siphash.h"

/* RFC 4648 section 5, bit by bit, no padding. */
static void b64url(const uint8_t *in, size_t n, char *out) {
  static const char al[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  size_t bits = 8 * n, i, o = 0;
  for (i = 0; i < bits; i += 6) {
    unsigned v = 0, b;
    for (b = 0; b < 6; b++) {
      size_t at = i + b;
      v = v << 1 | (at < bits ? (in[at / 8] >> (7 - at % 8)) & 1u : 0u);
    }
    out[o++] = al[v];
  }
  out[o] = '\0';
}

Test(decl_keys, base64url_of_128_bits) {
  uint8_t h[16];
  char mine[32], lib[SLUICE__ID64_LEN + 1];
  int t, i;
  srand(7);
  for (t = 0; t < 1000; t++) {
    for (i = 0; i < 16; i++)
      h[i] = (uint8_t)(t < 2 ? (t ? 0xff : 0) : rand());
    b64url(h, 16, mine);
    sluice__id_b64(h, lib);
    lib[SLUICE__ID64_LEN] = '\0';
    cr_assert_str_eq(lib, mine);
  }
}

/* Every 12-bit value in each half of each group of three bytes, and
** every last byte: each of the encoder's character pairs is checked. */
Test(decl_keys, base64url_every_pair) {
  uint8_t h[16];
  char mine[32], lib[SLUICE__ID64_LEN + 1];
  unsigned v, i;
  for (v = 0; v < 4096; v++) {
    uint32_t w = v << 12 | (4095 - v);
    for (i = 0; i < 5; i++) {
      h[3 * i] = (uint8_t)(w >> 16);
      h[3 * i + 1] = (uint8_t)(w >> 8);
      h[3 * i + 2] = (uint8_t)w;
    }
    h[15] = (uint8_t)v;
    b64url(h, 16, mine);
    sluice__id_b64(h, lib);
    lib[SLUICE__ID64_LEN] = '\0';
    cr_assert_str_eq(lib, mine, "v=%u", v);
  }
}

static const uint8_t secret[16] = {1, 2, 3, 4, 5, 6, 7, 8,
                                   9, 10, 11, 12, 13, 14, 15, 16};

/* The base64url keyed hash of a literal. */
#define ID64(lit, out) id64(lit, sizeof lit - 1, out)
static void id64(const char *data, size_t n, char out[SLUICE__ID64_LEN + 1]) {
  uint8_t h[16];
  sluice__siphash128(secret, data, n, h);
  b64url(h, 16, out);
}

/* splitmix64's finaliser, as keys.c documents it. */
static uint64_t fmix(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* The base64url id of a scope of several attributes: the keyed hash of
** the name, each attribute's keyed hash folded in (XOR, then the two
** halves' Feistel rounds: y ^= f(x), x ^= f(y)), the 16 bytes little-endian
** words as they are in memory. */
static void folded64(const char *name, const char *const *parts, int n,
                     char out[SLUICE__ID64_LEN + 1]) {
  uint64_t h[2], a[2];
  int i;
  sluice__siphash128(secret, name, strlen(name), (uint8_t *)h);
  for (i = 0; i < n; i++) {
    sluice__siphash128(secret, parts[i], strlen(parts[i]), (uint8_t *)a);
    h[0] ^= a[0];
    h[1] ^= a[1];
    h[1] ^= fmix(h[0]);
    h[0] ^= fmix(h[1]);
  }
  b64url((const uint8_t *)h, 16, out);
}

static int present(sluice_limiter *lim, const char *key) {
  sluice_state st;
  int64_t exp;
  return sluice_limiter_get(lim, key, strlen(key), &st, &exp) == SLUICE_OK;
}

Test(decl_keys, a_decision_writes_the_documented_keys) {
  static const char text[] =
      "attributes = [ \"user\" ];\n"
      "limits = {\n"
      "  per_tenant = { algorithm = \"gcra\"; scope = [ \"tenant\" ];\n"
      "                 rate = 10; period_ms = 1000; burst = 10; };\n"
      "  per_user = { algorithm = \"fixed_window\";\n"
      "               scope = [ \"tenant\", \"user\" ]; limit = 10;\n"
      "               window_ms = 60000; };\n"
      "  slots = { algorithm = \"concurrency\"; scope = [ \"tenant\" ];\n"
      "            max = 2; ttl_ms = 60000; };\n"
      "};\n"
      "penalties = { users = { scope = [ \"tenant\", \"user\" ];\n"
      "  strikes = 20; strike_window_ms = 60000; offense_ttl_s = 86400;\n"
      "  levels = ( { box_s = 300; }, { box_s = 3600; }, { box_s = 7200; } ); "
      "}; };\n"
      "routes = ( { method = \"*\"; route = \"/x\"; penalty = \"users\";\n"
      "             limits = ( \"per_tenant\", \"per_user\", \"slots\" ); } "
      ");\n";
  static const char *const user[] = {"user=octocat\x1f"};
  static const char *const tenant_user[] = {"tenant=acme\x1f",
                                            "user=octocat\x1f"};
  char path[] = "/tmp/sluice-decl-keys-XXXXXX", err[256] = "";
  char tag[SLUICE__ID64_LEN + 1], body[SLUICE__ID64_LEN + 1], key[128];
  sluice_limiter_options lo;
  sluice_policy_options po;
  sluice_limiter *lim;
  sluice_policy *pol;
  sluice_attr u = {"user", "octocat"};
  sluice_request r;
  sluice_decision d;
  int fd = mkstemp(path);
  cr_assert(fd >= 0);
  cr_assert_eq(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
  close(fd);
  memset(&lo, 0, sizeof lo);
  lo.store = "mem";
  cr_assert_eq(sluice_limiter_open(&lo, &lim, NULL, 0), SLUICE_OK);
  memset(&po, 0, sizeof po);
  po.config_path = path;
  po.limiter = lim;
  po.errbuf = err;
  po.errlen = sizeof err;
  memcpy(po.secret, secret, 16);
  cr_assert_eq(sluice_policy_open(&po, &pol), SLUICE_OK, "%s", err);
  unlink(path);
  memset(&r, 0, sizeof r);
  r.method = "GET";
  r.route = "/x";
  r.tenant_id = "acme";
  r.api_key_id = "k1";
  r.attrs = &u;
  r.nattrs = 1;
  cr_assert_eq(sluice_policy_decide(pol, 1, &r, &d, NULL), SLUICE_OK);
  cr_assert(d.allowed);

  ID64("tenant=acme\x1f", tag);
  snprintf(key, sizeof key, "dl:{%s}nper_tenant", tag);
  cr_assert(present(lim, key), "%s", key);
  cr_assert_eq(strlen(key), 4 + 22 + 1 + 1 + 10);
  folded64("per_user", user, 1, body);
  snprintf(key, sizeof key, "dl:{%s}h%s", tag, body);
  cr_assert(present(lim, key), "%s", key);
  cr_assert_eq(strlen(key), 50, "a hashed body's key is 50 bytes");
  /* A lease set's slot: one of the two holds the request's lease. */
  snprintf(key, sizeof key, "dl:{%s}nslots:0", tag);
  cr_assert(present(lim, key) ||
                (snprintf(key, sizeof key, "dl:{%s}nslots:1", tag) > 0 &&
                 present(lim, key)),
            "%s", key);
  /* Another secret's tag names no record. */
  snprintf(key, sizeof key, "dl:{%s}nper_tenant", body);
  cr_assert(!present(lim, key));
  /* The tenant's bucket refuses (10 a second; each lease let go): the
  ** Retry-After notice and the box, both keyed by the penalty's id (its
  ** name's, the tenant's and the user's ids folded in turn). */
  for (fd = 0; fd < 12 && d.allowed; fd++) {
    cr_assert_eq(sluice_policy_release(pol, &r,
                                       &(sluice_hold){.kind = SLUICE_HOLD_LEASE,
                                                      .lease_id = d.lease_id}),
                 SLUICE_OK);
    cr_assert_eq(sluice_policy_decide(pol, 1, &r, &d, NULL), SLUICE_OK);
  }
  cr_assert(!d.allowed);
  /* A refusal while the notice is up is the strike (decide.c, "A strike
  ** needs a notice"). */
  cr_assert_eq(sluice_policy_decide(pol, 1, &r, &d, NULL), SLUICE_OK);
  cr_assert(!d.allowed);
  folded64("users", tenant_user, 2, body);
  snprintf(key, sizeof key, "dl:{%s}h%s:r", tag, body);
  cr_assert(present(lim, key), "%s", key);
  snprintf(key, sizeof key, "dl:{%s}h%s:b", tag, body);
  cr_assert(present(lim, key), "%s", key);
  sluice_policy_close(pol);
  sluice_limiter_close(lim);
}
