/*
** The auth flow: failures per subject and per IP, credential stuffing and
** the auth boxes, one program per scope.  See decide.c for the flow and
** choices f and g.
*/
#include <string.h>

#include "flow.h"

/* Subject and IP live under different hash tags: one program each.  The
** subject's runs first, because a subject seen from too many IPs trips the
** IP (stuffing), which the IP's program then does in the same call. */
enum { A_BOX, A_FAIL, A_DISTINCT, A_TRIP };     /* subject program */
enum { I_BOX, I_FAIL, I_STUFF, I_DISTINCT, I_TRIP3, I_TRIP1 }; /* IP */

int sluice__decide_auth(sluice__ctx *c, sluice_decision *d) {
  sluice_policy *p = c->p;
  int failed = c->req->auth_result >= SLUICE_AUTH_UNKNOWN_CLIENT;
  sluice_program_result rs, ri;
  const sluice_verdict *vs = NULL, *vi, *w;
  sluice__prog g;
  int rc, s, stuffing;

  if (c->has_subject) {
    g.nk = g.ns = 0;
    /* Keyed by what a stranger sends; a real client's failures (a wrong
    ** secret) are kept: a flood of made-up names must not reset them. */
    g.rclass = c->req->auth_result == SLUICE_AUTH_BAD_SECRET
                   ? SLUICE_CLASS_UNTRUSTED_KEPT
                   : SLUICE_CLASS_UNTRUSTED;
    SLUICE__REC(&g, sluice__key_auth, SLUICE_SCOPE_SUBJECT, SLUICE__AK_BOX,
                c->S);
    sluice__step(&g, SLUICE_ALGO_PENALTY, SLUICE_OP_CHECK, 0, 1,
                 &p->auth_penalty, 0, 0);
    if (failed) {
      const char *ip = c->I; /* by prefix: a /64 is one IP here too */
      SLUICE__REC(&g, sluice__key_auth, SLUICE_SCOPE_SUBJECT, SLUICE__AK_FAILS,
                  c->S);
      SLUICE__REC(&g, sluice__key_auth, SLUICE_SCOPE_SUBJECT,
                  SLUICE__AK_DISTINCT, c->S);
      s = sluice__step(&g, SLUICE_ALGO_SWINDOW, SLUICE_OP_COUNT, 1, 1,
                       &p->auth_subject, 1, 0);
      sluice__when(&g, s, SLUICE_WHEN_PASSED, 0, SLUICE_FOLD_NOTE);
      s = sluice__step(&g, SLUICE_ALGO_DISTINCT, SLUICE_OP_ADD, 2, 1,
                       &p->stuffing_ips, 0,
                       sluice_siphash64(p->secret, ip, strlen(ip)));
      sluice__when(&g, s, SLUICE_WHEN_PASSED, 0, SLUICE_FOLD_NOTE);
      s = sluice__step(&g, SLUICE_ALGO_PENALTY, SLUICE_OP_TRIP, 0, 1,
                       &p->auth_penalty, 1, 0);
      sluice__when(&g, s, SLUICE_WHEN_REACHED, A_FAIL, SLUICE_FOLD_NOTE);
    }
    if ((rc = sluice__run(c, &g, &rs)))
      return rc;
    vs = &rs.v[A_BOX];
  } else if (failed) {
    /* No subject: the unknown subject's failures window counts it (no box:
    ** boxing it would lock out every client whose subject the caller cannot
    ** see, and stop the IPs from counting, choice g). */
    g.nk = g.ns = 0;
    g.rclass = SLUICE_CLASS_UNTRUSTED;
    SLUICE__REC(&g, sluice__key_auth, SLUICE_SCOPE_SUBJECT, SLUICE__AK_FAILS,
                c->S);
    s = sluice__step(&g, SLUICE_ALGO_SWINDOW, SLUICE_OP_COUNT, 0, 1,
                     &p->auth_unknown, 1, 0);
    sluice__when(&g, s, SLUICE_WHEN_ALWAYS, 0, SLUICE_FOLD_NOTE);
    if ((rc = sluice__run(c, &g, &rs)))
      return rc;
  }
  g.nk = g.ns = 0;
  g.rclass = SLUICE_CLASS_UNTRUSTED;
  SLUICE__REC(&g, sluice__key_auth, SLUICE_SCOPE_IP, SLUICE__AK_BOX, c->I);
  sluice__step(&g, SLUICE_ALGO_PENALTY, SLUICE_OP_CHECK, 0, 1, &p->auth_penalty,
               0, 0);
  /* A boxed subject: the IP's box is only looked at (the longer one is
  ** reported), nothing is counted. */
  if (failed && (!vs || vs->allowed)) {
    /* Distinct subjects: every subject-less failure is the one "". */
    const char *subj = c->has_subject ? c->req->auth_subject : "";
    SLUICE__REC(&g, sluice__key_auth, SLUICE_SCOPE_IP, SLUICE__AK_FAILS, c->I);
    SLUICE__REC(&g, sluice__key_auth, SLUICE_SCOPE_IP, SLUICE__AK_STUFFING,
                c->I);
    SLUICE__REC(&g, sluice__key_auth, SLUICE_SCOPE_IP, SLUICE__AK_DISTINCT,
                c->I);
    s = sluice__step(&g, SLUICE_ALGO_SWINDOW, SLUICE_OP_COUNT, 1, 1,
                     &p->auth_ip, 1, 0);
    sluice__when(&g, s, SLUICE_WHEN_PASSED, 0, SLUICE_FOLD_NOTE);
    s = sluice__step(&g, SLUICE_ALGO_FWINDOW, SLUICE_OP_COUNT, 2, 1,
                     &p->stuffing, 1, 0);
    sluice__when(&g, s, SLUICE_WHEN_PASSED, 0, SLUICE_FOLD_NOTE);
    s = sluice__step(&g, SLUICE_ALGO_DISTINCT, SLUICE_OP_ADD, 3, 1,
                     &p->stuffing_subjects, 0,
                     sluice_siphash64(p->secret, subj, strlen(subj)));
    sluice__when(&g, s, SLUICE_WHEN_PASSED, 0, SLUICE_FOLD_NOTE);
    /* Stuffing: the IP's failures at their limit over too many subjects,
    ** or this subject failing from too many IPs: level 3 at once. */
    s = sluice__step(&g, SLUICE_ALGO_PENALTY, SLUICE_OP_TRIP, 0, 1,
                     &p->auth_penalty, 3, 0);
    if (vs && sluice__ran(&rs, A_DISTINCT) && !rs.v[A_DISTINCT].allowed) {
      sluice__when(&g, s, SLUICE_WHEN_PASSED, 0, SLUICE_FOLD_NOTE);
    } else {
      sluice__when(&g, s, SLUICE_WHEN_REACHED, I_STUFF, SLUICE_FOLD_NOTE);
      g.st[s].when2 = SLUICE_WHEN_DENIED;
      g.st[s].ref2 = I_DISTINCT;
    }
    s = sluice__step(&g, SLUICE_ALGO_PENALTY, SLUICE_OP_TRIP, 0, 1,
                     &p->auth_penalty, 1, 0);
    sluice__when(&g, s, SLUICE_WHEN_REACHED, I_FAIL, SLUICE_FOLD_NOTE);
    g.st[s].when2 = SLUICE_WHEN_SKIPPED;
    g.st[s].ref2 = I_TRIP3;
  }
  if ((rc = sluice__run(c, &g, &ri)))
    return rc;
  vi = &ri.v[I_BOX];
  sluice__box_seen(c, SLUICE_SCOPE_IP, c->I, vi);
  if (vs)
    sluice__box_seen(c, SLUICE_SCOPE_SUBJECT, c->S, vs);
  if (!vi->allowed || (vs && !vs->allowed)) {
    /* Report the box that lasts longer: that is when a retry can pass. */
    w = vi;
    if (vi->allowed ||
        (vs && !vs->allowed && vs->retry_after_ns > vi->retry_after_ns))
      w = vs;
    sluice__fill_box(c, w, d);
    return SLUICE_OK;
  }
  d->strikes_remaining = p->cfg.auth_subject_failures;
  if (!failed)
    return SLUICE_OK;

  /* A failure, whichever kind: from here on the two are one path. */
  d->strikes_remaining = vs && rs.v[A_FAIL].remaining < ri.v[I_FAIL].remaining
                             ? rs.v[A_FAIL].remaining
                             : ri.v[I_FAIL].remaining;
  stuffing = sluice__ran(&ri, I_TRIP3);
  if (stuffing) {
    d->flags |= SLUICE_DECISION_STUFFING;
    sluice__emit(c, SLUICE_EVENT_STUFFING, SLUICE_SCOPE_IP, 3, c->I, 0, 0);
  }
  if (stuffing || sluice__ran(&ri, I_TRIP1)) {
    const sluice_verdict *tv = &ri.v[stuffing ? I_TRIP3 : I_TRIP1];
    if (tv->flags & SLUICE_V_TRIPPED)
      sluice__tripped(c, SLUICE_SCOPE_IP, c->I, tv, d);
    sluice__fill_box(c, tv, d);
  }
  if (vs && sluice__ran(&rs, A_TRIP)) {
    const sluice_verdict *sv = &rs.v[A_TRIP];
    if (sv->flags & SLUICE_V_TRIPPED)
      sluice__tripped(c, SLUICE_SCOPE_SUBJECT, c->S, sv, d);
    if (d->outcome == SLUICE_OUTCOME_ALLOW ||
        sv->retry_after_ns > d->retry_after_ns)
      sluice__fill_box(c, sv, d);
  }
  return SLUICE_OK;
}
