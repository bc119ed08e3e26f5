/*
** Criterion, or (with -DSLUICE_PLAIN_TESTS) the few pieces of its API the
** webhook suite uses, as a plain program: each Test() in turn, in one
** process, the first failed assertion ending it with status 1.
**
** Why: ThreadSanitizer cannot run Criterion.  Its runner (BoxFort) maps an
** "inheritable arena" with MAP_FIXED at random addresses from 0x2000...
** to 0x7f00... after probing them with mincore(); under TSan that whole
** range is TSan's (shadow and meta memory, reserved at start), so every
** probe finds it taken and Criterion stops with "Could not initialize
** inheritable arena" or crashes in libcriterion -- an empty Test() too.
** The same test source built this way runs under TSan
** (scripts/ci-hardening.sh, test "webhook-plain").
*/
#ifndef SLUICE_TESTS_CR_PLAIN_H
#define SLUICE_TESTS_CR_PLAIN_H

#ifndef SLUICE_PLAIN_TESTS
#include <criterion/criterion.h>
#else
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PLAIN_TESTS_MAX 64

typedef struct plain_test {
  const char *suite, *name;
  void (*fn)(void);
} plain_test;

static plain_test plain_tests[PLAIN_TESTS_MAX];
static int plain_ntests;

static void plain_register(const char *suite, const char *name,
                           void (*fn)(void)) {
  if (plain_ntests == PLAIN_TESTS_MAX) {
    fprintf(stderr, "cr_plain.h: more than %d tests\n", PLAIN_TESTS_MAX);
    exit(2);
  }
  plain_tests[plain_ntests++] = (plain_test){suite, name, fn};
}

/* No format attribute: the macros below pass one "" more than the format
** uses, which C11 7.21.6.1p2 allows and -Wformat would flag. */
static void plain_fail(const char *file, int line, const char *what,
                       const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "%s:%d: assertion failed: %s", file, line, what);
  if (fmt[0]) {
    fputs(": ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
  }
  fputc('\n', stderr);
  exit(1);
}

#define Test(suite, name)                                                    \
  static void suite##__##name(void);                                         \
  __attribute__((constructor)) static void suite##__##name##__reg(void) {    \
    plain_register(#suite, #name, suite##__##name);                          \
  }                                                                          \
  static void suite##__##name(void)

/* Every macro gets at least one argument after the checked ones (the "" ):
** ISO C11 wants one for a variadic macro's "...". */
#define PLAIN_CHECK(ok, what, ...)                                           \
  do {                                                                       \
    if (!(ok))                                                               \
      plain_fail(__FILE__, __LINE__, what, __VA_ARGS__);                     \
  } while (0)
#define PLAIN_ONE(c, ...) PLAIN_CHECK(c, #c, __VA_ARGS__)
#define PLAIN_EQ(a, b, ...) PLAIN_CHECK((a) == (b), #a " == " #b, __VA_ARGS__)
#define PLAIN_NULL(p, ...) PLAIN_CHECK((p) == NULL, #p " is NULL", __VA_ARGS__)
#define PLAIN_NOT_NULL(p, ...)                                               \
  PLAIN_CHECK((p) != NULL, #p " is not NULL", __VA_ARGS__)
#define PLAIN_STR_EQ(a, b, ...)                                              \
  PLAIN_CHECK(!strcmp(a, b), #a " equals " #b, __VA_ARGS__)
#define PLAIN_STR_NEQ(a, b, ...)                                             \
  PLAIN_CHECK(strcmp(a, b), #a " differs from " #b, __VA_ARGS__)

#define cr_assert(...) PLAIN_ONE(__VA_ARGS__, "")
#define cr_assert_eq(...) PLAIN_EQ(__VA_ARGS__, "")
#define cr_assert_null(...) PLAIN_NULL(__VA_ARGS__, "")
#define cr_assert_not_null(...) PLAIN_NOT_NULL(__VA_ARGS__, "")
#define cr_assert_str_eq(...) PLAIN_STR_EQ(__VA_ARGS__, "")
#define cr_assert_str_neq(...) PLAIN_STR_NEQ(__VA_ARGS__, "")

int main(void) {
  int i;
  for (i = 0; i < plain_ntests; i++) {
    plain_tests[i].fn();
    printf("ok %d %s::%s\n", i + 1, plain_tests[i].suite, plain_tests[i].name);
    fflush(stdout);
  }
  printf("%d tests passed\n", plain_ntests);
  return plain_ntests ? 0 : 1;
}
#endif
#endif
