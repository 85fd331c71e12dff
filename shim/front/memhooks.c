/* memhooks.c — the program's memory calls that could free, unmap or replace the source of a
 * deferred copy: free, realloc, reallocarray, munmap, mremap, madvise (the advice that discards
 * contents), mmap/mmap64 with MAP_FIXED, mprotect that takes read access away, shmat with
 * SHM_REMAP.  Each waits until no guarded range (guard.c) overlaps what it touches, then calls the
 * real function; write-protection alone cannot stop these, since they replace pages instead of
 * writing them.  free is hooked because glibc unmaps a large block with an internal munmap that
 * no interposer sees.  munmap of a whole shared-memory mapping of 16 MiB or more (a
 * DataLoader's batch) first asks unmap.c to move it away and unmap it on pinwheel's thread.
 *
 * Owns: the exported memory functions above.
 * Must never: change a call's arguments, result or errno; allocate; take a lock.
 */

/* When nothing is guarded (pw_guard_active() == 0) every hook calls the real function after one
 * relaxed load: free runs millions of times a second.  The real functions are the next
 * definitions after libpinwheel.so (dlsym RTLD_NEXT), so a program linked with jemalloc or
 * tcmalloc keeps its allocator, and a block's extent is that allocator's malloc_usable_size.
 * They are found without dlsym: glibc's dlerror code frees its previous error string with free,
 * and a dlsym from inside that free re-enters the same code and frees the string twice (seen: a
 * program whose first free came from there).  next_symbol walks the loaded objects after this one
 * (dl_iterate_phdr, in the order of the global scope) and looks the name up in each one's dynamic
 * symbol table (GNU or SysV hash), as RTLD_NEXT would: no dlerror state, no malloc.  A
 * constructor (which does nothing else; pinwheel.c's is the shim's other one) resolves them all at
 * load; a call that comes earlier resolves on the spot.  Only if that lookup fails does the
 * constructor ask dlsym; while it runs on this thread, free and realloc go to glibc's __libc_free /
 * __libc_realloc.  munmap, mremap, mprotect, MAP_FIXED mmap and shmat also tell guard.c that
 * mappings changed (its cache of verified mappings).
 *
 * Async-signal safety: munmap and the others may be called from a signal handler; the hooks take
 * no lock (pw_guard_wait sleeps on a futex) and allocate nothing.
 */
#define _GNU_SOURCE
#include "guard.h"
#include "guard_hooks.h"
#include "unmap.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define TLS __thread __attribute__((tls_model("initial-exec")))
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

#ifndef MADV_DONTNEED_LOCKED
#define MADV_DONTNEED_LOCKED 24
#endif
#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#endif
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif
#ifndef SHM_REMAP
#define SHM_REMAP 040000
#endif

void __libc_free(void *);
void *__libc_realloc(void *, size_t);

/* volatile: the compiler must not drop the store around dlsym, which re-enters free */
static TLS volatile int resolving; /* dlsym is running on this thread */

/* ---- the next definition of a name, as RTLD_NEXT finds it, without the dl* API ---- */

typedef struct lookup {
  const char *name;
  uintptr_t self; /* this object's load address */
  int past_self;
  int first; /* from the first object on, any definition (IFUNCs too): what calls reach */
  void *found;
  uintptr_t found_in;     /* the load address of the object that defines it */
  const char *found_name; /* its file ("" for the program) */
} lookup;

static uint32_t gnu_hash(const char *s) {
  uint32_t h = 5381;
  for (; *s; s++)
    h = h * 33 + (unsigned char)*s;
  return h;
}

static uint32_t sysv_hash(const char *s) {
  uint32_t h = 0, g;
  for (; *s; s++) {
    h = (h << 4) + (unsigned char)*s;
    g = h & 0xf0000000u;
    if (g) h ^= g >> 24;
    h &= ~g;
  }
  return h;
}

/* A defined, exported function or object, of the default version; an IFUNC only when any_type
 * (calling one needs its resolver: that is dlsym's work). */
static int usable_sym(const ElfW(Sym) * sym, const ElfW(Half) * versym, size_t i, int any_type) {
  int type = sym->st_info & 0xf, bind = sym->st_info >> 4; /* ELF32_ and ELF64_ST_TYPE/BIND */
  /* an undefined symbol with a value is a non-PIE program's canonical PLT entry (the program
   * takes the function's address): calls through it reach the next definition */
  if (sym->st_shndx == SHN_UNDEF || !sym->st_value) return 0;
  if (type != STT_FUNC && type != STT_OBJECT && !(any_type && type == STT_GNU_IFUNC)) return 0;
  if (bind != STB_GLOBAL && bind != STB_WEAK) return 0;
  if ((sym->st_other & 0x3) != STV_DEFAULT) return 0;
  if (versym && (versym[i] & 0x8000)) return 0; /* a hidden (non-default) version */
  return 1;
}

static int found(lookup *l, const struct dl_phdr_info *info, const ElfW(Sym) * sym) {
  l->found = (void *)(info->dlpi_addr + sym->st_value);
  l->found_in = info->dlpi_addr;
  l->found_name = info->dlpi_name ? info->dlpi_name : "";
  return 1;
}

static int lookup_object(struct dl_phdr_info *info, size_t size, void *data) {
  lookup *l = data;
  if (!l->first && !l->past_self) {
    l->past_self = info->dlpi_addr == l->self;
    return 0;
  }
  const ElfW(Dyn) *dyn = NULL;
  for (int i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
      dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
  if (!dyn) return 0;
  const ElfW(Sym) *symtab = NULL;
  const char *strtab = NULL;
  const uint32_t *gnu = NULL, *sysv = NULL;
  const ElfW(Half) *versym = NULL;
  for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++) {
    /* the loader has made most of these absolute; the vDSO's (and a read-only dynamic
     * section's) are still relative to the load address */
    uintptr_t v = d->d_un.d_ptr;
    if (v < info->dlpi_addr) v += info->dlpi_addr;
    switch (d->d_tag) {
    case DT_SYMTAB:
      symtab = (const ElfW(Sym) *)v;
      break;
    case DT_STRTAB:
      strtab = (const char *)v;
      break;
    case DT_GNU_HASH:
      gnu = (const uint32_t *)v;
      break;
    case DT_HASH:
      sysv = (const uint32_t *)v;
      break;
    case DT_VERSYM:
      versym = (const ElfW(Half) *)v;
      break;
    default:
      break;
    }
  }
  if (!symtab || !strtab) return 0;
  const char *name = l->name;
  if (gnu) {
    uint32_t nbuckets = gnu[0], symoffset = gnu[1], bloom_size = gnu[2], h = gnu_hash(name);
    const ElfW(Addr) *bloom = (const ElfW(Addr) *)(gnu + 4);
    const uint32_t *buckets = (const uint32_t *)(bloom + bloom_size), *chain = buckets + nbuckets;
    if (!nbuckets) return 0;
    uint32_t i = buckets[h % nbuckets];
    if (i < symoffset) return 0;
    for (;; i++) {
      uint32_t ch = chain[i - symoffset];
      if ((ch | 1) == (h | 1) && !strcmp(strtab + symtab[i].st_name, name) &&
          usable_sym(&symtab[i], versym, i, l->first))
        return found(l, info, &symtab[i]);
      if (ch & 1) return 0;
    }
  }
  if (sysv) {
    uint32_t nbucket = sysv[0];
    const uint32_t *bucket = sysv + 2, *chain = bucket + nbucket;
    for (uint32_t i = nbucket ? bucket[sysv_hash(name) % nbucket] : 0; i; i = chain[i])
      if (!strcmp(strtab + symtab[i].st_name, name) && usable_sym(&symtab[i], versym, i, l->first))
        return found(l, info, &symtab[i]);
  }
  return 0;
}

/* this object's load address (what dl_iterate_phdr calls dlpi_addr), or 0 */
static uintptr_t self_addr(void) {
  Dl_info self;
  struct link_map *lm = NULL;
  if (!dladdr1((void *)self_addr, &self, (void **)&lm, RTLD_DL_LINKMAP) || !lm) return 0;
  return (uintptr_t)lm->l_addr;
}

static void *next_symbol(const char *name) {
  lookup l = {.name = name, .self = self_addr()};
  if (!l.self) return NULL;
  dl_iterate_phdr(lookup_object, &l);
  return l.found;
}

static void *next(const char *name) {
  return next_symbol(name);
}

/* The constructor's last resort (never from a hook: see above). */
static void *next_dlsym(const char *name) {
  void *f = next_symbol(name);
  if (f) return f;
  resolving++;
  f = dlsym(RTLD_NEXT, name);
  resolving--;
  return f;
}

typedef void (*free_fn)(void *);
typedef void *(*realloc_fn)(void *, size_t);
typedef void *(*reallocarray_fn)(void *, size_t, size_t);
typedef size_t (*usable_fn)(void *);
typedef int (*munmap_fn)(void *, size_t);
typedef void *(*mremap_fn)(void *, size_t, size_t, int, ...);
typedef int (*madvise_fn)(void *, size_t, int);
typedef void *(*mmap_fn)(void *, size_t, int, int, int, off_t);
typedef int (*mprotect_fn)(void *, size_t, int);
typedef void *(*shmat_fn)(int, const void *, int);

static free_fn real_free;
static realloc_fn real_realloc;
static reallocarray_fn real_reallocarray;
static usable_fn real_usable;
static munmap_fn real_munmap;
static mremap_fn real_mremap;
static madvise_fn real_madvise;
static mmap_fn real_mmap, real_mmap64;
static mprotect_fn real_mprotect;
static shmat_fn real_shmat;

/* The real function in f_ (two threads racing store the same answer). */
#define REAL(type, var, name)                                                                      \
  type f_ = __atomic_load_n(&var, __ATOMIC_RELAXED);                                               \
  if (UNLIKELY(!f_)) {                                                                             \
    *(void **)&f_ = next(name);                                                                    \
    __atomic_store_n(&var, f_, __ATOMIC_RELAXED);                                                  \
  }

#define RESOLVE(var, name)                                                                         \
  do {                                                                                             \
    void *f_ = next_dlsym(name);                                                                   \
    if (f_) __atomic_store_n((void **)&var, f_, __ATOMIC_RELAXED);                                 \
  } while (0)

__attribute__((constructor)) static void memhooks_resolve(void) {
  RESOLVE(real_free, "free");
  RESOLVE(real_realloc, "realloc");
  RESOLVE(real_reallocarray, "reallocarray");
  RESOLVE(real_usable, "malloc_usable_size");
  RESOLVE(real_munmap, "munmap");
  RESOLVE(real_mremap, "mremap");
  RESOLVE(real_madvise, "madvise");
  RESOLVE(real_mmap, "mmap");
  RESOLVE(real_mmap64, "mmap64");
  RESOLVE(real_mprotect, "mprotect");
  RESOLVE(real_shmat, "shmat");
}

static inline int guarding(void) {
  return UNLIKELY(atomic_load_explicit(&pw_guard_nactive, memory_order_relaxed) != 0);
}

/* ---- the heap ---- */

/* Wait until no guard overlaps the heap block p. */
static void block_wait(void *p) {
  REAL(usable_fn, real_usable, "malloc_usable_size")
  if (!f_ || resolving) return;
  pw_guard_hook_wait(p, f_(p));
}

EXPORT void free(void *p) {
  if (guarding() && p) block_wait(p);
  if (UNLIKELY(resolving)) {
    __libc_free(p);
    return;
  }
  REAL(free_fn, real_free, "free")
  if (UNLIKELY(!f_)) f_ = __libc_free;
  f_(p);
}

EXPORT void *realloc(void *p, size_t n) {
  if (guarding() && p) block_wait(p);
  if (UNLIKELY(resolving)) return __libc_realloc(p, n);
  REAL(realloc_fn, real_realloc, "realloc")
  if (UNLIKELY(!f_)) f_ = __libc_realloc;
  return f_(p, n);
}

/* glibc's reallocarray calls its realloc internally, past the hook above */
EXPORT void *reallocarray(void *p, size_t m, size_t n) {
  if (guarding() && p) block_wait(p);
  REAL(reallocarray_fn, real_reallocarray, "reallocarray")
  if (UNLIKELY(!f_)) {
    if (n && m > SIZE_MAX / n) {
      errno = ENOMEM;
      return NULL;
    }
    return realloc(p, m * n);
  }
  return f_(p, m, n);
}

/* ---- mappings ---- */

EXPORT int munmap(void *a, size_t n) {
  if (guarding()) pw_guard_hook_wait(a, n);
  if (n >= PW_UNMAP_MIN && pw_unmap_defer(a, n)) { /* moved away: unmapped off this thread */
    pw_guard_maps_changed();
    return 0;
  }
  REAL(munmap_fn, real_munmap, "munmap")
  int r = f_ ? f_(a, n) : (int)syscall(SYS_munmap, a, n);
  pw_guard_maps_changed();
  return r;
}

EXPORT void *mremap(void *a, size_t old, size_t n, int flags, ...) {
  void *to = NULL;
  if (flags & MREMAP_FIXED) {
    va_list ap;
    va_start(ap, flags);
    to = va_arg(ap, void *);
    va_end(ap);
  }
  if (guarding()) {
    pw_guard_hook_wait(a, old ? old : n); /* old == 0: a shared mapping's duplicate */
    if (to) pw_guard_hook_wait(to, n);
  }
  REAL(mremap_fn, real_mremap, "mremap")
  void *r = f_ ? f_(a, old, n, flags, to) : (void *)syscall(SYS_mremap, a, old, n, flags, to);
  pw_guard_maps_changed();
  return r;
}

static int discards(int advice) {
  switch (advice) {
  case MADV_DONTNEED:
  case MADV_FREE:
  case MADV_REMOVE:
  case MADV_DONTNEED_LOCKED:
  case MADV_GUARD_INSTALL:
    return 1;
  default:
    return 0;
  }
}

EXPORT int madvise(void *a, size_t n, int advice) {
  if (guarding() && discards(advice)) pw_guard_hook_wait(a, n);
  REAL(madvise_fn, real_madvise, "madvise")
  return f_ ? f_(a, n, advice) : (int)syscall(SYS_madvise, a, n, advice);
}

static void *map(mmap_fn f, void *a, size_t n, int prot, int flags, int fd, off_t off) {
  int fixed = (flags & MAP_FIXED) && !(flags & MAP_FIXED_NOREPLACE);
  if (fixed && guarding()) pw_guard_hook_wait(a, n);
  void *r =
      f ? f(a, n, prot, flags, fd, off) : (void *)syscall(SYS_mmap, a, n, prot, flags, fd, off);
  if (fixed) pw_guard_maps_changed(); /* a mapping without MAP_FIXED replaces none */
  return r;
}

EXPORT void *mmap(void *a, size_t n, int prot, int flags, int fd, off_t off) {
  REAL(mmap_fn, real_mmap, "mmap")
  return map(f_, a, n, prot, flags, fd, off);
}

EXPORT void *mmap64(void *a, size_t n, int prot, int flags, int fd, off_t off) {
  REAL(mmap_fn, real_mmap64, "mmap64")
  return map(f_, a, n, prot, flags, fd, off);
}

EXPORT int mprotect(void *a, size_t n, int prot) {
  if (guarding() && !(prot & PROT_READ)) pw_guard_hook_wait(a, n); /* the copy reads it */
  REAL(mprotect_fn, real_mprotect, "mprotect")
  int r = f_ ? f_(a, n, prot) : (int)syscall(SYS_mprotect, a, n, prot);
  pw_guard_maps_changed();
  return r;
}

EXPORT void *shmat(int id, const void *a, int flags) {
  if (guarding() && a && (flags & SHM_REMAP)) {
    struct shmid_ds ds;
    uintptr_t at = (uintptr_t)a;
    if (flags & SHM_RND) at &= ~(uintptr_t)(SHMLBA - 1);
    if (!shmctl(id, IPC_STAT, &ds)) pw_guard_hook_wait((void *)at, ds.shm_segsz);
  }
  REAL(shmat_fn, real_shmat, "shmat")
  void *r = f_ ? f_(id, a, flags) : (void *)syscall(SYS_shmat, id, a, flags);
  pw_guard_maps_changed();
  return r;
}

/* ---- for guard.c: are these the functions this process calls? ---- */

/* Each hooked name, as the process's calls resolve it, must be defined first in this object (the
 * program, or a library preloaded earlier, may define its own): NULL when they all are, else the
 * first that is not, with the file that defines it in where.  The first definition in the global
 * scope's order is what a call through any object's PLT reaches.  dlsym(RTLD_DEFAULT) is not
 * asked: in a program built without PIE that takes a function's address (Debian's and Ubuntu's
 * python3 does, for free), it returns the program's canonical PLT entry, which only jumps to the
 * first definition, ours. */
const char *pw_memhooks_check(char *where, size_t n) {
  static const char *const names[] = {"free",    "realloc", "munmap",  "mremap",
                                      "madvise", "mmap",    "mprotect"};
  uintptr_t self = self_addr();
  if (n) where[0] = 0;
  if (!self) return "pinwheel itself";
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    lookup l = {.name = names[i], .self = self, .first = 1};
    dl_iterate_phdr(lookup_object, &l);
    if (!l.found || l.found_in != self) {
      if (n && l.found) snprintf(where, n, "%s", l.found_name[0] ? l.found_name : "the program");
      return names[i];
    }
  }
  return NULL;
}
