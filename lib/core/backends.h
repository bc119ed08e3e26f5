/* Built-in backend classes.  A backend compiled out still defines its class
** (a stub whose xOpen says SLUICE_ENOTSUP). */
#ifndef SLUICE_LIB_BACKENDS_H
#define SLUICE_LIB_BACKENDS_H

#include "sluice/backend.h"

extern const sluice_backend sluice__backend_mem;
extern const sluice_backend sluice__backend_shm;
extern const sluice_backend sluice__backend_lmdb;
extern const sluice_backend sluice__backend_redis;
extern const sluice_backend sluice__backend_rediss; /* redis, TLS required */

#endif
