/*
** The addresses the nftables sink has put in its sets, and the file that
** keeps them across a restart.
**
** Why the sink keeps its own list: store keys hold keyed hashes of scopes,
** never an address, and that is an invariant worth keeping (a fleet's
** Redis would otherwise hold every banned address in the clear, and every
** backend's record layout would grow for one sink).  The address is known
** where the ban is decided, in the event's request, and on the host whose
** kernel holds the set; so that host keeps it.  The store stays the truth
** for whether and how long an address is boxed: sluice_nft_reconcile()
** asks it for every address of the list.
**
** The file: a header line, then one line per address, "RAW SCOPE_ID END",
** END the box's end in CLOCK_REALTIME ns (-1: none), SCOPE_ID "-" when not
** known.  The element is derived again at load, so a changed ipv6_prefix
** applies to remembered addresses too.
*/
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nft_int.h"

#define HEADER "# sluice nft list v1\n"

static uint64_t hash_str(const char *s) {
  uint64_t h = UINT64_C(1469598103934665603); /* FNV-1a */
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * UINT64_C(1099511628211);
  return h;
}

int sluice__nft_list_init(nft_list *l, size_t max) {
  memset(l, 0, sizeof *l);
  l->max = max;
  l->cap = 64;
  l->e = calloc(l->cap, sizeof *l->e);
  return l->e ? SLUICE_OK : SLUICE_ENOMEM;
}

void sluice__nft_list_free(nft_list *l) {
  free(l->e);
  memset(l, 0, sizeof *l);
}

void sluice__nft_list_clear(nft_list *l) {
  memset(l->e, 0, l->cap * sizeof *l->e);
  l->n = 0;
}

nft_entry *sluice__nft_list_find(nft_list *l, const char *elem) {
  size_t i = (size_t)hash_str(elem) & (l->cap - 1);
  for (; l->e[i].fam; i = (i + 1) & (l->cap - 1))
    if (!strcmp(l->e[i].elem, elem))
      return &l->e[i];
  return NULL;
}

nft_entry *sluice__nft_list_find_scope(nft_list *l, const char *scope_id) {
  size_t i;
  for (i = 0; i < l->cap; i++)
    if (l->e[i].fam && !strcmp(l->e[i].scope_id, scope_id))
      return &l->e[i];
  return NULL;
}

static nft_entry *slot_for(nft_entry *e, size_t cap, const char *elem) {
  size_t i = (size_t)hash_str(elem) & (cap - 1);
  while (e[i].fam)
    i = (i + 1) & (cap - 1);
  return &e[i];
}

static int grow(nft_list *l) {
  size_t cap = l->cap * 2, i;
  nft_entry *e = calloc(cap, sizeof *e);
  if (!e)
    return SLUICE_ENOMEM;
  for (i = 0; i < l->cap; i++)
    if (l->e[i].fam)
      *slot_for(e, cap, l->e[i].elem) = l->e[i];
  free(l->e);
  l->e = e;
  l->cap = cap;
  return SLUICE_OK;
}

nft_entry *sluice__nft_list_put(nft_list *l, const char *elem, int fam) {
  nft_entry *e = sluice__nft_list_find(l, elem);
  if (e)
    return e;
  if (l->n >= l->max)
    return NULL;
  if ((l->n + 1) * 2 > l->cap && grow(l))
    return NULL;
  e = slot_for(l->e, l->cap, elem);
  memset(e, 0, sizeof *e);
  strcpy(e->elem, elem);
  e->fam = fam;
  l->n++;
  return e;
}

/* Linear probing's deletion: shift the entries after the hole back into
** it while their home slot allows, so that lookups need no tombstones. */
void sluice__nft_list_del(nft_list *l, nft_entry *e) {
  size_t mask = l->cap - 1, hole = (size_t)(e - l->e), i = hole;
  memset(&l->e[hole], 0, sizeof l->e[hole]);
  l->n--;
  for (;;) {
    size_t home;
    i = (i + 1) & mask;
    if (!l->e[i].fam)
      return;
    home = (size_t)hash_str(l->e[i].elem) & mask;
    /* Move it when its home is not within (hole, i], cyclically. */
    if ((i > hole && (home <= hole || home > i)) ||
        (i < hole && home <= hole && home > i)) {
      l->e[hole] = l->e[i];
      memset(&l->e[i], 0, sizeof l->e[i]);
      hole = i;
    }
  }
}

void sluice__nft_list_prune(nft_list *l, int64_t now_mono) {
  size_t i = 0;
  while (i < l->cap) {
    nft_entry *e = &l->e[i];
    if (e->fam && e->end_mono >= 0 && e->end_mono <= now_mono)
      sluice__nft_list_del(l, e); /* slot i may hold a shifted entry now */
    else
      i++;
  }
}

static int hex_id(const char *s) {
  return strlen(s) == NFT_ID_LEN && strspn(s, "0123456789abcdef") == NFT_ID_LEN;
}

int sluice__nft_list_load(nft_list *l, const char *path, int prefix6,
                          int64_t now_mono, int64_t now_real) {
  char line[256], raw[NFT_RAW_MAX], id[NFT_ID_LEN + 2], elem[NFT_ELEM_MAX];
  long long end;
  int rc = SLUICE_OK, fam;
  FILE *f = fopen(path, "r");
  if (!f)
    return errno == ENOENT ? SLUICE_OK : SLUICE_EIO;
  if (!fgets(line, sizeof line, f) || strcmp(line, HEADER)) {
    fclose(f);
    return SLUICE_ECORRUPT;
  }
  while (fgets(line, sizeof line, f)) {
    nft_entry *e;
    char extra;
    if (sscanf(line, "%63s %33s %lld %c", raw, id, &end, &extra) != 3 ||
        (strcmp(id, "-") && !hex_id(id)) || end < -1 ||
        !(fam = sluice__nft_element(raw, prefix6, elem))) {
      rc = SLUICE_ECORRUPT;
      break;
    }
    if (end != -1 && end <= now_real)
      continue; /* ended while the sink was down */
    if (!(e = sluice__nft_list_put(l, elem, fam)))
      break; /* a smaller max_elements than the file's: keep the first */
    snprintf(e->raw, sizeof e->raw, "%s", raw);
    if (strcmp(id, "-"))
      memcpy(e->scope_id, id, NFT_ID_LEN + 1); /* hex_id: 32 digits */
    e->end_mono = end == -1 ? -1 : now_mono + (end - now_real);
  }
  if (ferror(f))
    rc = SLUICE_EIO;
  fclose(f);
  return rc;
}

int sluice__nft_list_save(const nft_list *l, const char *path,
                          int64_t now_mono, int64_t now_real) {
  size_t plen = strlen(path), i;
  char *tmp = malloc(plen + 8);
  FILE *f;
  int ok;
  if (!tmp)
    return SLUICE_ENOMEM;
  memcpy(tmp, path, plen);
  memcpy(tmp + plen, ".tmp", 5);
  if (!(f = fopen(tmp, "w"))) {
    free(tmp);
    return SLUICE_EIO;
  }
  ok = fputs(HEADER, f) >= 0;
  for (i = 0; ok && i < l->cap; i++) {
    const nft_entry *e = &l->e[i];
    if (!e->fam)
      continue;
    ok = fprintf(f, "%s %s %" PRId64 "\n", e->raw,
                 e->scope_id[0] ? e->scope_id : "-",
                 e->end_mono < 0 ? (int64_t)-1
                                 : now_real + (e->end_mono - now_mono)) > 0;
  }
  ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
  ok = (fclose(f) == 0) && ok;
  ok = ok && rename(tmp, path) == 0;
  if (!ok)
    unlink(tmp);
  free(tmp);
  return ok ? SLUICE_OK : SLUICE_EIO;
}
