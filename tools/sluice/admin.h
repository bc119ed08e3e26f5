/*
** sluice inspect | release | lift | renew: what the command's files share, the
** parsed command line and the open store.  cmd_admin.c parses the
** arguments and opens the store, admin_inspect.c reads a scope and
** prints it, admin_release.c ends a box or lifts a suspension and writes
** its audit record.
*/
#ifndef SLUICE_CLI_ADMIN_H
#define SLUICE_CLI_ADMIN_H

#include <stdint.h>
#include <stdio.h>

#include "sluice.h"

typedef struct admin {
  const char *cmd;
  const char *store, *config, *secret_path, *audit, *who, *why;
  const char *tenant, *key, *tier, *ip, *subject;
  int scope; /* release, lift, renew: SLUICE_SCOPE_* */
  uint8_t secret[16];
  sluice_limiter *lim;
  sluice_policy *pol;
  int released_level;
  int64_t renewed_until_ns; /* renew: the new box end */
  /* --nft: the kernel sets get the change too (the event goes to a sink). */
  int nft;
  const char *nft_table;
  int nft_prefix;
  sluice_nft *sink;
  /* inspect: where the report goes before it is known to be readable, the
  ** records found under the scope's ids, and the ones that cannot belong
  ** to the configuration given. */
  FILE *out;
  int found, unfit;
  /* inspect: the request whose attributes name the scope (--attr, and
  ** --ledger, --subject as the `ledger` and `subject` attributes), the one
  ** limit asked for (--limit), or the limits only (--limits). */
  int only_limits;
  const char *limit, *method, *route;
  sluice_attr attrs[16];
  size_t nattrs;
} admin;

/* inspect: the scope's report, held back until it says something; a CLI_*
** exit code. */
int admin_inspect(admin *a);

/* The policy's event callback while releasing: records the level the
** release or lift ended (userdata: the admin). */
void admin_on_event(void *ud, const sluice_event *ev);

enum { ADMIN_RELEASE = 0, ADMIN_LIFT = 1, ADMIN_RENEW = 2 };

/* release, lift or renew the scope (ADMIN_*), with its audit record; a
** CLI_* exit code. */
int admin_release_or_lift(admin *a, int mode);

#endif
