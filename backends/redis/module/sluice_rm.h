/*
** The part of the Redis module API that sluice's module uses, declared
** here because no Debian package ships redismodule.h.  Written from the
** documented API (https://redis.io/docs/reference/modules/): a module
** context's first word is the server's lookup function, which hands out
** each API function by its name "RedisModule_<Name>".
**
** The pointers are named srm_* on purpose: redis-server exports its own
** RM_* functions, and a module global of such a name would bind to the
** server's symbol at load and crash it.  The module is also built with
** -fvisibility=hidden, so that only RedisModule_OnLoad is exported.
*/
#ifndef SLUICE_RM_H
#define SLUICE_RM_H

#include <stddef.h>

typedef struct RedisModuleCtx RedisModuleCtx;
typedef struct RedisModuleKey RedisModuleKey;
typedef struct RedisModuleString RedisModuleString;
typedef long long srm_mstime;
typedef int (*srm_cmdfunc)(RedisModuleCtx *ctx, RedisModuleString **argv,
                           int argc);

/* Values of the documented constants (stable since API version 1). */
#define SRM_OK 0
#define SRM_ERR 1
#define SRM_APIVER_1 1
#define SRM_READ (1 << 0)
#define SRM_WRITE (1 << 1)
#define SRM_KEYTYPE_EMPTY 0
#define SRM_KEYTYPE_STRING 1

/* X(return type, Name, parameter list): every function the module calls. */
#define SRM_API(X)                                                             \
  X(int, IsModuleNameBusy, (const char *name))                                 \
  X(void, SetModuleAttribs,                                                    \
    (RedisModuleCtx * ctx, const char *name, int ver, int apiver))             \
  X(int, CreateCommand,                                                        \
    (RedisModuleCtx * ctx, const char *name, srm_cmdfunc fn,                   \
     const char *flags, int firstkey, int lastkey, int keystep))               \
  X(int, IsKeysPositionRequest, (RedisModuleCtx * ctx))                        \
  X(void, KeyAtPos, (RedisModuleCtx * ctx, int pos))                           \
  X(const char *, StringPtrLen, (const RedisModuleString *s, size_t *len))     \
  X(int, StringToLongLong, (const RedisModuleString *s, long long *ll))         \
  X(RedisModuleKey *, OpenKey,                                                 \
    (RedisModuleCtx * ctx, RedisModuleString * name, int mode))                \
  X(void, CloseKey, (RedisModuleKey * key))                                    \
  X(int, KeyType, (RedisModuleKey * key))                                      \
  X(char *, StringDMA, (RedisModuleKey * key, size_t *len, int mode))          \
  X(RedisModuleString *, CreateString,                                         \
    (RedisModuleCtx * ctx, const char *ptr, size_t len))                       \
  X(void, FreeString, (RedisModuleCtx * ctx, RedisModuleString * s))           \
  X(int, StringSet, (RedisModuleKey * key, RedisModuleString * s))             \
  X(int, DeleteKey, (RedisModuleKey * key))                                    \
  X(int, SetAbsExpire, (RedisModuleKey * key, srm_mstime ms))                  \
  X(long long, Milliseconds, (void))                                           \
  X(int, Replicate,                                                            \
    (RedisModuleCtx * ctx, const char *cmd, const char *fmt, ...))             \
  X(int, ReplyWithArray, (RedisModuleCtx * ctx, long len))                     \
  X(int, ReplyWithStringBuffer,                                                \
    (RedisModuleCtx * ctx, const char *buf, size_t len))                       \
  X(int, ReplyWithLongLong, (RedisModuleCtx * ctx, long long x))               \
  X(int, ReplyWithNull, (RedisModuleCtx * ctx))                                \
  X(int, ReplyWithError, (RedisModuleCtx * ctx, const char *err))              \
  X(int, WrongArity, (RedisModuleCtx * ctx))

#define SRM_DECLARE(ret, name, params) extern ret(*srm_##name) params;
SRM_API(SRM_DECLARE)
#undef SRM_DECLARE

/* What RedisModule_Init does in the official header: fetch every pointer
** above, refuse a name already loaded, register the module's name.
** SRM_OK or SRM_ERR (a function this server does not have). */
int srm_init(RedisModuleCtx *ctx, const char *name, int ver);

#endif
