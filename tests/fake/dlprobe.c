/* dlprobe.c — two small libraries whose dlsym calls depend on who calls (test_driver):
 *   libdlprobe.so (linked by driver_prog): defines strfry, so dlsym(RTLD_NEXT, "strfry") from here
 *     must find libc's, not this one (it would, were RTLD_NEXT taken relative to the shim);
 *   libdlprobe_local.so (DLPROBE_LOCAL, opened RTLD_LOCAL): dlsym(RTLD_DEFAULT, ...) from here
 *     searches this library's own scope, so it finds a symbol the program's scope lacks. */
#define _GNU_SOURCE
#include <dlfcn.h>

/* glibc takes the caller from dlsym's return address: a tail call here would hand it this
 * function's caller instead, so the answers go through a volatile first. */
static void *not_a_tail_call(void *p) {
  void *volatile v = p;
  return v;
}

#ifdef DLPROBE_LOCAL
int dlprobe_local_marker;
void *dlprobe_default(void) {
  void *p = dlsym(RTLD_DEFAULT, "dlprobe_local_marker");
  return not_a_tail_call(p);
}
#else
char *strfry(char *s) {
  return s;
}
void *dlprobe_next(void) {
  void *p = dlsym(RTLD_NEXT, "strfry");
  return not_a_tail_call(p);
}
#endif
