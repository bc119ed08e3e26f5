/*
** Time units in nanoseconds, the library's clock unit, as int64_t so that
** products such as 90 * MIN never overflow int.
*/
#ifndef SLUICE_TEST_UNITS_H
#define SLUICE_TEST_UNITS_H

#include <stdint.h>

#define US INT64_C(1000)
#define MS INT64_C(1000000)
#define SEC INT64_C(1000000000)
#define MIN (60 * SEC)
#define HOUR (60 * MIN)

#endif
