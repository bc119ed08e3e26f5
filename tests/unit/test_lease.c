#include "unit.h"
Test(placeholder, none) { cr_assert(1); }
