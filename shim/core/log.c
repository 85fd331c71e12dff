/* log.c — the one log function of libpinwheel.
 *
 * Owns: the level (PINWHEEL_LOG), the "pinwheel[pid]: " prefix, the cap on repeated warnings.
 * Must never: call CUDA, call malloc (it formats into a stack buffer), or print below the level.
 */
#define _GNU_SOURCE
#include "pw.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

static atomic_int log_level = PW_LOG_WARN;
static atomic_int warnings_left = 64; /* a storm of warnings helps nobody */

void pw_log_set_level(int level) {
  atomic_store(&log_level, level);
}
int pw_log_level(void) {
  return atomic_load(&log_level);
}

void pw_write_all(int fd, const char *buf, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, buf, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;
    }
    buf += w;
    n -= (size_t)w;
  }
}

void pw_log(int level, const char *fmt, ...) {
  if (level > atomic_load(&log_level)) return;
  if (level == PW_LOG_WARN && atomic_fetch_sub(&warnings_left, 1) <= 0) return;
  static const char *const tags[] = {"error: ", "warning: ", "", "debug: "};
  char buf[1024];
  int n = snprintf(buf, sizeof buf, "pinwheel[%d]: %s", (int)getpid(), tags[level & 3]);
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
  va_end(ap);
  if (m < 0) m = 0;
  size_t len = (size_t)n + (size_t)m;
  if (len > sizeof buf - 2) len = sizeof buf - 2;
  buf[len++] = '\n';
  int saved = errno;
  pw_write_all(2, buf, len);
  errno = saved;
}
