// The public headers must be usable from C++ (extern "C", no C-only
// constructs in declarations).
#include <sluice.h>

int main() {
  sluice_limiter *lim = nullptr;
  int rc = sluice_limiter_open(nullptr, &lim, NULL, 0);
  sluice_limiter_close(lim);
  return rc == SLUICE_OK ? 0 : 1;
}
