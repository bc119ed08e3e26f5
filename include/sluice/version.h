/*
** sluice/version.h -- library version and ABI statement.
**
** ABI (docs/abi.md): unstable until 1.0.  A 0.x release may change any
** public struct, signature or export; the shared object carries the ABI
** version (abi_version in meson.build), which moves with every such change
** and is separate from the project version below: rebuild against the
** headers of the library you run with.  Reserved words stay only where
** outside code fills a struct across a boundary meant to hold still (the
** backend vtable's side, sluice/backend.h, and sluice_request); they are
** zero.
*/
#ifndef SLUICE_VERSION_H
#define SLUICE_VERSION_H

#define SLUICE_VERSION_MAJOR 0
#define SLUICE_VERSION_MINOR 1
#define SLUICE_VERSION_PATCH 0
#define SLUICE_VERSION_HEX                                                    \
  ((SLUICE_VERSION_MAJOR << 16) | (SLUICE_VERSION_MINOR << 8) |               \
   SLUICE_VERSION_PATCH)
#define SLUICE_VERSION_STRING "0.1.0"

#if defined(_WIN32)
#define SLUICE_EXPORT
#elif defined(__GNUC__) && !defined(SLUICE_STATIC_ONLY)
#define SLUICE_EXPORT __attribute__((visibility("default")))
#else
#define SLUICE_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** @brief The run-time version as a static string, e.g. "0.1.0"; with
 *  `hex` not NULL also as SLUICE_VERSION_HEX, to compare with the
 *  compile-time macro and detect a header/library mismatch. */
SLUICE_EXPORT const char *sluice_version(unsigned *hex);

#ifdef __cplusplus
}
#endif
#endif
