/*
** The tenants' contacts file (include/sluice/webhook.h, contacts_path):
**
**     # TENANT_ID  ROLE   ADDRESSES
**     acme         tech   ops@acme.example,cto@acme.example
**     acme         owner  am-acme@vendor.example,pagerduty:R0UT1NGKEY
**
** Read once at open into an array searched on the sink's thread; a tenant
** may have several lines per role, whose addresses are joined.  A line
** with a role other than tech or owner, or fewer than three fields, is a
** configuration error naming its line.
*/
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sink.h"

#define SPACE " \t\n\v\f\r" /* isspace() in the C locale */

struct contact {
  char *tenant, *addrs;
  int role;
  contact *next;
};

void sluice__contacts_free(contact *c) {
  while (c) {
    contact *n = c->next;
    free(c->tenant);
    free(c->addrs);
    free(c);
    c = n;
  }
}

int sluice__contacts_load(const char *path, contact **out, char *err,
                          size_t errlen) {
  FILE *f = fopen(path, "r");
  char line[2048];
  contact *head = NULL, **tail = &head;
  int lineno = 0, rc = SLUICE_OK;
  *out = NULL;
  if (!f) {
    snprintf(err, errlen, "contacts %s: %s", path, strerror(errno));
    return SLUICE_EIO;
  }
  while (rc == SLUICE_OK && fgets(line, sizeof line, f)) {
    char *save = NULL, *hash = strchr(line, '#'), *t, *r, *a, *more;
    contact *c;
    lineno++;
    if (hash)
      *hash = 0;
    if (!(t = strtok_r(line, SPACE, &save)))
      continue;
    r = strtok_r(NULL, SPACE, &save);
    a = strtok_r(NULL, SPACE, &save);
    more = strtok_r(NULL, SPACE, &save);
    if (!r || !a || more || (strcmp(r, "tech") && strcmp(r, "owner"))) {
      snprintf(err, errlen,
               "contacts %s:%d: expected \"TENANT_ID tech|owner "
               "ADDRESS[,ADDRESS...]\"",
               path, lineno);
      rc = SLUICE_ECONFIG;
    } else if (!(c = calloc(1, sizeof *c)) || !(c->tenant = strdup(t)) ||
               !(c->addrs = strdup(a))) {
      if (c)
        sluice__contacts_free(c);
      snprintf(err, errlen, "out of memory");
      rc = SLUICE_ENOMEM;
    } else {
      c->role = r[0] == 't' ? SLUICE_WEBHOOK_TECH : SLUICE_WEBHOOK_OWNER;
      *tail = c;
      tail = &c->next;
    }
  }
  if (rc == SLUICE_OK && ferror(f)) {
    snprintf(err, errlen, "contacts %s: read error", path);
    rc = SLUICE_EIO;
  }
  fclose(f);
  if (rc != SLUICE_OK)
    sluice__contacts_free(head);
  else
    *out = head;
  return rc;
}

int sluice__contacts_find(const contact *c, const char *tenant, int role,
                          char *buf, size_t len) {
  size_t used = 0;
  buf[0] = 0;
  for (; c; c = c->next)
    if (c->role == role && !strcmp(c->tenant, tenant)) {
      int n = snprintf(buf + used, len - used, "%s%s", used ? "," : "",
                       c->addrs);
      if (n < 0 || (size_t)n >= len - used) {
        buf[used] = 0; /* what fits, whole addresses only */
        break;
      }
      used += (size_t)n;
    }
  return used ? SLUICE_OK : SLUICE_ENOTFOUND;
}
