/*
** The store key schema (keys.c): every record the policy reads or writes,
** built from scope ids (SLUICE_SCOPE_ID_LEN hex digits each).  Decisions,
** releases and sluice_policy_inspect() all build keys here, so a key read
** back is always the key a decision wrote.
*/
#ifndef SLUICE_LIB_POLICY_KEYS_H
#define SLUICE_LIB_POLICY_KEYS_H

#include "sluice.h"

/* Room for any key of the schema, NUL included. */
#define SLUICE__KEYLEN 96

/* Each builder writes the key and its NUL into buf and returns it. */
sluice_key sluice__key_tenant_bucket(char *buf, const char *T);
sluice_key sluice__key_key_bucket(char *buf, const char *T, const char *K);
sluice_key sluice__key_key_box(char *buf, const char *T, const char *K);
sluice_key sluice__key_notice(char *buf, const char *T, const char *K);
sluice_key sluice__key_ledger(char *buf, const char *T, const char *L);
sluice_key sluice__key_export_cap(char *buf, const char *T);
/* Lease slot i (0 <= i < SLUICE_GROUP_MAX) of the tenant's reconcile
** (cls SLUICE_EP_RECONCILE) or export lease set; slot keys share a prefix,
** so slot_next() turns slot 0's key (in prev) into slot i's in buf. */
sluice_key sluice__key_slot(char *buf, const char *T, int cls, int i);
sluice_key sluice__key_slot_next(char *buf, sluice_key first, int i);

/* The auth records of a scope: SLUICE_SCOPE_IP (I) or _SUBJECT (S). */
enum {
  SLUICE__AK_BOX,      /* pb: the penalty box */
  SLUICE__AK_FAILS,    /* af: failures, sliding window */
  SLUICE__AK_DISTINCT, /* sd: distinct IPs (subject) / subjects (IP) */
  SLUICE__AK_STUFFING  /* sf: failures, fixed window (IP only) */
};
sluice_key sluice__key_auth(char *buf, int scope_kind, int record,
                            const char *id);
/* The per-IP backstop's window. */
sluice_key sluice__key_ip_window(char *buf, const char *I);

/* A declared limit's or penalty's record (declared.c): dl:{TAG}BODY,
** TAG SLUICE__ID64_LEN base64url characters, BODY bodylen bytes ("h" and
** a hash, or "n" and the limit's name), then ":" and slot (0 <= slot <
** 100; -1: none) and ":" and sfx (0: none). */
sluice_key sluice__key_declared(char *buf, const char *tag, const char *body,
                                size_t bodylen, int slot, char sfx);

#endif
