/* test_thresholds.c — every threshold's range, table-driven: for each row of AN_THRESHOLDS, values
 * below and above its range, a fraction where it takes a whole number, nan, infinities and a
 * number too large for a double are refused with a message naming the threshold and its range,
 * and the default, the ends of the range and a value inside are taken.  Then the messages
 * exactly, for the cases a user met. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "an.h"

/* name=value through the parser: 0 taken (and the value read back equals want), else -1 and err */
static int try(int i, const char *value, char *err, size_t n) {
  char a[128];
  snprintf(a, sizeof a, "%s=%s", an_thresholds[i].name, value);
  double before = an_thresholds[i].value;
  err[0] = 0;
  int rc = an_threshold_parse(a, err, n);
  if (rc) assert_true(an_thresholds[i].value == before); /* a refused value changes nothing */
  return rc;
}

static void refused(int i, const char *value, const char *why) {
  char err[2048], want[256];
  if (!try(i, value, err, sizeof err))
    fail_msg("%s=%s was taken; it should be refused (%s)", an_thresholds[i].name, value, why);
  snprintf(want, sizeof want, "--threshold %s=%s: ", an_thresholds[i].name, value);
  if (strncmp(err, want, strlen(want)))
    fail_msg("%s=%s (%s): the message '%s' does not start with '%s'", an_thresholds[i].name, value,
             why, err, want);
}

static void out_of_range(int i, const char *value, const char *why) {
  char err[2048], range[128];
  const an_threshold *t = &an_thresholds[i];
  refused(i, value, why);
  try(i, value, err, sizeof err);
  if (t->kind == AN_TR_ABOVE)
    snprintf(range, sizeof range, "must be a number above %.15g and at most %.15g", t->lo, t->hi);
  else
    snprintf(range, sizeof range, "must be %s from %.15g to %.15g",
             t->kind == AN_TR_INT ? "an integer" : "a number", t->lo, t->hi);
  if (!strstr(err, range))
    fail_msg("%s=%s (%s): '%s' does not say '%s'", t->name, value, why, err, range);
}

static void taken(int i, double v) {
  char err[2048], s[64];
  snprintf(s, sizeof s, "%.17g", v);
  if (try(i, s, err, sizeof err))
    fail_msg("%s=%s (in range) was refused: %s", an_thresholds[i].name, s, err);
  assert_true(an_thresholds[i].value == v);
}

static void every_range(void **state) {
  (void)state;
  char s[64];
  for (int i = 0; i < an_nthresholds; i++) {
    const an_threshold *t = &an_thresholds[i];
    double def = t->value;
    /* the table itself: a range, and the default inside it */
    assert_true(t->lo < t->hi);
    if (t->kind == AN_TR_ABOVE
            ? !(def > t->lo)
            : !(def >= t->lo) || !(def <= t->hi) || (t->kind == AN_TR_INT && def != floor(def)))
      fail_msg("%s: the default %g is outside its own range", t->name, def);
    /* below */
    snprintf(s, sizeof s, "%.15g", t->lo - 1);
    out_of_range(i, s, "below");
    if (t->kind == AN_TR_ABOVE) {
      snprintf(s, sizeof s, "%.15g", t->lo);
      out_of_range(i, s, "the excluded lower end");
    }
    /* above */
    snprintf(s, sizeof s, "%.15g", t->hi + 1);
    out_of_range(i, s, "above");
    snprintf(s, sizeof s, "%.15g", t->hi * 10);
    out_of_range(i, s, "far above");
    /* a fraction, where a whole number is needed */
    if (t->kind == AN_TR_INT) {
      snprintf(s, sizeof s, "%.15g", t->lo + 0.5);
      out_of_range(i, s, "not an integer");
    }
    /* not finite, or not a number at all */
    out_of_range(i, "inf", "infinite");
    out_of_range(i, "-inf", "minus infinity");
    out_of_range(i, "1e400", "beyond a double");
    refused(i, "nan", "not a number");
    refused(i, "abc", "not a number");
    refused(i, "5x", "trailing letters");
    refused(i, "", "no value");
    /* taken: the ends, a value inside, the default */
    if (t->kind != AN_TR_ABOVE) taken(i, t->lo);
    taken(i, t->hi);
    taken(i, t->kind == AN_TR_INT ? floor((t->lo + t->hi) / 2) : (t->lo + t->hi) / 2);
    taken(i, def);
  }
}

static void messages(void **state) {
  (void)state;
  static const struct {
    const char *arg, *err;
  } cases[] = {
      {"buckets=100", "--threshold buckets=100: must be an integer from 1 to 64"},
      {"buckets=2.5", "--threshold buckets=2.5: must be an integer from 1 to 64"},
      {"gap_ms=1e400", "--threshold gap_ms=1e400: must be a number from 0 to 60000"},
      {"gap_ms=nan", "--threshold gap_ms=nan: 'nan' is not a number"},
      {"gap_ms=", "--threshold gap_ms=: no value after '='"},
      {"h2d_gbps=0", "--threshold h2d_gbps=0: must be a number above 0 and at most 100000"},
      {"exposed_max_hidden_pct=150",
       "--threshold exposed_max_hidden_pct=150: must be a number from 0 to 100"},
      {"gap_ms", "--threshold gap_ms: not NAME=VALUE"},
  };
  char err[2048];
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    assert_int_equal(an_threshold_parse(cases[k].arg, err, sizeof err), -1);
    assert_string_equal(err, cases[k].err);
  }
  /* an unknown name: the names there are, every one */
  assert_int_equal(an_threshold_parse("x=1", err, sizeof err), -1);
  assert_non_null(strstr(err, "unknown threshold 'x'; the thresholds are: exposed_min_us, "));
  for (int i = 0; i < an_nthresholds; i++)
    assert_non_null(strstr(err, an_thresholds[i].name));
  /* the range as --help shows it */
  char range[64];
  an_threshold_range(AN_T_BUCKETS, range, sizeof range);
  assert_string_equal(range, "integer 1 to 64");
  an_threshold_range(AN_T_H2D_GBPS, range, sizeof range);
  assert_string_equal(range, ">0 to 100000");
  an_threshold_range(AN_T_GAP_MS, range, sizeof range);
  assert_string_equal(range, "0 to 60000");
  /* no words asked for: still refused */
  assert_int_equal(an_threshold_set("buckets=0"), -1);
  assert_int_equal(an_threshold_set("buckets=20"), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_range),
      cmocka_unit_test(messages),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
