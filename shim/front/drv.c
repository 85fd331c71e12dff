/* drv.c — the driver front end: the exported cu* wrappers of every entry point drv_hooks.def
 * lists, and the ways a program that never calls the shared CUDA runtime reaches them.
 *
 * Must never: initialise anything in dlsym beyond finding the real functions; change a real
 * call's arguments or status; exit or abort the host process.
 */

/* JAX/XLA and programs built with nvcc's static runtime load libcuda.so.1 themselves and take its
 * entry points with dlsym(handle, ...) and cuGetProcAddress, so LD_PRELOAD's symbol interposition
 * alone never sees their calls.  Three doors lead to the wrappers here:
 *   - the exported symbols themselves (programs linked with -lcuda);
 *   - dlsym: the shim defines it; for a real handle it asks glibc's dlsym and, when the answer is
 *     one of the real driver functions of drv_hooks.def, returns the wrapper instead;
 *   - cuGetProcAddress (_v2 and the CUDA 11.3 version): the same for what the driver hands out;
 *     and the shared runtime's cudaGetDriverEntryPoint* (runtime.c), through pw_drv_offer.
 * A function is recognised by its address, never by the name asked for: whatever version or
 * per-thread flag the program passed, it gets the wrapper of exactly the function the driver
 * chose, with that function's ABI, or the driver's answer untouched (an older ABI, anything not
 * listed).  HAMi-core, a public interposer, maps by name instead: it tries the name asked for
 * with _v3, _v2, then bare, so a per-thread request gets the legacy-stream function and most
 * versions are ignored; its dlsym answers any cu* name from its own library whatever the handle,
 * and asks glibc for RTLD_NEXT from its own frame, so the answer is relative to it.
 *
 * dlsym(RTLD_NEXT / RTLD_DEFAULT, ...) answers depend on who calls: those two go to glibc's dlsym
 * by a tail jump (assembly below, x86-64 and AArch64), so glibc sees the program's return address.
 * Elsewhere the shim does not define dlsym (the exported symbols and cuGetProcAddress still work).
 * glibc's dlsym is found with dlvsym, never with the private _dl_sym (gone in glibc 2.34).
 *
 * The shared CUDA runtime (libcudart.so) is the runtime front end's (runtime.c): asked by it, dlsym
 * and cuGetProcAddress answer as the driver does, so a copy that came through cudaMemcpy* is
 * counted and staged once, and the runtime's own driver calls never cross the shim twice.
 */
#define _GNU_SOURCE
#include "drv.h"
#include "front.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

pw_drv_table pw_drv;

/* ---- glibc's dlsym ---- */

/* read by the assembly below: hidden, so it is reached PC-relative */
__attribute__((visibility("hidden"))) pw_dlsym_fn pw_real_dlsym_ptr;

#if defined(__x86_64__) || defined(__aarch64__)
#define PW_HAVE_DLSYM 1 /* the assembly below defines dlsym */
#endif

__attribute__((visibility("hidden"))) pw_dlsym_fn pw_dlsym_resolve(void) {
  pw_dlsym_fn f = __atomic_load_n(&pw_real_dlsym_ptr, __ATOMIC_ACQUIRE);
  if (f) return f;
  static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
  for (size_t i = 0; i < sizeof versions / sizeof *versions && !f; i++) {
    *(void **)&f = dlvsym(RTLD_NEXT, "dlsym", versions[i]);
#ifdef PW_HAVE_DLSYM
    if (f == dlsym) f = NULL; /* never ourselves */
#endif
  }
  if (f) __atomic_store_n(&pw_real_dlsym_ptr, f, __ATOMIC_RELEASE);
  return f;
}

static void *real_dlsym(void *h, const char *name) {
  pw_dlsym_fn f = pw_dlsym_resolve();
  return f ? f(h, name) : NULL;
}

/* ---- finding the real driver ---- */

static pthread_mutex_t res_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int resolved; /* 1: pw_drv filled from a libcuda */
static void *drv_handle;    /* that libcuda (set before resolved) */

/* Whether the file name of path (a loaded object's) begins with prefix. */
static int file_starts(const char *path, const char *prefix) {
  const char *b = path ? strrchr(path, '/') : NULL;
  b = b ? b + 1 : path;
  return b && !strncmp(b, prefix, strlen(prefix));
}

static void recognise_init(void);

/* Fill pw_drv from the libcuda object that holds `addr` (NULL: libcuda.so.1 by name, then the
 * object after the shim that defines cuGetProcAddress_v2). */
static PW_TLS int resolving; /* this thread is inside resolve_from (the driver may call dlsym) */

static int resolve_from(void *addr) {
  if (atomic_load_explicit(&resolved, memory_order_acquire)) return 1;
  if (resolving) return 0; /* re-entered through dlsym from inside: answer as the driver does */
  resolving = 1;
  pthread_mutex_lock(&res_lock);
  if (!atomic_load_explicit(&resolved, memory_order_relaxed)) {
    void *h = NULL;
    if (!addr) {
      h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
      if (!h) addr = real_dlsym(RTLD_NEXT, "cuGetProcAddress_v2");
    }
    if (!h && addr) {
      Dl_info info;
      struct link_map *lm = NULL;
      if (dladdr1(addr, &info, (void **)&lm, RTLD_DL_LINKMAP) && lm &&
          file_starts(lm->l_name, "libcuda.so"))
        h = dlopen(lm->l_name, RTLD_LAZY | RTLD_NOLOAD);
    }
    if (h) {
#define PW_DRV_HOOK(name, class, params, args, stream, dir, base, version, pt)                     \
  *(void **)&pw_drv.name = real_dlsym(h, #name);
#define PW_DRV_ENQUEUE(name, how, el, proto, params, args, stream, base, version, pt)              \
  *(void **)&pw_drv.name = real_dlsym(h, #name);
#define PW_DRV_REAL(name, params) *(void **)&pw_drv.name = real_dlsym(h, #name);
#include "drv_hooks.def"
      drv_handle = h;
      recognise_init();
      atomic_store_explicit(&resolved, 1, memory_order_release);
      /* h stays open: the table points into it */
    }
  }
  pthread_mutex_unlock(&res_lock);
  resolving = 0;
  return atomic_load_explicit(&resolved, memory_order_acquire);
}

int pw_drv_resolve(void) {
  return resolve_from(NULL);
}

int pw_drv_resolved(void) {
  return atomic_load_explicit(&resolved, memory_order_acquire);
}

/* ---- the wrappers ---- */

#define PW_DRV_HOOK(name, class, params, args, stream, dir, base, version, pt)                     \
  PW_EXPORT CUresult name params;
#define PW_DRV_ENQUEUE(name, how, el, proto, params, args, stream, base, version, pt)              \
  PW_EXPORT CUresult name params;
#include "drv_hooks.def"
PW_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                       cuuint64_t flags, CUdriverProcAddressQueryResult *status);
PW_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                    cuuint64_t flags);

#define DRV_REAL(name) (pw_drv.name ? pw_drv.name : (pw_drv_resolve(), pw_drv.name))

CUresult pw_drv_missing(const char *name) {
  pw_log(PW_LOG_ERROR, "%s was called but no CUDA driver (libcuda.so.1) defines it", name);
  return CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND;
}

#define DRV_COPY(name, params, args, stream_expr, dirv, is_sync)                                   \
  CUresult name params {                                                                           \
    PW_FRONT_COPY_BODY(CUresult, CUDA_SUCCESS, DRV_REAL(name), pw_drv_missing(#name), &pw_drv_ops, \
                       PW_H_##name, #name, args, .dst = (void *)(uintptr_t)dst,                    \
                       .src = (const void *)(uintptr_t)src, .n = count, .dir = dirv,               \
                       .stream = (void *)(stream_expr), .sync_api = is_sync)                       \
  }
#define DRV_LAUNCH(name, params, args, stream_expr)                                                \
  CUresult name params {                                                                           \
    PW_FRONT_LAUNCH_BODY(CUresult, DRV_REAL(name), pw_drv_missing(#name), &pw_drv_ops,             \
                         PW_H_##name, args, stream_expr)                                           \
  }
/* cuProfilerStart / Stop: the real call, then the trace's capture window follows it. */
#define DRV_PROFILER(name, params, args, on)                                                       \
  CUresult name params {                                                                           \
    int mode = pw_enter();                                                                         \
    if (!DRV_REAL(name)) return pw_drv_missing(#name);                                             \
    CUresult r = pw_drv.name args;                                                                 \
    pw_after_real();                                                                               \
    if (mode != PW_MODE_OFF) pw_count_call(PW_H_##name, 0);                                        \
    if (!pw_depth) pw_trace_profiler(on);                                                          \
    return r;                                                                                      \
  }
#define DRV_SYNC(name, params, args, stream_expr)                                                  \
  CUresult name params {                                                                           \
    PW_FRONT_SYNC_BODY(CUresult, CUDA_SUCCESS, DRV_REAL(name), pw_drv_missing(#name), &pw_drv_ops, \
                       PW_H_##name, args, stream_expr)                                             \
  }

/* Uploads ahead (PINWHEEL_FILL_AHEAD, fill/fa.h): the driver's large pinned allocations may be
 * pinwheel's, as the runtime's are (a program built with the static CUDA runtime, CuPy's wheels
 * among them, allocates through here), and what the program asks of one is answered as CUDA
 * answers it for its own: 1 when *r holds the answer, 0 when the real call is made. */
static int fa_cuMemHostAlloc(CUresult *r, void **p, size_t n, unsigned flags) {
  /* write-combined memory, and flags the driver refuses, stay CUDA's */
  if (!p || (flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP)) ||
      pw_fa_host_alloc(&pw_drv_ops, p, n, flags))
    return 0;
  return *r = CUDA_SUCCESS, 1;
}
static int fa_cuMemAllocHost_v2(CUresult *r, void **p, size_t n) {
  return fa_cuMemHostAlloc(r, p, n, 0);
}
static int fa_cuMemHostRegister_v2(CUresult *r, void *p, size_t n, unsigned flags) {
  (void)r, (void)p, (void)n, (void)flags; /* the driver answers "already registered" for it too */
  return 0;
}
static int fa_cuMemFreeHost(CUresult *r, void *p) {
  return pw_fa_host_free(p) ? (*r = CUDA_SUCCESS, 1) : 0;
}
static int fa_cuMemHostUnregister(CUresult *r, void *p) {
  return pw_fa_host_flags(p, NULL) ? (*r = CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, 1) : 0;
}
static int fa_cuMemHostGetFlags(CUresult *r, unsigned *flags, void *p) {
  return flags && pw_fa_host_flags(p, flags) ? (*r = CUDA_SUCCESS, 1) : 0;
}
/* The real call (or fill-ahead's answer), then the region recorded (or forgotten) when it
 * succeeded; not in mode off, nor for the shim's own calls. */
#define DRV_HOST_MEM(name, params, args, start_expr, size_expr)                                    \
  CUresult name params {                                                                           \
    int mode = pw_enter();                                                                         \
    if (!DRV_REAL(name)) return pw_drv_missing(#name);                                             \
    CUresult r = CUDA_SUCCESS;                                                                     \
    if (!(mode == PW_MODE_STAGE && pw_fa_on() && fa_##name(&r, PW_ARGS args)))                     \
      r = pw_drv.name args;                                                                        \
    pw_after_real();                                                                               \
    if (mode == PW_MODE_OFF) return r;                                                             \
    pw_count_call(PW_H_##name, 0);                                                                 \
    if (r == CUDA_SUCCESS) {                                                                       \
      if (size_expr)                                                                               \
        pw_pinned_add((const void *)(start_expr), size_expr);                                      \
      else                                                                                         \
        pw_pinned_remove((const void *)(start_expr));                                              \
    }                                                                                              \
    return r;                                                                                      \
  }

/* The program releases or resets dev's primary context: pinwheel lets go of what it runs there and
 * of its own reference first (drv_ops.c), then the program's call; after a release, what the
 * context took with it is forgotten.  Counted; the status is the real call's. */
#define DRV_PRIMARY_RELEASE(name, params, args, dev_expr)                                          \
  CUresult name params {                                                                           \
    int mode = pw_enter();                                                                         \
    if (!DRV_REAL(name)) return pw_drv_missing(#name);                                             \
    int reset_ = PW_H_##name == PW_H_cuDevicePrimaryCtxReset_v2;                                   \
    if (mode != PW_MODE_OFF) {                                                                     \
      pw_count_call(PW_H_##name, 0);                                                               \
      pw_drv_primary_release((int)(dev_expr), reset_);                                             \
    }                                                                                              \
    pw_elide_stream = NULL; /* no sync after it follows a copy (its stream may be gone) */         \
    CUresult r = pw_drv.name args;                                                                 \
    pw_after_real();                                                                               \
    if (mode != PW_MODE_OFF && !reset_) pw_drv_primary_released((int)(dev_expr));                  \
    return r;                                                                                      \
  }

#define PW_DRV_HOST_MEM(name, params, args, stream, dir)                                           \
  DRV_HOST_MEM(name, params, args, stream, dir)
#define PW_DRV_PRIMARY_RELEASE(name, params, args, stream, dir)                                    \
  DRV_PRIMARY_RELEASE(name, params, args, stream)
#define PW_DRV_COPY_BLOCKING(name, params, args, stream, dir)                                      \
  DRV_COPY(name, params, args, stream, dir, 1)
#define PW_DRV_COPY_ASYNC(name, params, args, stream, dir)                                         \
  DRV_COPY(name, params, args, stream, dir, 0)
#define PW_DRV_LAUNCH(name, params, args, stream, dir) DRV_LAUNCH(name, params, args, stream)
#define PW_DRV_PROFILER(name, params, args, stream, dir) DRV_PROFILER(name, params, args, stream)
#define PW_DRV_HOST_SYNC(name, params, args, stream, dir) DRV_SYNC(name, params, args, stream)
/* Sync elision's entry points (front.h's bodies), with the driver's backend. */
#define DRV_ELIDE(kind, name, params, args, ...)                                                   \
  CUresult name params {                                                                           \
    PW_FRONT_##kind##_BODY(CUresult, DRV_REAL(name), pw_drv_missing(#name), &pw_drv_ops,           \
                           PW_H_##name, args, __VA_ARGS__)                                         \
  }
#define DRV_ELIDE_OK(kind, name, params, args, ...)                                                \
  CUresult name params {                                                                           \
    PW_FRONT_##kind##_BODY(CUresult, CUDA_SUCCESS, DRV_REAL(name), pw_drv_missing(#name),          \
                           &pw_drv_ops, PW_H_##name, args, __VA_ARGS__)                            \
  }
#define PW_DRV_EVENT_SYNC(name, params, args, event, dir)                                          \
  DRV_ELIDE_OK(EVENT_SYNC, name, params, args, event)
#define PW_DRV_EVENT_RECORD(name, params, args, stream, dir)                                       \
  DRV_ELIDE_OK(EVENT_RECORD, name, params, args, stream)
#define PW_DRV_STREAM_WAIT(name, params, args, stream, dir)                                        \
  DRV_ELIDE_OK(STREAM_WAIT, name, params, args, stream)
#define PW_DRV_STREAM_QUERY(name, params, args, stream, dir)                                       \
  DRV_ELIDE(STREAM_QUERY, name, params, args, stream)
#define PW_DRV_EVENT_QUERY(name, params, args, a, b, dir)                                          \
  DRV_ELIDE(EVENT_QUERY, name, params, args, a, b)
#define PW_DRV_IPC_EXPORT(name, params, args, none, dir)                                           \
  CUresult name params {                                                                           \
    PW_FRONT_IPC_EXPORT_BODY(CUresult, DRV_REAL(name), pw_drv_missing(#name), &pw_drv_ops,         \
                             PW_H_##name, args)                                                    \
  }
#define PW_DRV_STREAM_DESTROY(name, params, args, stream, dir)                                     \
  DRV_ELIDE(STREAM_DESTROY, name, params, args, stream)
#define PW_DRV_EVENT_DESTROY(name, params, args, event, dir)                                       \
  DRV_ELIDE(EVENT_DESTROY, name, params, args, event)
/* drv_hooks.def's MANAGED entries: props (a pool's, an allocation's) places the memory on the
 * host */
#define PW_HOST_LOCATED(props)                                                                     \
  ((props) && ((props)->location.type == CU_MEM_LOCATION_TYPE_HOST ||                              \
               (props)->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||                         \
               (props)->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT))
#define PW_DRV_MANAGED(name, params, args, made, dir)                                              \
  CUresult name params {                                                                           \
    PW_FRONT_MANAGED_BODY(CUresult, CUDA_SUCCESS, DRV_REAL(name), pw_drv_missing(#name),           \
                          PW_H_##name, args, made)                                                 \
  }
/* The other entry points that enqueue work (PW_DRV_ENQUEUE: front.h's body), each checked against
 * the header's declaration of its prototype (proto). */
#define PW_DRV_ENQUEUE(name, how, el, proto, params, args, stream, base, version, pt)              \
  _Static_assert(__builtin_types_compatible_p(__typeof__(&name), __typeof__(&proto)),              \
                 #name " has the prototype of " #proto);                                           \
  CUresult name params {                                                                           \
    PW_FRONT_ENQUEUE_BODY(CUresult, CUDA_SUCCESS, DRV_REAL(name), pw_drv_missing(#name),           \
                          &pw_drv_ops, how, el, #name, args, stream)                               \
  }
#define PW_DRV_HOOK(name, class, params, args, stream, dir, base, version, pt)                     \
  PW_DRV_##class(name, params, args, stream, dir)
#include "drv_hooks.def"

/* ---- recognising the real functions ---- */

typedef struct drv_entry {
  void *const *real; /* the pw_drv slot */
  void *wrapper;
  const char *base;
  int version, pt;
} drv_entry;

static const drv_entry entries[] = {
#define PW_DRV_HOOK(name, class, params, args, stream, dir, base, version, pt)                     \
  {(void *const *)&pw_drv.name, (void *)name, #base, version, pt},
#define PW_DRV_ENQUEUE(name, how, el, proto, params, args, stream, base, version, pt)              \
  {(void *const *)&pw_drv.name, (void *)name, #base, version, pt},
#include "drv_hooks.def"
    {(void *const *)&pw_drv.cuGetProcAddress_v2, (void *)cuGetProcAddress_v2, "cuGetProcAddress",
     12000, 0},
    {(void *const *)&pw_drv.cuGetProcAddress, (void *)cuGetProcAddress, "cuGetProcAddress", 11030,
     0},
};
#define N_ENTRIES (sizeof entries / sizeof *entries)

/* What cuGetProcAddress hands out for each entry's own request: the driver may answer with other
 * addresses than its exported symbols'. */
static void *canonical[N_ENTRIES];

static void recognise_init(void) {
  if (!pw_drv.cuGetProcAddress_v2) return;
  for (size_t i = 0; i < N_ENTRIES - 1; i++) { /* the v1 entry is found by its symbol only */
    void *p = NULL;
    CUdriverProcAddressQueryResult st;
    cuuint64_t flags = entries[i].pt ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                                     : CU_GET_PROC_ADDRESS_LEGACY_STREAM;
    if (pw_drv.cuGetProcAddress_v2(entries[i].base, &p, entries[i].version, flags, &st) ==
            CUDA_SUCCESS &&
        st == CU_GET_PROC_ADDRESS_SUCCESS)
      canonical[i] = p;
  }
}

/* The wrapper of the real driver function at p, or NULL when p is none of them. */
static void *wrapper_of(void *p) {
  if (!p || !atomic_load_explicit(&resolved, memory_order_acquire)) return NULL;
  for (size_t i = 0; i < N_ENTRIES; i++)
    if (*entries[i].real == p) return entries[i].wrapper;
  for (size_t i = 0; i < N_ENTRIES; i++)
    if (canonical[i] == p) return entries[i].wrapper;
  return NULL;
}

/* Whether the code at addr belongs to a shared CUDA runtime (libcudart.so*), whose exported
 * functions the runtime front end wraps already. */
static int from_shared_runtime(const void *addr) {
  Dl_info info;
  return dladdr(addr, &info) && file_starts(info.dli_fname, "libcudart.so");
}

void *pw_drv_offer(void *p, const void *caller) {
  if (!atomic_load_explicit(&resolved, memory_order_acquire) && !resolve_from(p)) return p;
  void *w = wrapper_of(p);
  return w && !from_shared_runtime(caller) ? w : p;
}

/* Names dlsym could be asked for that lead to a wrapper (a cheap filter before the address). */
static int listed_name(const char *name) {
#define PW_DRV_HOOK(n, class, params, args, stream, dir, base, version, pt)                        \
  if (!strcmp(name, #n)) return 1;
#define PW_DRV_ENQUEUE(n, how, el, proto, params, args, stream, base, version, pt)                 \
  if (!strcmp(name, #n)) return 1;
#include "drv_hooks.def"
  return !strcmp(name, "cuGetProcAddress_v2") || !strcmp(name, "cuGetProcAddress");
}

/* dlsym on a real handle (the assembly jumps here for every handle but the two pseudo ones, so
 * __builtin_return_address(0) is the program's call site). */
__attribute__((visibility("hidden"), noinline)) void *pw_dlsym_handle(void *h, const char *name) {
  void *p = real_dlsym(h, name);
  if (p && name && name[0] == 'G' && !strcmp(name, "GetPjrtApi")) return pw_pjrt_offer(p);
  if (p && name && !strncmp(name, "cudnn", 5)) return pw_cudnn_dlsym(name, p);
  if (!p || !name || name[0] != 'c' || name[1] != 'u' || !listed_name(name)) return p;
  return pw_drv_offer(p, __builtin_return_address(0));
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status) {
  if (!DRV_REAL(cuGetProcAddress_v2)) return pw_drv_missing("cuGetProcAddress_v2");
  CUresult r = pw_drv.cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, status);
  if (r == CUDA_SUCCESS && pfn && *pfn) *pfn = pw_drv_offer(*pfn, __builtin_return_address(0));
  return r;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags) {
  if (!DRV_REAL(cuGetProcAddress)) return pw_drv_missing("cuGetProcAddress");
  CUresult r = pw_drv.cuGetProcAddress(symbol, pfn, cudaVersion, flags);
  if (r == CUDA_SUCCESS && pfn && *pfn) *pfn = pw_drv_offer(*pfn, __builtin_return_address(0));
  return r;
}

/* ---- dlsym ----
 * RTLD_DEFAULT (0) and RTLD_NEXT (-1): a tail jump to glibc's dlsym, which finds the caller from
 * its return address, still the program's.  Any other handle: pw_dlsym_handle, by a tail jump too.
 * The first call finds glibc's dlsym with every argument register saved. */
#if defined(__x86_64__)
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, @function\n"
        ".p2align 4\n"
        "dlsym:\n"
        "  .cfi_startproc\n"
        "  endbr64\n"
        "  testq %rdi, %rdi\n"
        "  je 1f\n"
        "  cmpq $-1, %rdi\n"
        "  je 1f\n"
        "  jmp pw_dlsym_handle\n"
        "1:\n"
        "  movq pw_real_dlsym_ptr(%rip), %rax\n"
        "  testq %rax, %rax\n"
        "  je 2f\n"
        "  jmp *%rax\n"
        "2:\n"
        "  pushq %rdi\n"
        "  .cfi_adjust_cfa_offset 8\n"
        "  pushq %rsi\n"
        "  .cfi_adjust_cfa_offset 8\n"
        "  subq $8, %rsp\n"
        "  .cfi_adjust_cfa_offset 8\n"
        "  call pw_dlsym_resolve\n"
        "  addq $8, %rsp\n"
        "  .cfi_adjust_cfa_offset -8\n"
        "  popq %rsi\n"
        "  .cfi_adjust_cfa_offset -8\n"
        "  popq %rdi\n"
        "  .cfi_adjust_cfa_offset -8\n"
        "  testq %rax, %rax\n"
        "  je 3f\n"
        "  jmp *%rax\n"
        "3:\n"
        "  ret\n"
        "  .cfi_endproc\n"
        ".size dlsym, .-dlsym\n");
#elif defined(__aarch64__)
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, %function\n"
        ".p2align 2\n"
        "dlsym:\n"
        "  .cfi_startproc\n"
        "  hint #34\n" /* bti c */
        "  cbz x0, 1f\n"
        "  cmn x0, #1\n"
        "  b.eq 1f\n"
        "  b pw_dlsym_handle\n"
        "1:\n"
        "  adrp x16, pw_real_dlsym_ptr\n"
        "  ldr x16, [x16, #:lo12:pw_real_dlsym_ptr]\n"
        "  cbz x16, 2f\n"
        "  br x16\n"
        "2:\n"
        "  stp x29, x30, [sp, #-32]!\n"
        "  .cfi_def_cfa_offset 32\n"
        "  .cfi_offset 29, -32\n"
        "  .cfi_offset 30, -24\n"
        "  mov x29, sp\n"
        "  stp x0, x1, [sp, #16]\n"
        "  bl pw_dlsym_resolve\n"
        "  mov x16, x0\n"
        "  ldp x0, x1, [sp, #16]\n"
        "  ldp x29, x30, [sp], #32\n"
        "  .cfi_restore 29\n"
        "  .cfi_restore 30\n"
        "  .cfi_def_cfa_offset 0\n"
        "  cbz x16, 3f\n"
        "  br x16\n"
        "3:\n"
        "  mov x0, #0\n"
        "  ret\n"
        "  .cfi_endproc\n"
        ".size dlsym, .-dlsym\n");
#endif

/* From pinwheel.c's fork handler (registered at load, so it covers a resolution that came before
 * the first CUDA call, through dlsym): a child forked while another thread resolved must not
 * inherit the lock held. */
void pw_drv_fork_child(void) {
  pthread_mutex_init(&res_lock, NULL);
  pw_drv_ops_fork_child();
}
