/*
** A main() for the fuzz targets without libFuzzer: runs
** LLVMFuzzerTestOneInput once on every file named on the command line
** (directories are walked one level deep).  This is how the seed corpora
** and the regression inputs run under gcc and in the sanitizer builds of
** the ordinary test suite.  Exit status 0 when every input ran; a broken
** invariant aborts inside the target.
*/
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);
__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  return 0;
}

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  uint8_t *buf;
  long n;
  if (!f) {
    fprintf(stderr, "cannot open %s\n", path);
    return -1;
  }
  fseek(f, 0, SEEK_END);
  n = ftell(f);
  fseek(f, 0, SEEK_SET);
  buf = malloc(n > 0 ? (size_t)n : 1);
  if (!buf || (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n)) {
    fprintf(stderr, "cannot read %s\n", path);
    fclose(f);
    free(buf);
    return -1;
  }
  fclose(f);
  LLVMFuzzerTestOneInput(buf, (size_t)n);
  free(buf);
  return 0;
}

int main(int argc, char **argv) {
  int ran = 0, bad = 0;
  LLVMFuzzerInitialize(&argc, &argv);
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      fprintf(stderr, "no such input %s\n", argv[i]);
      bad++;
      continue;
    }
    if (S_ISDIR(st.st_mode)) {
      struct dirent **ents;
      int n = scandir(argv[i], &ents, NULL, alphasort);
      for (int j = 0; j < n; j++) {
        char p[4096];
        if (ents[j]->d_name[0] != '.') {
          snprintf(p, sizeof p, "%s/%s", argv[i], ents[j]->d_name);
          if (stat(p, &st) == 0 && S_ISREG(st.st_mode)) {
            bad += run_file(p) != 0;
            ran++;
          }
        }
        free(ents[j]);
      }
      if (n >= 0)
        free(ents);
    } else {
      bad += run_file(argv[i]) != 0;
      ran++;
    }
  }
  printf("%d inputs ran, %d unreadable\n", ran, bad);
  return bad ? 1 : 0;
}
