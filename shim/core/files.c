/* files.c — opening the files pinwheel writes: the summary file (PINWHEEL_STATS_FILE) and the
 * trace (PINWHEEL_TRACE).
 *
 * Their names are often predictable (a pid, a rank) and in a directory others can write (/tmp), so
 * a file is opened as a careful program opens one there: never through a symlink (O_NOFOLLOW),
 * never a FIFO or device (O_NONBLOCK, then a regular file or nothing), never a file another user
 * owns or one that has other names (hard links), since writing there would write into someone
 * else's file. Summaries are appended (one write each: several processes can share one name and
 * none is lost); a trace replaces only a file that no live process is writing: the writer holds an
 * flock on it until it has finished, so an exec'd child given the same name sees it busy and takes
 * a name of its own instead of truncating its parent's trace.
 *
 * Owns: pw_open_output.  Must never: follow a symlink, truncate a file another process is writing,
 * or write into a file that is not a regular file of this user's with one name.
 */
#define _GNU_SOURCE
#include "pw.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

int pw_open_output(const char *path, int how, char *why, size_t n) {
  int flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
  if (how == PW_OUT_APPEND) flags |= O_APPEND;
  if (how == PW_OUT_NEW) flags |= O_EXCL;
  int fd = open(path, flags, 0644);
  if (fd < 0) {
    int e = errno;
    snprintf(why, n, "%s", e == ELOOP ? "it is a symbolic link" : strerror(e));
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_nlink != 1) {
    snprintf(why, n, "it is not a regular file of this user's with one name");
    close(fd);
    return -1;
  }
  fcntl(fd, F_SETFL, flags & O_APPEND); /* blocking again: a regular file */
  if (how != PW_OUT_APPEND) {
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      int e = errno;
      snprintf(why, n, "%s", e == EWOULDBLOCK ? "another process is writing it" : strerror(e));
      close(fd);
      return e == EWOULDBLOCK ? -2 : -1;
    }
    if (ftruncate(fd, 0) != 0) {
      snprintf(why, n, "%s", strerror(errno));
      close(fd);
      return -1;
    }
  }
  return fd;
}
