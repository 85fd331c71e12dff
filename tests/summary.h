/* summary.h — reading pinwheel's JSON exit summary in the tests that run programs under the shim
 * (cmocka and yajl). */
#ifndef PW_TEST_SUMMARY_H
#define PW_TEST_SUMMARY_H
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <yajl/yajl_tree.h>

#include "helpers.h"

static inline yajl_val parse_file(const char *path) {
  char *text = slurp(path);
  assert_non_null(text);
  char eb[256];
  yajl_val v = yajl_tree_parse(text, eb, sizeof eb);
  if (!v) fail_msg("summary %s is not JSON (%s): %s", path, eb, text);
  free(text);
  return v;
}

/* A summary file holds one summary per process that appended to it (JSON lines): read the one
 * summary of the run just made, and remove the file, so that the next run starts afresh. */
static inline yajl_val parse_summary(const char *path) {
  yajl_val v = parse_file(path);
  unlink(path);
  return v;
}

static inline long long jget(yajl_val v, ...) {
  const char *path[8];
  int n = 0;
  va_list ap;
  va_start(ap, v);
  const char *k;
  while ((k = va_arg(ap, const char *)) && n < 7)
    path[n++] = k;
  va_end(ap);
  path[n] = NULL;
  yajl_val x = yajl_tree_get(v, path, yajl_t_number);
  if (!x)
    fail_msg("summary has no number at %s/%s/%s", path[0], n > 1 ? path[1] : "",
             n > 2 ? path[2] : "");
  return YAJL_GET_INTEGER(x);
}

static inline int str_is(yajl_val v, const char *want) {
  const char *s = v ? YAJL_GET_STRING(v) : NULL;
  return s && !strcmp(s, want);
}

/* The copies[] row for (direction, src, dst); -1 when absent. */
static inline long long copy_row(yajl_val v, const char *dir, const char *src, const char *dst,
                                 const char *field) {
  const char *p[] = {"copies", NULL};
  yajl_val arr = yajl_tree_get(v, p, yajl_t_array);
  assert_non_null(arr);
  for (size_t i = 0; i < arr->u.array.len; i++) {
    yajl_val row = arr->u.array.values[i];
    const char *pd[] = {"direction", NULL}, *ps[] = {"src", NULL}, *pt[] = {"dst", NULL};
    const char *pf[] = {field, NULL};
    if (str_is(yajl_tree_get(row, pd, yajl_t_string), dir) &&
        str_is(yajl_tree_get(row, ps, yajl_t_string), src) &&
        str_is(yajl_tree_get(row, pt, yajl_t_string), dst))
      return YAJL_GET_INTEGER(yajl_tree_get(row, pf, yajl_t_number));
  }
  return -1;
}

#endif
