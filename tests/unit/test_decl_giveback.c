/*
** A route whose limits span hash-tag groups gives back what an earlier
** group took when a later group refuses (lib/policy/declared.c
** give_back()): here a counted lease set (more than 32 leases: one record,
** its grant naming the lease's id) on the key's group, refused by a bucket
** on the tenant's.  The lease taken for the refused request is released
** by the id its grant named, in the one record build() keyed: the set
** holds the admitted request's lease alone.
*/
#include <criterion/criterion.h>
#include <string.h>
#include <unistd.h>

#include "sluice.h"

static sluice_policy *open_policy(void) {
  static const char text[] =
      "limits = {\n"
      "  conc = { algorithm = \"concurrency\"; scope = [ \"key\" ];\n"
      "           max = 100; ttl_ms = 60000; };\n"
      "  bucket = { algorithm = \"gcra\"; scope = [ \"tenant\" ]; rate = 1;\n"
      "             period_ms = 60000; burst = 1; };\n"
      "};\n"
      "routes = ( { method = \"*\"; route = \"/x\";\n"
      "             limits = ( \"conc\", \"bucket\" ); } );\n";
  char path[] = "/tmp/sluice-decl-giveback-XXXXXX", err[256] = "";
  sluice_policy_options po;
  sluice_policy *p = NULL;
  int fd = mkstemp(path), i;
  cr_assert(fd >= 0);
  cr_assert_eq(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
  close(fd);
  memset(&po, 0, sizeof po);
  po.config_path = path;
  po.errbuf = err;
  po.errlen = sizeof err;
  for (i = 0; i < 16; i++)
    po.secret[i] = (uint8_t)(i + 3);
  cr_assert_eq(sluice_policy_open(&po, &p), SLUICE_OK, "%s", err);
  unlink(path);
  return p;
}

Test(decl_giveback, a_counted_lease_is_released_when_a_later_group_refuses) {
  sluice_policy *p = open_policy();
  sluice_request r;
  sluice_decision d;
  sluice_limit_state st;
  sluice_inspect_query iq = {0};
  sluice_inspect_report rep;
  int i;
  memset(&r, 0, sizeof r);
  r.method = "GET";
  r.route = "/x";
  r.tenant_id = "t";
  r.api_key_id = "k";
  cr_assert_eq(sluice_policy_decide(p, 1, &r, &d, NULL), SLUICE_OK);
  cr_assert(d.allowed);
  for (i = 0; i < 3; i++) { /* the bucket is empty: refused, given back */
    cr_assert_eq(sluice_policy_decide(p, 1, &r, &d, NULL), SLUICE_OK);
    cr_assert(!d.allowed);
    cr_assert_str_eq(d.limit_name, "bucket");
  }
  iq.limit = "conc";
  iq.req = &r;
  cr_assert_eq(sluice_policy_inspect(p, &iq, &rep), SLUICE_OK, "%s",
               rep.invalid_field ? rep.invalid_field : "");
  st = rep.limit;
  cr_assert_eq(st.held, 1, "leases held: %d (the refused ones' kept)",
               st.held);
  sluice_policy_close(p);
}
