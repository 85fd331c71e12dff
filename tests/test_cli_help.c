/* test_cli_help.c — `pinwheel CMD --help` lists everything CMD accepts: each option of the tables
 * the parsers take options from (cmd/help.c) is in its command's --help text, with its value as
 * the table spells it ("--steps all|summary", "-o FILE"), and the table's words checks hold
 * (pw_opt_take: an unknown option, a missing value, a word not offered are refused). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "cli.h"

/* s holds w, not as the start of a longer option ("--trace" in "--trace-delay" does not count) */
static int has_option(const char *s, const char *w) {
  size_t n = strlen(w);
  for (const char *p = strstr(s, w); p; p = strstr(p + 1, w)) {
    char before = p == s ? ' ' : p[-1], after = p[n];
    int word = (after >= 'a' && after <= 'z') || (after >= 'A' && after <= 'Z') || after == '-' ||
               after == '_' || (after >= '0' && after <= '9');
    if ((before == ' ' || before == '[' || before == '\n' || before == '(') && !word) return 1;
  }
  return 0;
}

static void every_option_in_help(void **state) {
  (void)state;
  int n = 0;
  for (const pw_cmd_opts *const *c = pw_cmds; *c; c++)
    for (int k = 0; k < (*c)->nopts; k++, n++) {
      const pw_opt *o = &(*c)->opts[k];
      char spelled[128];
      snprintf(spelled, sizeof spelled, "%s%s%s", o->name, o->value ? " " : "",
               o->value ? o->value : "");
      if (!has_option((*c)->help, spelled))
        fail_msg("pinwheel %s accepts %s, which its --help does not show", (*c)->cmd, spelled);
    }
  assert_true(n >= 20); /* run's 10, report's 7, diff's 3, export's 3 */
  assert_true(has_option(pw_help_report, "--steps all|summary"));
  /* run's help names the environment variable run reads itself */
  assert_non_null(strstr(pw_help_run, "PINWHEEL_LIBRARY: the libpinwheel.so that `pinwheel run` "
                                      "preloads\n(default: the one installed beside the command)"));
}

static void help_has_option_is_strict(void **state) {
  (void)state;
  assert_true(has_option("  --trace-delay S", "--trace-delay S"));
  assert_false(has_option("  --trace-delay S", "--trace"));
  assert_false(has_option("  --steps all", "--steps all|summary"));
  assert_true(has_option("[--whole-trace]", "--whole-trace"));
}

static void take(void **state) {
  (void)state;
  const char *v;
  int i = 1;
  char *ok[] = {"report", "--steps", "summary", NULL};
  assert_non_null(pw_opt_take(&pw_cmd_report_opts, 3, ok, &i, &v));
  assert_int_equal(i, 2);
  assert_string_equal(v, "summary");
  i = 1;
  char *word[] = {"report", "--steps", "some", NULL};
  assert_null(pw_opt_take(&pw_cmd_report_opts, 3, word, &i, &v));
  i = 1;
  char *missing[] = {"export", "-o", NULL};
  assert_null(pw_opt_take(&pw_cmd_export_opts, 2, missing, &i, &v));
  i = 1;
  char *unknown[] = {"diff", "--step", "3", NULL};
  assert_null(pw_opt_take(&pw_cmd_diff_opts, 3, unknown, &i, &v));
  i = 1;
  char *flag[] = {"diff", "--whole-trace", "a", NULL};
  assert_non_null(pw_opt_take(&pw_cmd_diff_opts, 3, flag, &i, &v));
  assert_int_equal(i, 1);
  assert_null(v);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_option_in_help),
      cmocka_unit_test(help_has_option_is_strict),
      cmocka_unit_test(take),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
