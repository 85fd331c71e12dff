/* driver_prog.c — a driver-API "application" for the driver front end's tests, linked against the
 * fake libcuda.so.1 and run by test_driver under the real LD_PRELOAD of libpinwheel.so.  It takes
 * the entry points one of four ways (WAY):
 *   direct   the exported symbols (the program is linked with -lcuda)
 *   dlsym    dlopen("libcuda.so.1") + dlsym, as JAX's CUDA plugin does
 *   gpa      cuGetProcAddress_v2 taken with dlsym, as the static CUDA runtime does
 *   gpa1     the CUDA 11.3 cuGetProcAddress
 *   rt       the shared runtime's cudaGetDriverEntryPointByVersion
 * Commands:
 *   calls WAY        every hooked entry point twice (success, injected error): arguments arrive
 *                    intact, statuses come back unchanged
 *   counts WAY N     a fixed mix of copies, launches and syncs, N times (the test checks the
 *                    summary)
 *   stage WAY        pageable H2D / D2H copies of many sizes, each API; source overwritten and
 *                    freed at once, bytes compared; with "expect-staged" the copies must have
 *                    reached the fake from pinned memory
 *   shared WAY       an H2D copy from MAP_SHARED memory (never deferred), bytes compared
 *   hostcopy WAY     memcpy into and out of pinned memory the program allocated or registered
 *                    (as XLA stages its copies), unaligned, into fresh pages, and in a forked
 *                    child; bytes compared
 *   fillahead WAY    cp.asarray's rounds over pinned memory from cuMemHostAlloc (static CUDA
 *                    runtime), a launch and a write between fill and copy in two of them; bytes
 *                    compared (run with PINWHEEL_FILL_AHEAD)
 *   release-kept WAY another module holds the primary context: the program's release is not the
 *                    last (copies, and pinned memory from cuMemHostAlloc, still right), then the
 *                    last reference goes
 *   reset WAY        cuDevicePrimaryCtxReset between two staged copies; bytes compared
 *   release-reset WAY  a release that is not the last, then a reset: staged again after it
 *   release-in-setup WAY  a thread's first copy sets pinwheel up in the primary context while
 *                    the main thread releases its reference (the thread holds one: not the last);
 *                    bytes compared
 *   context          a pageable copy in a context that is not the primary one
 *   release          the program releases its primary context after a staged copy, retains it
 *                    again and copies; "round N: references left R" lines
 *   stress T N       T threads, each N rounds of pageable copies on streams of its own, through
 *                    the runtime and the driver by turns, and a memcpy into pinned memory every
 *                    fourth round; the main thread forks three times meanwhile (each child
 *                    copies once); bytes compared (run under ThreadSanitizer in CI)
 *   oldabi           cuMemcpyHtoD asked for with CUDA 3.0: the 32-bit-pointer ABI, untouched
 *   dlsym-same       dlsym's answers for handles and symbols pinwheel does not wrap, as
 *                    "handle symbol object+offset" lines (compared with a run without the shim)
 *   dlsym-caller     RTLD_NEXT and RTLD_DEFAULT answered for the calling library
 *   gpa-other        where cuGetProcAddress and dlsym lead for memsets, host functions, graphs
 *   rt-entry         where the runtime's four driver entry-point lookups lead for cuMemcpyHtoD,
 *                    as "lookupN object" lines
 *   runtime-asks     where the program's and the CUDA runtime's dlsym of a wrapped entry point
 *                    lead, as "who object" lines
 *   pjrt LIB PLATFORM [set]
 *                    as JAX creates its GPU client: dlopen the PJRT plugin LIB, dlsym GetPjrtApi,
 *                    PJRT_Client_Create with platform_name=PLATFORM, preallocate=false (and
 *                    should_stage_host_to_device_transfers=true with "set"); prints the options
 *                    the plugin saw and checks the client and the program's arguments
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>
/* the runtime's per-thread-stream lookups (cuda_runtime_api.h declares them only under
 * CUDA_API_PER_THREAD_DEFAULT_STREAM, as the names the plain ones map to) */
cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr,
                                         unsigned long long flags,
                                         enum cudaDriverEntryPointQueryResult *driverStatus);
cudaError_t
cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **funcPtr, unsigned int cudaVersion,
                                      unsigned long long flags,
                                      enum cudaDriverEntryPointQueryResult *driverStatus);

#include "fake/fake_api.h"
#include "pjrt_abi.h"
#include "fake/fake_cuda_api.h"
#include "gpa_other.h"
#undef cuGetProcAddress
#undef cuMemcpyHtoD

#define PW_DRV_HOOK(name, class, params, args, stream, dir, base, version, pt) CUresult name params;
#define PW_DRV_REAL(name, params) CUresult name params;
#include "drv_hooks.def"
CUresult cuInit(unsigned int flags);

/* in libdlprobe.so (linked) and libdlprobe_local.so (opened RTLD_LOCAL) */
void *dlprobe_next(void);
char *strfry(char *s);

static int failures;
#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "driver_prog: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);        \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

typedef struct fns {
#define PW_DRV_HOOK(name, class, params, args, stream, dir, base, version, pt)                     \
  CUresult(*name) params;
#include "drv_hooks.def"
} fns;

static fns F;

static void get_fns(const char *way) {
  if (!strcmp(way, "direct")) {
#define PW_DRV_HOOK(name, class, params, args, stream, dir, base, version, pt) F.name = name;
#include "drv_hooks.def"
    return;
  }
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "driver_prog: %s\n", dlerror());
    exit(2);
  }
  if (!strcmp(way, "dlsym")) {
#define PW_DRV_HOOK(name, class, params, args, stream, dir, base, version, pt)                     \
  *(void **)&F.name = dlsym(h, #name);
#include "drv_hooks.def"
    return;
  }
  enum {
    GPA2,
    GPA1,
    RT
  } kind = !strcmp(way, "gpa")    ? GPA2
           : !strcmp(way, "gpa1") ? GPA1
           : !strcmp(way, "rt")   ? RT
                                  : -1;
  if ((int)kind < 0) {
    fprintf(stderr, "driver_prog: unknown way %s\n", way);
    exit(2);
  }
  CUresult (*gpa2)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
  CUresult (*gpa1)(const char *, void **, int, cuuint64_t);
  *(void **)&gpa2 = dlsym(h, "cuGetProcAddress_v2");
  *(void **)&gpa1 = dlsym(h, "cuGetProcAddress");
  /* as a program built with CUDA 13 asks: its version, per-thread or not by the variant; through
   * cuGetProcAddress (either version) or the shared runtime's cudaGetDriverEntryPointByVersion */
#define PW_DRV_HOOK(name, class, params, args, stream, dir, base, version, pt)                     \
  {                                                                                                \
    int ver = version >= 13000 ? 13000 : 12080, ok;                                                \
    void **out = (void **)&F.name;                                                                 \
    if (kind == RT) {                                                                              \
      enum cudaDriverEntryPointQueryResult st;                                                     \
      ok = cudaGetDriverEntryPointByVersion(                                                       \
               #base, out, ver, pt ? cudaEnablePerThreadDefaultStream : cudaEnableDefault, &st) == \
               cudaSuccess &&                                                                      \
           st == cudaDriverEntryPointSuccess;                                                      \
    } else {                                                                                       \
      cuuint64_t fl = pt ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0;                      \
      CUdriverProcAddressQueryResult st;                                                           \
      ok = (kind == GPA1 ? gpa1(#base, out, ver, fl) : gpa2(#base, out, ver, fl, &st)) ==          \
           CUDA_SUCCESS;                                                                           \
    }                                                                                              \
    CHECK(ok &&F.name);                                                                            \
  }
#include "drv_hooks.def"
}

static void check_last(const char *name) {
  fake_drv_call c = fake_drv_last();
  if (strcmp(c.name, name)) {
    fprintf(stderr, "driver_prog: expected the fake to see %s, it saw %s\n", name, c.name);
    failures++;
  }
}

static CUcontext primary;
static void setup_context(void) {
  CHECK(cuInit(0) == CUDA_SUCCESS);
  CHECK(cuDevicePrimaryCtxRetain(&primary, 0) == CUDA_SUCCESS);
  CHECK(cuCtxSetCurrent(primary) == CUDA_SUCCESS);
}

static int cmd_calls(void) {
  char a[64], b[64];
  CUdeviceptr dev;
  CHECK(cuMemAlloc_v2(&dev, 4096) == CUDA_SUCCESS);
  CUstream s;
  CHECK(cuStreamCreate(&s, 0) == CUDA_SUCCESS);
  CUevent ev;
  CHECK(cuEventCreate(&ev, 0) == CUDA_SUCCESS);
  CUlaunchConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.hStream = s;
  void *params[2] = {a, b}, *extra[1] = {NULL};
  CUfunction fn = (CUfunction)a;
  uintptr_t A = (uintptr_t)a, B = (uintptr_t)b;
  for (int fail = 0; fail < 2; fail++) {
    CUresult want = fail ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
#define EXPECT(call, name, extra_check)                                                            \
  do {                                                                                             \
    if (fail) fake_drv_fail_next(CUDA_ERROR_INVALID_VALUE);                                        \
    CUresult r = call;                                                                             \
    CHECK(r == want);                                                                              \
    check_last(name);                                                                              \
    fake_drv_call c = fake_drv_last();                                                             \
    (void)c;                                                                                       \
    CHECK(extra_check);                                                                            \
  } while (0)
    EXPECT(F.cuMemcpyHtoD_v2(dev, b, 17), "cuMemcpyHtoD_v2",
           c.dst == dev && c.src == B && c.count == 17);
    EXPECT(F.cuMemcpyHtoD_v2_ptds(dev + 8, b, 19), "cuMemcpyHtoD_v2_ptds",
           c.dst == dev + 8 && c.src == B && c.count == 19);
    EXPECT(F.cuMemcpyHtoDAsync_v2(dev, a, 23, s), "cuMemcpyHtoDAsync_v2",
           c.dst == dev && c.src == A && c.count == 23 && c.stream == s);
    EXPECT(F.cuMemcpyHtoDAsync_v2_ptsz(dev, a, 29, 0), "cuMemcpyHtoDAsync_v2_ptsz",
           c.count == 29 && c.stream == 0);
    EXPECT(F.cuMemcpyDtoH_v2(a, dev, 31), "cuMemcpyDtoH_v2",
           c.dst == A && c.src == dev && c.count == 31);
    EXPECT(F.cuMemcpyDtoH_v2_ptds(b, dev, 37), "cuMemcpyDtoH_v2_ptds", c.dst == B && c.count == 37);
    EXPECT(F.cuMemcpyDtoHAsync_v2(a, dev, 41, s), "cuMemcpyDtoHAsync_v2",
           c.dst == A && c.src == dev && c.count == 41 && c.stream == s);
    EXPECT(F.cuMemcpyDtoHAsync_v2_ptsz(b, dev, 43, s), "cuMemcpyDtoHAsync_v2_ptsz",
           c.dst == B && c.count == 43 && c.stream == s);
    EXPECT(F.cuMemcpy(dev + 64, dev, 47), "cuMemcpy",
           c.dst == dev + 64 && c.src == dev && c.count == 47);
    EXPECT(F.cuMemcpy_ptds(A, B, 53), "cuMemcpy_ptds", c.dst == A && c.src == B && c.count == 53);
    EXPECT(F.cuMemcpyAsync(dev, B, 59, s), "cuMemcpyAsync",
           c.dst == dev && c.src == B && c.count == 59 && c.stream == s);
    EXPECT(F.cuMemcpyAsync_ptsz(A, dev, 61, 0), "cuMemcpyAsync_ptsz",
           c.dst == A && c.src == dev && c.count == 61 && c.stream == 0);
    EXPECT(F.cuLaunchKernel(fn, 3, 5, 7, 32, 2, 1, 96, s, params, extra), "cuLaunchKernel",
           c.func == fn && c.grid[1] == 5 && c.block[0] == 32 && c.shared == 96 && c.stream == s &&
               c.params == params && c.extra == extra);
    EXPECT(F.cuLaunchKernel_ptsz(fn, 1, 2, 3, 4, 5, 6, 97, 0, params, NULL), "cuLaunchKernel_ptsz",
           c.grid[2] == 3 && c.block[2] == 6 && c.shared == 97 && !c.stream);
    EXPECT(F.cuLaunchKernelEx(&cfg, fn, params, extra), "cuLaunchKernelEx",
           c.config == &cfg && c.func == fn && c.params == params && c.extra == extra);
    EXPECT(F.cuLaunchKernelEx_ptsz(&cfg, fn, NULL, extra), "cuLaunchKernelEx_ptsz",
           c.config == &cfg && c.extra == extra);
    EXPECT(F.cuStreamSynchronize(s), "cuStreamSynchronize", c.stream == s);
    EXPECT(F.cuStreamSynchronize_ptsz(0), "cuStreamSynchronize_ptsz", c.stream == 0);
    EXPECT(F.cuCtxSynchronize(), "cuCtxSynchronize", 1);
    EXPECT(F.cuCtxSynchronize_v2(primary), "cuCtxSynchronize_v2", c.ctx == primary);
    EXPECT(F.cuEventSynchronize(ev), "cuEventSynchronize", c.event == ev);
  }
  printf("calls %s\n", failures ? "FAILED" : "ok");
  return failures != 0;
}

static char page[3][4096];

static int cmd_counts(int n) {
  CUdeviceptr dev;
  void *pinned;
  CUstream s;
  CHECK(cuMemAlloc_v2(&dev, 1 << 16) == CUDA_SUCCESS);
  CHECK(cuMemHostAlloc(&pinned, 4096, 0) == CUDA_SUCCESS);
  CHECK(cuStreamCreate(&s, 0) == CUDA_SUCCESS);
  for (int i = 0; i < n; i++) {
    F.cuMemcpyHtoD_v2(dev, page[0], 1000);                        /* H2D pageable */
    F.cuMemcpyHtoDAsync_v2(dev, pinned, 2000, s);                 /* H2D pinned */
    F.cuMemcpyDtoHAsync_v2(page[1], dev, 3000, s);                /* D2H pageable */
    F.cuMemcpy(dev + 4096, dev, 100);                             /* D2D */
    F.cuMemcpyAsync((CUdeviceptr)(uintptr_t)page[2], dev, 50, s); /* D2H by pointers */
    F.cuLaunchKernel((CUfunction)page, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL);
    F.cuLaunchKernel((CUfunction)page, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL);
    F.cuStreamSynchronize(s);
    F.cuCtxSynchronize();
  }
  printf("counts %d\n", n);
  return failures != 0;
}

/* Every size class; the source is overwritten and freed as soon as the call returns, so a copy
 * that read it later would deliver the wrong bytes. */
static int cmd_stage(int expect_staged) {
  static const size_t sizes[] = {1, 4095, 65536 + 3, (1 << 20) + 17, (9 << 20) + 5};
  CUstream s;
  CHECK(cuStreamCreate(&s, 0) == CUDA_SUCCESS);
  for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
    size_t n = sizes[k];
    CUdeviceptr dev;
    CHECK(cuMemAlloc_v2(&dev, n) == CUDA_SUCCESS);
    for (int api = 0; api < 6; api++) {
      unsigned char *src = malloc(n), *back = malloc(n);
      for (size_t i = 0; i < n; i++)
        src[i] = (unsigned char)(i * 131 + k * 7 + (size_t)api * 13 + 1);
      CUresult r;
      long pin0, pag0, pin1, pag1;
      fake_drv_copies(&pin0, &pag0);
      switch (api) { /* H2D through each API that carries it */
      case 0:
        r = F.cuMemcpyHtoD_v2(dev, src, n);
        break;
      case 1:
        r = F.cuMemcpyHtoDAsync_v2(dev, src, n, s);
        break;
      case 2:
        r = F.cuMemcpyHtoDAsync_v2_ptsz(dev, src, n, 0);
        break;
      case 3:
        r = F.cuMemcpy(dev, (CUdeviceptr)(uintptr_t)src, n);
        break;
      case 4:
        r = F.cuMemcpyAsync(dev, (CUdeviceptr)(uintptr_t)src, n, s);
        break;
      default:
        r = F.cuMemcpyHtoD_v2_ptds(dev, src, n);
      }
      CHECK(r == CUDA_SUCCESS);
      /* staged: the driver saw copies from pinned memory, none from the pageable source */
      fake_drv_copies(&pin1, &pag1);
      if (expect_staged && n >= (1 << 20)) CHECK(pin1 > pin0 && pag1 == pag0);
      memset(src, 0xEE, n); /* the program reuses its buffer at once */
      free(src);
      memset(back, 0, n);
      fake_drv_copies(&pin1, &pag1);
      switch (api % 3) { /* and back through the D2H APIs */
      case 0:
        r = F.cuMemcpyDtoH_v2(back, dev, n);
        break;
      case 1:
        r = F.cuMemcpyDtoHAsync_v2(back, dev, n, s);
        break;
      default:
        r = F.cuMemcpyAsync_ptsz((CUdeviceptr)(uintptr_t)back, dev, n, 0);
      }
      CHECK(r == CUDA_SUCCESS);
      fake_drv_copies(&pin0, &pag0);
      if (expect_staged && n >= (1 << 20)) CHECK(pin0 > pin1 && pag0 == pag1);
      for (size_t i = 0; i < n; i++)
        if (back[i] != (unsigned char)(i * 131 + k * 7 + (size_t)api * 13 + 1)) {
          fprintf(stderr, "driver_prog: size %zu api %d: byte %zu differs\n", n, api, i);
          failures++;
          break;
        }
      free(back);
    }
    cuMemFree_v2(dev);
  }
  printf("stage %s\n", failures ? "FAILED" : "ok");
  return failures != 0;
}

/* A source another process could write (MAP_SHARED): never deferred, staged as before (the
 * summary counts shared_memory); bytes compared after the program overwrote it. */
static int cmd_shared(void) {
  size_t n = 2 << 20;
  unsigned char *src = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0),
                *back = malloc(n);
  CHECK(src != MAP_FAILED);
  for (size_t i = 0; i < n; i++)
    src[i] = (unsigned char)(i * 29 + 3);
  CUstream s;
  CUdeviceptr dev;
  CHECK(cuStreamCreate(&s, 0) == CUDA_SUCCESS);
  CHECK(cuMemAlloc_v2(&dev, n) == CUDA_SUCCESS);
  CHECK(F.cuMemcpyHtoDAsync_v2(dev, src, n, s) == CUDA_SUCCESS);
  memset(src, 0xEE, n);
  CHECK(F.cuMemcpyDtoH_v2(back, dev, n) == CUDA_SUCCESS);
  for (size_t i = 0; i < n; i++)
    if (back[i] != (unsigned char)(i * 29 + 3)) {
      fprintf(stderr, "driver_prog: shared source: byte %zu differs\n", i);
      failures++;
      break;
    }
  printf("shared %s\n", failures ? "FAILED" : "ok");
  return failures != 0;
}

static int cmd_hostcopy(void) {
  size_t n = (8 << 20) + 3;
  unsigned char *src = malloc(n), *reg = malloc(n + 4096);
  for (size_t i = 0; i < n; i++)
    src[i] = (unsigned char)(i * 7 + 3);
  void *pin = NULL;
  CHECK(F.cuMemHostAlloc(&pin, n + 64, 0) == CUDA_SUCCESS && pin);
  CHECK(F.cuMemHostRegister_v2(reg, n + 4096, 0) == CUDA_SUCCESS);
  unsigned char *p = (unsigned char *)pin + 1;
  memcpy(p, src, n); /* into pinned memory, unaligned: counted */
  CHECK(memcmp(p, src, n) == 0);
  unsigned char *fresh = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  memcpy(fresh, p, n); /* out of it, into pages nothing touched: counted */
  CHECK(memcmp(fresh, src, n) == 0);
  memcpy(reg + 5, src, n - 5); /* into registered memory: counted */
  CHECK(memcmp(reg + 5, src, n - 5) == 0);
  memcpy(pin, src, 1000); /* small: glibc's */
  CHECK(memcmp(pin, src, 1000) == 0);
  pid_t child = fork(); /* a forked child copies into the pinned memory it inherited */
  if (child == 0) {
    memset(p, 0, n);
    memcpy(p, src, n);
    _exit(memcmp(p, src, n) != 0);
  }
  int st = -1;
  CHECK(child > 0 && waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK(F.cuMemHostUnregister(reg) == CUDA_SUCCESS);
  memcpy(reg, src, n); /* no longer pinned: glibc's */
  CHECK(memcmp(reg, src, n) == 0);
  CHECK(F.cuMemFreeHost(pin) == CUDA_SUCCESS);
  munmap(fresh, n);
  free(reg);
  free(src);
  printf("hostcopy %s\n", failures ? "FAILED" : "ok");
  return failures != 0;
}

static int cmd_context(void) {
  size_t n = 4 << 20;
  CUdeviceptr dev;
  CHECK(cuMemAlloc_v2(&dev, n) == CUDA_SUCCESS);
  char *src = malloc(n);
  memset(src, 7, n);
  CUcontext other = fake_drv_new_context();
  CHECK(cuCtxSetCurrent(other) == CUDA_SUCCESS);
  CHECK(F.cuMemcpyHtoD_v2(dev, src, n) == CUDA_SUCCESS);
  fake_drv_call c = fake_drv_last(); /* the program's own call reached the driver */
  CHECK(!strcmp(c.name, "cuMemcpyHtoD_v2") && c.src == (uintptr_t)src);
  CHECK(cuCtxSetCurrent(primary) == CUDA_SUCCESS);
  free(src);
  printf("context %s\n", failures ? "FAILED" : "ok");
  return failures != 0;
}

/* One round trip of n bytes through dev: src filled with the round's pattern (i * mul + round),
 * copied to the device, overwritten (the copy returned: the program may write its source), copied
 * back; the bytes compared. */
static void round_trip(CUdeviceptr dev, unsigned char *src, unsigned char *back, size_t n,
                       unsigned mul, int round) {
  for (size_t i = 0; i < n; i++)
    src[i] = (unsigned char)(i * mul + (size_t)round);
  CHECK(F.cuMemcpyHtoD_v2(dev, src, n) == CUDA_SUCCESS);
  memset(src, 0, n);
  CHECK(F.cuMemcpyDtoH_v2(back, dev, n) == CUDA_SUCCESS);
  for (size_t i = 0; i < n; i++)
    if (back[i] != (unsigned char)(i * mul + (size_t)round)) {
      CHECK(!"bytes right");
      break;
    }
}

/* CuPy's cp.asarray as a program built with the static CUDA runtime makes it: four rounds over one
 * buffer of pinned memory from cuMemHostAlloc, each a memmove that fills it, then
 * cuMemcpyHtoDAsync and a synchronize; in round 1 a kernel launch and in round 2 a write of the
 * program come between fill and copy (PINWHEEL_FILL_AHEAD must give those uploads up).  The
 * device's bytes are checked every round.  An allocation made in another context than the primary
 * one is the driver's own (the summary counts pinwheel's). */
static int cmd_fillahead(void) {
  size_t n = (8 << 20) + 3, at = 100;
  unsigned char *src = malloc(n), *back = malloc(n);
  void *pin = NULL, *pin2 = NULL;
  CUdeviceptr dev;
  CUstream s;
  CHECK(cuStreamCreate(&s, 0) == CUDA_SUCCESS);
  CHECK(F.cuMemHostAlloc(&pin, n + at, CU_MEMHOSTALLOC_DEVICEMAP) == CUDA_SUCCESS && pin);
  unsigned flags = 99;
  long asked = fake_drv_count("cuMemHostGetFlags");
  CHECK(F.cuMemHostGetFlags(&flags, pin) == CUDA_SUCCESS);
  if (fake_drv_count("cuMemHostGetFlags") == asked) /* pinwheel's memory: its answer */
    CHECK(flags == CU_MEMHOSTALLOC_DEVICEMAP);
  CHECK(cuMemAlloc_v2(&dev, n) == CUDA_SUCCESS);
  unsigned char *p = (unsigned char *)pin + at;
  for (int round = 0; round < 4; round++) {
    for (size_t i = 0; i < n; i++)
      src[i] = (unsigned char)(i * 13 + (size_t)round * 5 + 1);
    memmove(p, src, n);
    if (round == 1) {
      CHECK(F.cuLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL) == CUDA_SUCCESS);
    } else if (round == 2) {
      p[n / 2] ^= 0xff; /* a write onto a guarded page: it waits until the upload is given up */
      src[n / 2] ^= 0xff;
    }
    CHECK(F.cuMemcpyHtoDAsync_v2(dev, p, n, s) == CUDA_SUCCESS);
    CHECK(F.cuStreamSynchronize(s) == CUDA_SUCCESS);
    CHECK(F.cuMemcpyDtoH_v2(back, dev, n) == CUDA_SUCCESS);
    CHECK(memcmp(back, src, n) == 0);
  }
  CUcontext other = fake_drv_new_context();
  CHECK(cuCtxSetCurrent(other) == CUDA_SUCCESS);
  CHECK(F.cuMemHostAlloc(&pin2, n, 0) == CUDA_SUCCESS && pin2);
  CHECK(cuCtxSetCurrent(primary) == CUDA_SUCCESS);
  CHECK(F.cuMemFreeHost(pin2) == CUDA_SUCCESS);
  CHECK(F.cuMemFreeHost(pin) == CUDA_SUCCESS);
  free(src);
  free(back);
  printf("fillahead %s\n", failures ? "FAILED" : "ok");
  return failures != 0;
}

/* Another module holds the primary context too; the program stages a copy, allocates pinned
 * memory (pinwheel's with PINWHEEL_FILL_AHEAD) and releases its reference, which is not the last:
 * the context lives on, so copies still give the right bytes, the allocation is still answered
 * for (flags as allocated), and its free unregisters it.  Then the last reference goes: the
 * context is destroyed, and nothing of pinwheel's uses its handles afterwards (the fake driver
 * aborts on a stream of a destroyed context), at exit neither. */
static int cmd_release_kept(void) {
  size_t n = 8 << 20;
  CUcontext other_ref;
  CHECK(cuDevicePrimaryCtxRetain(&other_ref, 0) == CUDA_SUCCESS);
  CUdeviceptr dev;
  CHECK(cuMemAlloc_v2(&dev, n) == CUDA_SUCCESS);
  unsigned char *src = malloc(n), *back = malloc(n);
  void *pin = NULL;
  CHECK(F.cuMemHostAlloc(&pin, n, CU_MEMHOSTALLOC_DEVICEMAP) == CUDA_SUCCESS && pin);
  for (int round = 0; round < 2; round++) {
    round_trip(dev, src, back, n, 3, round);
    if (round == 0) {
      CHECK(F.cuDevicePrimaryCtxRelease_v2(0) == CUDA_SUCCESS);
      printf("released once: references left %d\n", fake_drv_primary_refs());
    }
  }
  /* a fill of the pinned memory while the context lives on: its upload must be over (or given
   * up) before the last release destroys the context */
  memmove(pin, back, n);
  unsigned flags = 99;
  long asked = fake_drv_count("cuMemHostGetFlags");
  CHECK(F.cuMemHostGetFlags(&flags, pin) == CUDA_SUCCESS);
  long by_driver = fake_drv_count("cuMemHostGetFlags") - asked;
  if (!by_driver) CHECK(flags == CU_MEMHOSTALLOC_DEVICEMAP); /* pinwheel's memory: its answer */
  printf("flags answered by the driver: %ld\n", by_driver);
  CHECK(F.cuMemFreeHost(pin) == CUDA_SUCCESS);
  CHECK(!fake_drv_is_pinned(pin)); /* unregistered: nothing of it stays pinned */
  CHECK(cuCtxSetCurrent(NULL) == CUDA_SUCCESS);
  CHECK(F.cuDevicePrimaryCtxRelease_v2(0) == CUDA_SUCCESS);
  printf("released again: references left %d\n", fake_drv_primary_refs());
  free(src);
  free(back);
  printf("release-kept %s\n", failures ? "FAILED" : "ok");
  return failures != 0;
}

/* Another module holds the primary context; the program stages a copy, releases its reference
 * (not the last: staging there stops), then resets the context: pinwheel's state is set up anew
 * and the next copy is staged again.  Bytes compared each time. */
static int cmd_release_reset(void) {
  size_t n = 4 << 20;
  CUcontext other_ref;
  CHECK(cuDevicePrimaryCtxRetain(&other_ref, 0) == CUDA_SUCCESS);
  unsigned char *src = malloc(n), *back = malloc(n);
  CUdeviceptr dev;
  CHECK(cuMemAlloc_v2(&dev, n) == CUDA_SUCCESS);
  round_trip(dev, src, back, n, 11, 0);
  CHECK(F.cuDevicePrimaryCtxRelease_v2(0) == CUDA_SUCCESS);
  round_trip(dev, src, back, n, 11, 1);
  CHECK(F.cuDevicePrimaryCtxReset_v2(0) == CUDA_SUCCESS);
  CHECK(cuMemAlloc_v2(&dev, n) == CUDA_SUCCESS); /* the reset freed the old one */
  round_trip(dev, src, back, n, 11, 2);
  free(src);
  free(back);
  printf("release-reset %s\n", failures ? "FAILED" : "ok");
  return failures != 0;
}

/* Another thread, holding a reference of its own, makes the first copy to the device, which sets
 * pinwheel's state up there (the test slows the setup before its first allocation); meanwhile the
 * main thread releases its reference, which is not the last.  The release must wait for the setup
 * under way, then mark its state gone: the copy that made it is staged, the thread's later copies
 * go to CUDA unchanged (other_context); bytes right.  The thread's own release, the last, then
 * destroys the context (the fake aborts if a handle of it is used afterwards, at exit too). */
static CUdeviceptr in_setup_dev;
static atomic_int in_setup_released;
static void *in_setup_copier(void *arg) {
  (void)arg;
  size_t n = 4 << 20;
  unsigned char *src = malloc(n), *back = malloc(n);
  CUcontext ref;
  CHECK(cuDevicePrimaryCtxRetain(&ref, 0) == CUDA_SUCCESS);
  CHECK(cuCtxSetCurrent(ref) == CUDA_SUCCESS);
  for (size_t i = 0; i < n; i++)
    src[i] = (unsigned char)(i * 13);
  CHECK(F.cuMemcpyHtoD_v2(in_setup_dev, src, n) == CUDA_SUCCESS); /* sets the device up */
  while (!atomic_load(&in_setup_released))
    nanosleep(&(struct timespec){0, 1000000}, NULL);
  CHECK(F.cuMemcpyDtoH_v2(back, in_setup_dev, n) == CUDA_SUCCESS);
  for (size_t i = 0; i < n; i++)
    if (back[i] != (unsigned char)(i * 13)) {
      CHECK(!"bytes right");
      break;
    }
  round_trip(in_setup_dev, src, back, n, 13, 1);
  CHECK(cuCtxSetCurrent(NULL) == CUDA_SUCCESS);
  CHECK(F.cuDevicePrimaryCtxRelease_v2(0) == CUDA_SUCCESS);
  free(src);
  free(back);
  return NULL;
}

static int cmd_release_in_setup(void) {
  CHECK(cuMemAlloc_v2(&in_setup_dev, 4 << 20) == CUDA_SUCCESS);
  pthread_t t;
  pthread_create(&t, NULL, in_setup_copier, NULL);
  /* the copy is in the setup once pinwheel took its reference (the program's two, and its own),
   * and stays there for the slowed call */
  for (int ms = 0; ms < 5000 && fake_drv_primary_refs() < 3; ms++)
    nanosleep(&(struct timespec){0, 1000000}, NULL);
  nanosleep(&(struct timespec){0, 100 * 1000000L}, NULL);
  CHECK(cuCtxSetCurrent(NULL) == CUDA_SUCCESS);
  CHECK(F.cuDevicePrimaryCtxRelease_v2(0) == CUDA_SUCCESS);
  printf("released in setup: references left %d\n", fake_drv_primary_refs());
  atomic_store(&in_setup_released, 1);
  pthread_join(t, NULL);
  printf("references left %d\n", fake_drv_primary_refs());
  printf("release-in-setup %s\n", failures ? "FAILED" : "ok");
  return failures != 0;
}

/* The program resets its primary context (cuDevicePrimaryCtxReset) between staged copies: its
 * resources go, its references stay.  pinwheel drains and forgets its state there first and sets
 * it up anew for the next copy: bytes right before and after, nothing of the old state used (the
 * fake aborts on a stream or event of the old context), the events of elided syncs included: each
 * round also stages an asynchronous copy on a stream of its own and synchronises it. */
static int cmd_reset(void) {
  size_t n = 4 << 20;
  unsigned char *src = malloc(n), *back = malloc(n);
  for (int round = 0; round < 2; round++) {
    CUdeviceptr dev;
    CUstream s;
    CHECK(cuMemAlloc_v2(&dev, n) == CUDA_SUCCESS);
    round_trip(dev, src, back, n, 5, round);
    CHECK(cuStreamCreate(&s, 0) == CUDA_SUCCESS);
    for (int i = 0; i < 2; i++) {
      memset(src, 3 * round + i + 1, n);
      CHECK(F.cuMemcpyHtoDAsync_v2(dev, src, n, s) == CUDA_SUCCESS);
      CHECK(F.cuStreamSynchronize(s) == CUDA_SUCCESS);
      CHECK(F.cuMemcpyDtoH_v2(back, dev, n) == CUDA_SUCCESS);
      CHECK(memcmp(back, src, n) == 0);
    }
    if (round == 0) CHECK(F.cuDevicePrimaryCtxReset_v2(0) == CUDA_SUCCESS);
  }
  printf("references left %d\n", fake_drv_primary_refs());
  free(src);
  free(back);
  printf("reset %s\n", failures ? "FAILED" : "ok");
  return failures != 0;
}

/* The program releases its primary context after a staged copy: pinwheel's reference goes with
 * it (the context is freed, no reference left); retained again, copies go to CUDA unchanged with
 * the right bytes, and it is released again. */
static int cmd_release(void) {
  size_t n = 4 << 20;
  CUdeviceptr dev;
  CHECK(cuMemAlloc_v2(&dev, n) == CUDA_SUCCESS);
  unsigned char *src = malloc(n), *back = malloc(n);
  for (int round = 0; round < 2; round++) {
    round_trip(dev, src, back, n, 7, round);
    CHECK(cuCtxSetCurrent(NULL) == CUDA_SUCCESS);
    CHECK(cuDevicePrimaryCtxRelease_v2(0) == CUDA_SUCCESS);
    printf("round %d: references left %d\n", round, fake_drv_primary_refs());
    if (round == 0) {
      CHECK(cuDevicePrimaryCtxRetain(&primary, 0) == CUDA_SUCCESS);
      CHECK(cuCtxSetCurrent(primary) == CUDA_SUCCESS);
    }
  }
  free(src);
  free(back);
  printf("release %s\n", failures ? "FAILED" : "ok");
  return failures != 0;
}

static int stress_rounds;
static unsigned char *stress_pinned; /* 2 MiB per thread, allocated through the driver */
static atomic_int stress_bad;

static void stress_fill(unsigned char *p, size_t n, int seed) {
  for (size_t i = 0; i < n; i++)
    p[i] = (unsigned char)(i * 31 + (size_t)seed * 7 + 1);
}
static int stress_same(const unsigned char *p, size_t n, int seed) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != (unsigned char)(i * 31 + (size_t)seed * 7 + 1)) return 0;
  return 1;
}

static void *stress_thread(void *arg) {
  int id = (int)(intptr_t)arg, bad = 0;
  size_t n = (256 << 10) + (size_t)id * 4096;
  bad += cuCtxSetCurrent(primary) != CUDA_SUCCESS;
  CUstream s;
  cudaStream_t rs;
  CUdeviceptr dd;
  void *rd = NULL;
  bad += cuStreamCreate(&s, 0) != CUDA_SUCCESS;
  bad += cudaStreamCreateWithFlags(&rs, 0) != cudaSuccess;
  bad += cuMemAlloc_v2(&dd, n) != CUDA_SUCCESS;
  bad += cudaMalloc(&rd, n) != cudaSuccess;
  unsigned char *src = malloc(n), *back = malloc(n);
  size_t hn = (1 << 20) + (size_t)id * 4096; /* above the size the shim's memcpy stages */
  unsigned char *pin = stress_pinned + ((size_t)id << 21), *big = malloc(hn);
  for (int it = 0; it < stress_rounds; it++) {
    int seed = id * 1000 + it;
    stress_fill(src, n, seed);
    if (it & 1) {
      bad += F.cuMemcpyHtoDAsync_v2(dd, src, n, s) != CUDA_SUCCESS;
      memset(src, 0, n); /* the source is the program's again once the call returned */
      bad += F.cuMemcpyDtoH_v2(back, dd, n) != CUDA_SUCCESS;
    } else {
      bad += cudaMemcpyAsync(rd, src, n, cudaMemcpyHostToDevice, rs) != cudaSuccess;
      memset(src, 0, n);
      bad += cudaMemcpy(back, rd, n, cudaMemcpyDeviceToHost) != cudaSuccess;
    }
    bad += !stress_same(back, n, seed);
    if (it % 4 == 3) { /* the program's own staging: a large memcpy into its pinned memory */
      stress_fill(big, hn, seed);
      memcpy(pin, big, hn);
      bad += !stress_same(pin, hn, seed);
    }
  }
  free(big);
  free(src);
  free(back);
  atomic_fetch_add(&stress_bad, bad);
  return NULL;
}

static int cmd_stress(int threads, int rounds) {
  if (threads < 1 || threads > 16) return 2;
  stress_rounds = rounds;
  void *pin = NULL;
  CHECK(F.cuMemHostAlloc(&pin, (size_t)threads << 21, 0) == CUDA_SUCCESS && pin);
  stress_pinned = pin;
  pthread_t t[16];
  for (int i = 0; i < threads; i++)
    pthread_create(&t[i], NULL, stress_thread, (void *)(intptr_t)i);
  for (int f = 0; f < 3; f++) { /* forks while the copies are in flight */
    usleep(2000);
    pid_t child = fork();
    if (child == 0) {
      size_t n = 1 << 20;
      unsigned char *a = malloc(n), *b = malloc(n);
      CUdeviceptr d;
      int bad = cuCtxSetCurrent(primary) != CUDA_SUCCESS || cuMemAlloc_v2(&d, n) != CUDA_SUCCESS;
      stress_fill(a, n, 99);
      bad += F.cuMemcpyHtoD_v2(d, a, n) != CUDA_SUCCESS;
      bad += F.cuMemcpyDtoH_v2(b, d, n) != CUDA_SUCCESS;
      _exit(bad || !stress_same(b, n, 99));
    }
    int st = -1;
    CHECK(child > 0 && waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  for (int i = 0; i < threads; i++)
    pthread_join(t[i], NULL);
  CHECK(atomic_load(&stress_bad) == 0);
  CHECK(F.cuMemFreeHost(pin) == CUDA_SUCCESS);
  printf("stress %s\n", failures ? "FAILED" : "ok");
  return failures != 0;
}

static int cmd_oldabi(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  CUresult (*gpa2)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
  *(void **)&gpa2 = dlsym(h, "cuGetProcAddress_v2");
  CUresult (*v1)(unsigned int, const void *, size_t) = NULL;
  CUdriverProcAddressQueryResult st;
  CHECK(gpa2("cuMemcpyHtoD", (void **)&v1, 3000, 0, &st) == CUDA_SUCCESS && v1);
  CHECK(v1(0x1234, page[0], 0) == CUDA_SUCCESS); /* a 32-bit device pointer */
  fake_drv_call c = fake_drv_last();
  CHECK(!strcmp(c.name, "cuMemcpyHtoD") && c.dst == 0x1234 && c.src == (uintptr_t)page[0]);
  printf("oldabi %s\n", failures ? "FAILED" : "ok");
  return failures != 0;
}

static void where(const char *hname, const char *sym, void *p) {
  Dl_info info;
  if (!p) {
    printf("%s %s NULL\n", hname, sym);
  } else if (dladdr(p, &info) && info.dli_fname) {
    const char *b = strrchr(info.dli_fname, '/');
    printf("%s %s %s+%#lx\n", hname, sym, b ? b + 1 : info.dli_fname,
           (unsigned long)((char *)p - (char *)info.dli_fbase));
  } else {
    printf("%s %s ?\n", hname, sym);
  }
}

static int cmd_dlsym_same(void) {
  void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  void *libm = dlopen("libm.so.6", RTLD_NOW);
  void *self = dlopen(NULL, RTLD_NOW);
  struct {
    const char *name;
    void *h;
  } handles[] = {{"default", RTLD_DEFAULT},
                 {"next", RTLD_NEXT},
                 {"libcuda", cuda},
                 {"libc", libc},
                 {"libm", libm},
                 {"self", self}};
  /* symbols pinwheel does not wrap, some of libcuda's among them */
  static const char *const syms[] = {"malloc",         "printf",        "cos",
                                     "cuInit",         "cuMemAlloc_v2", "cuMemcpyHtoD",
                                     "fake_drv_count", "no_such_sym",   "cuMemcpyHtoD_v3",
                                     "cmd_dlsym_same", "dlsym",         "dlopen"};
  for (size_t i = 0; i < sizeof handles / sizeof *handles; i++)
    for (size_t k = 0; k < sizeof syms / sizeof *syms; k++) {
      if (!strcmp(syms[k], "dlsym")) continue; /* the shim defines it: it differs by design */
      dlerror();
      void *p = dlsym(handles[i].h, syms[k]);
      const char *e = dlerror();
      where(handles[i].name, syms[k], p);
      if (!p) printf("  error %s\n", e ? "set" : "unset");
    }
  return 0;
}

static int cmd_dlsym_caller(void) {
  /* RTLD_NEXT from a library: the definition after that library, not its own */
  void *next = dlprobe_next();
  CHECK(next != NULL && next != (void *)strfry);
  void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  CHECK(next == dlsym(libc, "strfry"));
  /* RTLD_DEFAULT from a library opened RTLD_LOCAL: that library's own scope is searched */
  void *h = dlopen(PW_DLPROBE_LOCAL, RTLD_NOW | RTLD_LOCAL);
  CHECK(h != NULL);
  if (h) {
    void *(*dflt)(void);
    *(void **)&dflt = dlsym(h, "dlprobe_default");
    void *marker = dlsym(h, "dlprobe_local_marker");
    CHECK(dflt && marker && dflt() == marker);
    CHECK(dlsym(RTLD_DEFAULT, "dlprobe_local_marker") == NULL); /* not from here */
  }
  printf("dlsym-caller %s\n", failures ? "FAILED" : "ok");
  return failures != 0;
}

static const char *object_of(void *p) {
  Dl_info info;
  if (!p || !dladdr(p, &info) || !info.dli_fname) return "none";
  const char *b = strrchr(info.dli_fname, '/');
  return b ? b + 1 : info.dli_fname;
}

/* cudaGetDriverEntryPoint is deprecated in CUDA 13, still exported, and wrapped. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
/* The runtime's four driver entry-point lookups, asked for cuMemcpyHtoD: where each leads. */
static int cmd_rt_entry(void) {
  void *p[4] = {0};
  enum cudaDriverEntryPointQueryResult st;
  CHECK(cudaGetDriverEntryPoint("cuMemcpyHtoD", &p[0], cudaEnableDefault, &st) == cudaSuccess);
  CHECK(cudaGetDriverEntryPoint_ptsz("cuMemcpyHtoD", &p[1], cudaEnableDefault, &st) == cudaSuccess);
  CHECK(cudaGetDriverEntryPointByVersion("cuMemcpyHtoD", &p[2], 12080, cudaEnableDefault, &st) ==
        cudaSuccess);
  CHECK(cudaGetDriverEntryPointByVersion_ptsz("cuMemcpyHtoD", &p[3], 12080, cudaEnableDefault,
                                              &st) == cudaSuccess);
  for (int i = 0; i < 4; i++)
    printf("lookup%d %s\n", i, object_of(p[i]));
  void *none = (void *)1;
  CHECK(cudaGetDriverEntryPointByVersion("cuNoSuchFunction", &none, 12080, 0, &st) != cudaSuccess);
  CHECK(st == cudaDriverEntryPointSymbolNotFound);
  printf("rt-entry %s\n", failures ? "FAILED" : "ok");
  return failures != 0;
}

/* The other entry points that enqueue work (drv_hooks.def's PW_DRV_ENQUEUE) taken as a static
 * runtime takes them: cuGetProcAddress_v2, and dlsym on libcuda.  Where each leads. */
static int cmd_gpa_other(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  CUresult (*gpa2)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
  *(void **)&gpa2 = dlsym(h, "cuGetProcAddress_v2");
  for (size_t i = 0; i < sizeof gpa_other_names / sizeof *gpa_other_names; i++) {
    void *p = NULL;
    CUdriverProcAddressQueryResult st;
    CHECK(gpa2(gpa_other_names[i], &p, 13000, 0, &st) == CUDA_SUCCESS && p);
    printf("gpa %s %s\n", gpa_other_names[i], object_of(p));
  }
  /* the CUDA < 4.0 ABIs of a stream's and an event's destruction (drv_hooks.def's) */
  const char *old[] = {"cuStreamDestroy", "cuEventDestroy"};
  for (int i = 0; i < 2; i++) {
    void *p = NULL;
    CUdriverProcAddressQueryResult st;
    CHECK(gpa2(old[i], &p, 3000, 0, &st) == CUDA_SUCCESS && p);
    CHECK(p != dlsym(h, i ? "cuEventDestroy_v2" : "cuStreamDestroy_v2"));
    printf("gpa-old %s %s\n", old[i], object_of(p));
  }
  printf("dlsym cuMemsetD8Async %s\n", object_of(dlsym(h, "cuMemsetD8Async")));
  return failures != 0;
}

static int cmd_runtime_asks(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  printf("program %s\n", object_of(dlsym(h, "cuMemcpyHtoDAsync_v2")));
  printf("runtime %s\n", object_of(fake_cudart_driver_entry("cuMemcpyHtoDAsync_v2")));
  printf("runtime-gpa %s\n", object_of(fake_cudart_driver_entry("cuGetProcAddress_v2")));
  return 0;
}

static int cmd_pjrt(const char *lib, const char *platform, int set) {
  void *lh = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!lh) {
    fprintf(stderr, "driver_prog: %s\n", dlerror());
    return 2;
  }
  const void *(*get)(void) = NULL;
  const char *(*seen)(void) = NULL;
  int (*creates)(void) = NULL, (*destroyed)(void) = NULL, (*is_client)(void *) = NULL;
  *(void **)&get = dlsym(lh, "GetPjrtApi");
  *(void **)&seen = dlsym(lh, "fake_pjrt_seen");
  *(void **)&creates = dlsym(lh, "fake_pjrt_creates");
  *(void **)&destroyed = dlsym(lh, "fake_pjrt_destroyed");
  *(void **)&is_client = dlsym(lh, "fake_pjrt_is_client");
  if (!get || !seen || !creates || !destroyed || !is_client) return 2;
  const pj_api *api = get();
  CHECK(api && get() == (const void *)api); /* one table, however often it is asked for */
  CHECK(api->pjrt_api_version.minor_version == 33 && api->fns[1] && api->fns[11]);
  pj_named_value opts[3] = {
      {.struct_size = sizeof(pj_named_value),
       .name = "platform_name",
       .name_size = 13,
       .type = PJ_STRING,
       .string_value = platform,
       .value_size = strlen(platform)},
      {.struct_size = sizeof(pj_named_value),
       .name = "preallocate",
       .name_size = 11,
       .type = PJ_BOOL,
       .bool_value = false,
       .value_size = 1},
      {.struct_size = sizeof(pj_named_value),
       .name = "should_stage_host_to_device_transfers",
       .name_size = 37,
       .type = PJ_BOOL,
       .bool_value = true,
       .value_size = 1},
  };
  pj_create_args args = {
      .struct_size = sizeof args, .create_options = opts, .num_options = set ? 3 : 2};
  void *err = api->fns[PJ_FN_CLIENT_CREATE](&args);
  CHECK(err == NULL);
  CHECK(is_client(args.client));
  CHECK(args.create_options == opts && args.num_options == (set ? 3u : 2u));
  Dl_info info;
  const char *where = dladdr(api, &info) && info.dli_fname ? strrchr(info.dli_fname, '/') : NULL;
  printf("pjrt seen: %s\n", seen());
  printf("pjrt creates %d, errors destroyed %d, table %s\n", creates(), destroyed(),
         where ? where + 1 : "(a copy)");
  printf("pjrt %s\n", failures ? "FAILED" : "ok");
  return failures != 0;
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  const char *cmd = argv[1];
  if (!strcmp(cmd, "pjrt") && argc > 3)
    return cmd_pjrt(argv[2], argv[3], argc > 4 && !strcmp(argv[4], "set"));
  if (!strcmp(cmd, "dlsym-same")) return cmd_dlsym_same();
  if (!strcmp(cmd, "dlsym-caller")) return cmd_dlsym_caller();
  if (!strcmp(cmd, "runtime-asks")) return cmd_runtime_asks();
  if (!strcmp(cmd, "gpa-other")) return cmd_gpa_other();
  if (!strcmp(cmd, "rt-entry")) return cmd_rt_entry();
  setup_context();
  if (!strcmp(cmd, "oldabi")) return cmd_oldabi();
  get_fns(argc > 2 ? argv[2] : "direct");
  if (!strcmp(cmd, "calls")) return cmd_calls();
  if (!strcmp(cmd, "counts")) return cmd_counts(argc > 3 ? atoi(argv[3]) : 1);
  if (!strcmp(cmd, "stage")) return cmd_stage(argc > 3 && !strcmp(argv[3], "expect-staged"));
  if (!strcmp(cmd, "shared")) return cmd_shared();
  if (!strcmp(cmd, "context")) return cmd_context();
  if (!strcmp(cmd, "release")) return cmd_release();
  if (!strcmp(cmd, "stress") && argc > 4) return cmd_stress(atoi(argv[3]), atoi(argv[4]));
  if (!strcmp(cmd, "hostcopy")) return cmd_hostcopy();
  if (!strcmp(cmd, "fillahead")) return cmd_fillahead();
  if (!strcmp(cmd, "release-kept")) return cmd_release_kept();
  if (!strcmp(cmd, "reset")) return cmd_reset();
  if (!strcmp(cmd, "release-reset")) return cmd_release_reset();
  if (!strcmp(cmd, "release-in-setup")) return cmd_release_in_setup();
  fprintf(stderr, "driver_prog: unknown command %s\n", cmd);
  return 2;
}
