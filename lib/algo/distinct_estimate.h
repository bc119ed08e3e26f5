/*
** Linear counting's estimate for each number of bits set in distinct.c's
** 64-bit bitmap: round(-64 ln(1 - b/64)), saturating at 266.  A header of
** its own because the Redis script takes the same table (wire_lua.c
** prints it into the script's prelude).
*/
#ifndef SLUICE_DISTINCT_ESTIMATE_H
#define SLUICE_DISTINCT_ESTIMATE_H

#include <stdint.h>

static const uint16_t sluice__lc_estimate[65] = {
    0,   1,   2,   3,   4,   5,   6,   7,   9,   10,  11,  12,  13,
    15,  16,  17,  18,  20,  21,  23,  24,  25,  27,  28,  30,  32,
    33,  35,  37,  39,  40,  42,  44,  46,  48,  51,  53,  55,  58,
    60,  63,  65,  68,  71,  74,  78,  81,  85,  89,  93,  97,  102,
    107, 113, 119, 126, 133, 142, 151, 163, 177, 196, 222, 266, 266};

#endif
