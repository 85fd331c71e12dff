/* pw_demangle.h — C++ symbol names made readable, as Kineto shows kernels (abi::__cxa_demangle).
 *
 * Owns: finding libstdc++'s __cxa_demangle at run time (dlopen of libstdc++.so.6, dlsym), so that
 * neither the shim nor the analyzer links the C++ runtime (no NEEDED entry for it: the shim must
 * not pull one into a C program, and the analyzer's package depends on no C++ library); and the
 * call, which leaves a name that is not a mangled C++ name, or that cannot be demangled, alone.
 * Must never: hold state (the caller keeps what pw_demangle_resolve returns), or include a CUDA,
 * CUPTI, shim or report header (both halves include it).
 */
#ifndef PW_DEMANGLE_H
#define PW_DEMANGLE_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>

/* libstdc++'s C ABI: char *__cxa_demangle(const char *mangled, char *buf, size_t *n, int *st) */
typedef char *(*pw_cxa_demangle_fn)(const char *, char *, size_t *, int *);

/* __cxa_demangle from the libstdc++ already in the process, else (load: 1) loaded and kept for
 * it; NULL when there is none: names then stay as they are.  The shim passes 0: it never loads a
 * library into the program for a name (a program whose kernels have C++ names has libstdc++). */
static inline pw_cxa_demangle_fn pw_demangle_resolve(int load) {
  void *h = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_NOLOAD);
  if (!h && load) h = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL);
  if (!h) return NULL;
  pw_cxa_demangle_fn f;
  *(void **)&f = dlsym(h, "__cxa_demangle");
  return f;
}

/* The demangled name (malloc'd: the caller frees it), or NULL when name is not a mangled C++
 * name ("_Z..."), cannot be demangled, or fn is NULL. */
static inline char *pw_demangle(pw_cxa_demangle_fn fn, const char *name) {
  if (!fn || !name || name[0] != '_' || name[1] != 'Z') return NULL;
  int status = -1;
  char *d = fn(name, NULL, NULL, &status);
  if (status != 0) {
    free(d);
    return NULL;
  }
  return d;
}

#endif
