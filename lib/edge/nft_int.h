/*
** The nftables sink's private parts (include/sluice/nft.h is the API):
**   nft_text.c    names, the schema text, an address's set element
**   nft_list.c    the list of banned addresses and its state file
**   nft_worker.c  the thread: batches, transactions, resync, reconcile
**   nft.c         open / close, the event callback and its queue, counters
*/
#ifndef SLUICE_NFT_INT_H
#define SLUICE_NFT_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "sluice/algo.h"
#include "sluice/nft.h"

#define NFT_RAW_MAX 64  /* a raw client_ip as the request gave it, NUL incl. */
#define NFT_ELEM_MAX 48 /* "ffff:...:ffff/128" and a NUL */
#define NFT_ID_LEN 32   /* hashed scope ids: 32 hex digits */

typedef struct nft_names {
  char table[SLUICE_NFT_NAME_MAX + 1];
  char set4[SLUICE_NFT_NAME_MAX + 1];
  char set6[SLUICE_NFT_NAME_MAX + 1];
} nft_names;

/* Names from the options (defaults for NULL); SLUICE_EINVAL for a bad one. */
int sluice__nft_names(const sluice_nft_options *o, nft_names *n);

/* The schema commands for n, as sluice_nft_schema() fills buf. */
int sluice__nft_schema_text(const nft_names *n, char *buf, size_t len,
                            size_t *needed);

/* The set element of a raw address: "192.0.2.1", or the IPv6 network of
** its first prefix6 bits ("2001:db8:1:2::/64"; no "/128").  An IPv4-mapped
** IPv6 address is its IPv4 address.  Returns 4 or 6, or 0 when raw is not
** an address. */
int sluice__nft_element(const char *raw, int prefix6,
                        char elem[NFT_ELEM_MAX]);

/* ------------------------------------------------------------- the list --- */

enum { NFT_ADD = 1, NFT_DEL = 2 };

/* An address the sink put in a set.  end_mono: CLOCK_MONOTONIC ns when its
** box ends, or -1 for none (suspended). */
typedef struct nft_entry {
  char elem[NFT_ELEM_MAX];
  char raw[NFT_RAW_MAX];
  char scope_id[NFT_ID_LEN + 1];
  int fam; /* 4 or 6; 0: a free slot */
  int op;  /* in a batch or a reconcile's removals: NFT_DEL for a removal */
  int64_t end_mono;
} nft_entry;

/* Open addressing by element, linear probing, grown by doubling up to the
** cap.  Only the sink's thread touches it (and open / close). */
typedef struct nft_list {
  nft_entry *e;
  size_t cap, n, max;
} nft_list;

int sluice__nft_list_init(nft_list *l, size_t max);
void sluice__nft_list_free(nft_list *l);
void sluice__nft_list_clear(nft_list *l); /* empty, keeping its memory */
nft_entry *sluice__nft_list_find(nft_list *l, const char *elem);
nft_entry *sluice__nft_list_find_scope(nft_list *l, const char *scope_id);
/* The entry for elem, made (fam set, the rest zeroed) when missing; NULL
** when the list is at its cap or out of memory. */
nft_entry *sluice__nft_list_put(nft_list *l, const char *elem, int fam);
void sluice__nft_list_del(nft_list *l, nft_entry *e);
/* Drop entries whose box ended by now_mono. */
void sluice__nft_list_prune(nft_list *l, int64_t now_mono);

/* The state file: read (entries whose end passed are skipped), written
** atomically (temporary file, fsync, rename).  SLUICE_OK, SLUICE_EIO,
** SLUICE_ECORRUPT; a missing file reads as empty. */
int sluice__nft_list_load(nft_list *l, const char *path, int prefix6,
                          int64_t now_mono, int64_t now_real);
int sluice__nft_list_save(const nft_list *l, const char *path,
                          int64_t now_mono, int64_t now_real);

/* ------------------------------------------------------------ the queue --- */

typedef struct nft_item {
  int op;
  char raw[NFT_RAW_MAX];         /* "" when the event had no request */
  char scope_id[NFT_ID_LEN + 1];
  int64_t ttl_ns;                /* ADD: the box's time left; -1: none */
  int64_t enq_mono;              /* when queued */
} nft_item;

struct nft_ctx;

struct sluice_nft {
  nft_names names;
  int prefix6, min_level;
  unsigned flags;
  char *state_path;
  size_t batch_max;
  int64_t resync_ns; /* 0: never */

  pthread_mutex_t mu;
  pthread_cond_t wake; /* the thread: work, stop */
  pthread_cond_t done; /* sync waiters: applied moved */
  nft_item *ring;
  size_t qmax, head, count;
  uint64_t enq_seq, applied_seq; /* under mu */
  int stop;
  sluice_policy *reconcile; /* a reconcile asked for (under mu) */
  sluice_policy *policy;    /* the thread's: the last reconcile's, which
                               every periodic resync asks again */
  int resync_asked;         /* a resync without the store (under mu) */
  pthread_t thread;
  int started;

  /* The thread's own. */
  struct nft_ctx *nft;
  nft_list list;
  nft_item *batch;
  nft_list pending; /* a batch: one entry per address, the last update's */
  FILE *cmdf; /* the transaction being written into cmd */
  char *cmd;
  size_t cmdlen;
  int dirty;
  int64_t saved_mono, next_resync;

  _Atomic uint64_t queued, dropped, added, removed, failed, invalid,
      transactions, resyncs, elements;
  pthread_mutex_t errmu;
  char lasterr[256];
};

/* The thread (nft_worker.c). */
void *sluice__nft_thread(void *arg);
/* Run a transaction on the thread's context; SLUICE_OK or SLUICE_EBACKEND
** (the message kept in lasterr), SLUICE_EPERM. */
int sluice__nft_run(sluice_nft *s, const char *cmds);
/* The schema, run once (open, and when an update finds it missing). */
int sluice__nft_create(sluice_nft *s);
int64_t sluice__nft_mono_ns(void);
int64_t sluice__nft_real_ns(void);

#endif
