/* guard_hooks.h — between guard.c and memhooks.c (the exported free, realloc, munmap, mremap,
 * madvise, mmap, mprotect and shmat): what the hooks read on their fast path, and the one thing
 * guard.c asks of the hooks.  Not for the engine, which uses guard.h.
 */
#ifndef PW_GUARD_HOOKS_H
#define PW_GUARD_HOOKS_H

#include <stdatomic.h>
#include <stddef.h>

/* pw_guard_active()'s counter, read by the hooks with one relaxed load. */
extern atomic_int pw_guard_nactive;

/* Bumped after every munmap, mremap, MAP_FIXED mmap, mprotect and shmat: guard.c's cache of
 * verified mappings is valid only while it does not change. */
extern atomic_uint pw_guard_maps_gen;
static inline void pw_guard_maps_changed(void) {
  atomic_fetch_add_explicit(&pw_guard_maps_gen, 1, memory_order_release);
}

/* pw_guard_wait for a hook: 1 when it had to wait (counted for the summary). */
int pw_guard_hook_wait(const void *p, size_t n);

/* memhooks.c: NULL when every hooked function, as this process resolves it (dlsym RTLD_DEFAULT),
 * is memhooks.c's own, else the first name that is not (the file defining it in where).  Weak: a
 * build without memhooks.c (the engine's simulator test) has none, and guard.c then treats the
 * hooks as absent. */
const char *pw_memhooks_check(char *where, size_t n) __attribute__((weak));

#endif
