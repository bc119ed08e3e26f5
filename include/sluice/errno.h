/*
** sluice/errno.h -- error codes.
**
** Every fallible function returns int: SLUICE_OK (0) when the library did its
** job, or one of the negative codes below.  A *decision* (allowed, denied,
** boxed) is never an error: it comes back in an out-struct.  The codes live in
** a reserved range below -30900 so that a raw errno or a hiredis/LMDB code
** passed through by mistake is obvious.  Backend detail (the errno, the Redis
** reply, the LMDB code) is kept on the handle: see sluice_limiter_errmsg().
*/
#ifndef SLUICE_ERRNO_H
#define SLUICE_ERRNO_H

#include "version.h"

#define SLUICE_ERRNO_MAP(XX)                                                   \
  XX(EINVAL, -30901, "invalid argument")                                       \
  XX(ERANGE, -30902, "value out of range")                                     \
  XX(ENOMEM, -30903, "out of memory")                                          \
  XX(EFULL, -30904, "store is full of live records")                           \
  XX(ENOTFOUND, -30905, "not found")                                           \
  XX(EBACKEND, -30906, "backend failure")                                      \
  XX(ETIMEDOUT, -30907, "backend timed out")                                   \
  XX(EUNAVAIL, -30908, "backend unavailable")                                  \
  XX(ENOTSUP, -30909, "not supported by this build or backend")                \
  XX(EVERSION, -30910, "version or layout mismatch")                           \
  XX(ECORRUPT, -30911, "corrupt state or mapping")                             \
  XX(EBUSY, -30912, "resource busy or locked")                                 \
  XX(EKEY, -30913, "invalid key (empty, oversized or mixed hash tags)")        \
  XX(ECONFIG, -30914, "invalid configuration")                                 \
  XX(EIO, -30915, "I/O error")                                                 \
  XX(EPERM, -30916, "permission denied")                                       \
  XX(EEXIST, -30917, "already exists")

#define SLUICE_OK 0
enum sluice_errno {
#define SLUICE__ERR_ENUM(name, code, msg) SLUICE_##name = (code),
  SLUICE_ERRNO_MAP(SLUICE__ERR_ENUM)
#undef SLUICE__ERR_ENUM
  SLUICE_ERRNO_LAST = -30917
};

#ifdef __cplusplus
extern "C" {
#endif

/** @brief A static, human-readable message for an error code.  Never NULL,
 *  never allocates; unknown codes give "unknown error". */
SLUICE_EXPORT const char *sluice_strerror(int err);
/** @brief The symbolic name of a code ("SLUICE_EFULL"), or "SLUICE_UNKNOWN". */
SLUICE_EXPORT const char *sluice_err_name(int err);

#ifdef __cplusplus
}
#endif
#endif
