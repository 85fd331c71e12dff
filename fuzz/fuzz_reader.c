/* fuzz_reader.c — libFuzzer target for the analyzer's readers (built twice: -DPW_FUZZ_NSYS for the
 * SQLite reader).  The input is written to a file, read with an_load, and when it reads, every
 * output form is produced into /dev/null, so the figures and writers see hostile data too.
 *   bash fuzz/run.sh [seconds]   (clang with -fsanitize=fuzzer,address,undefined)
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "an.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char path[64];
  if (!path[0]) snprintf(path, sizeof path, "/dev/shm/pwfuzz-%d", (int)getpid());
  FILE *f = fopen(path, "wb");
  if (!f) return 0;
#ifdef PW_FUZZ_NSYS
  /* keep the SQLite header so the nsys reader is the one exercised */
  fwrite("SQLite format 3", 1, 16, f);
  if (size > 16) fwrite(data + 16, 1, size - 16, f);
#else
  fwrite(data, 1, size, f);
#endif
  fclose(f);
  char err[512];
  an_trace *t = an_load(path, NULL, err, sizeof err);
  if (t) {
    an_options opt = {.timelines = 1};
    an_report *r = an_analyze(t, -1, &opt);
    FILE *null = fopen("/dev/null", "w");
    an_out o = {.f = null};
    an_write_text(&o, &r, 1);
    an_write_json(&o, &r, 1);
    an_write_html(&o, &r, 1);
    an_write_chrome(null, t);
    an_diff *d = an_compare(r, r);
    an_write_diff(&o, d);
    an_write_diff_json(&o, d);
    an_diff_free(d);
    if (r->nsteps) {
      an_report *s = an_analyze(t, r->steps[0].num, &opt);
      if (s) an_write_svg(&o, s, &s->timelines[0], 1);
      an_report_free(s);
    }
    fclose(null);
    an_report_free(r);
    an_free(t);
  }
  return 0;
}
