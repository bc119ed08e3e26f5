/*
** The API pointers of sluice_rm.h and their lookup (RedisModule_Init's
** steps, see the header).
*/
#include "sluice_rm.h"

#define SRM_DEFINE(ret, name, params) ret(*srm_##name) params;
SRM_API(SRM_DEFINE)
#undef SRM_DEFINE

typedef int (*srm_getapi)(const char *name, void *out);

int srm_init(RedisModuleCtx *ctx, const char *name, int ver) {
  /* The lookup function is the context's first word (documented layout). */
  srm_getapi get = *(srm_getapi *)(void *)ctx;
#define SRM_FETCH(ret, fn, params)                                             \
  if (get("RedisModule_" #fn, (void *)&srm_##fn) != SRM_OK)                    \
    return SRM_ERR;
  SRM_API(SRM_FETCH)
#undef SRM_FETCH
  if (srm_IsModuleNameBusy(name))
    return SRM_ERR;
  srm_SetModuleAttribs(ctx, name, ver, SRM_APIVER_1);
  return SRM_OK;
}
