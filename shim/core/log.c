/* log.c — the one log function of libpinwheel, and where its messages go.
 *
 * Owns: the level (PINWHEEL_LOG), the "pinwheel[pid]: " prefix, the cap on repeated warnings, and
 * pinwheel's copy of the stderr the program had when the shim loaded (pw_log_keep_stderr, from
 * pinwheel.c's constructor).  A program may close fd 2 and open its own data file there, or close
 * stderr at exit (coreutils do): the log and the summary still go to the stderr it started with,
 * never into whatever fd 2 has become.  The copy sits at a high descriptor, close-on-exec; before
 * each write it is checked to be still the same file (a program that closes every descriptor may
 * have closed it, and another file may have its number now): if not, nothing is written.
 * Must never: call CUDA, call malloc (it formats into a stack buffer), print below the level, or
 * write to fd 2 once the shim has kept its own copy of stderr.
 */
#define _GNU_SOURCE
#include "pw.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

static atomic_int log_level = PW_LOG_WARN;
static atomic_int warnings_left = 64; /* a storm of warnings helps nobody */

void pw_log_set_level(int level) {
  atomic_store(&log_level, level);
}
int pw_log_level(void) {
  return atomic_load(&log_level);
}

/* Where messages go: fd 2 until pw_log_keep_stderr ran (the CLI and the tests, which link the core
 * without the shim's constructor); then the kept copy, or nowhere if stderr was closed at load. */
static int err_kept;   /* pw_log_keep_stderr ran */
static int err_fd = 2; /* the copy, or -1 */
static dev_t err_dev;  /* what it was at load, to recognise it later */
static ino_t err_ino;
#define ERR_FD_MIN 900 /* below the usual 1024 descriptor limit, above what programs reach */

void pw_log_keep_stderr(void) {
  struct stat st;
  err_kept = 1;
  err_fd = -1;
  if (fstat(2, &st) != 0) return; /* no stderr at load: pinwheel prints nothing */
  int fd = fcntl(2, F_DUPFD_CLOEXEC, ERR_FD_MIN);
  if (fd < 0) fd = fcntl(2, F_DUPFD_CLOEXEC, 3); /* a descriptor limit below ERR_FD_MIN */
  if (fd < 0) return;
  err_dev = st.st_dev;
  err_ino = st.st_ino;
  err_fd = fd;
}

int pw_log_fd(void) {
  if (!err_kept) return 2;
  struct stat st;
  if (err_fd < 0 || fstat(err_fd, &st) != 0 || st.st_dev != err_dev || st.st_ino != err_ino)
    return -1;
  return err_fd;
}

void pw_write_all(int fd, const char *buf, size_t n) {
  while (fd >= 0 && n > 0) {
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
  pw_write_all(pw_log_fd(), buf, len);
  errno = saved;
}
