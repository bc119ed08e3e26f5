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

/* Each builder writes the key and its NUL into buf and returns it.  The
** per-IP backstop's window: */
sluice_key sluice__key_ip_window(char *buf, const char *I);

/* A declared limit's or penalty's record (declared.c): dl:{TAG}BODY,
** TAG SLUICE__ID64_LEN base64url characters, BODY bodylen bytes ("h" and
** a hash, or "n" and the limit's name), then ":" and slot (0 <= slot <
** 100; -1: none) and ":" and sfx (0: none). */
sluice_key sluice__key_declared(char *buf, const char *tag, const char *body,
                                size_t bodylen, int slot, char sfx);

#endif
