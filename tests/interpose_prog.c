/* interpose_prog.c — a CUDA "application" linked against the fake libcudart.so.13, run by
 * test_interpose under the real LD_PRELOAD of libpinwheel.so.  Its first argument picks:
 *   calls: every hooked entry point; arguments arrive intact, statuses come back unchanged.
 *   counts N: a fixed mix of copies, launches and syncs, N times (the driver checks the summary).
 *   threads T N: T threads, each N launches and N small copies.
 *   stage: pageable H2D / D2H copies of many sizes; source overwritten and freed at once; bytes
 *   compared.
 *   hostcopy: memmove and memcpy into and out of pinned memory allocated or registered through
 *   the runtime, overlapping ones too, and into the same addresses once freed; bytes compared.
 *   fillahead, fillahead_hazards: cp.asarray-shaped rounds over one pinned buffer with
 *   PINWHEEL_FILL_AHEAD, something that may change the buffer between fill and copy in some.
 *   capture: an H2D copy on a capturing stream (must reach CUDA unchanged).
 *   managedvar: a __managed__ variable registered, then a staged copy and its sync.
 *   shmunmap: 32 MiB mappings of /dev/shm files unmapped before CUDA is used, after, and after a
 *   copy of one: each range unmapped at return, the file's bytes kept.
 *   nodriver: a cudaMalloc that fails where CUDA is unusable (FAKE_NO_DRIVER), then exit 1.
 *   fork: calls, fork, calls in the child, wait.
 *   none: no CUDA call at all.
 *   reopen2 PATH: closes stderr, opens PATH as fd 2 (its data file), writes to it, uses CUDA.
 *   atexitcopy: an exit handler registered before the first CUDA call (so it runs after CUDA's
 *   teardown) makes the process's first eligible copy, a pageable 1 MiB H2D copy; prints its
 * status. first T: the process's first copies: T threads, released together, each a pageable H2D
 * copy of its own bytes into its own device buffer (source overwritten and freed at once), then the
 *   bytes read back (D2H) and compared.
 *   exec-traced: a traced run that fork-execs itself ("traced plain") with the same environment
 *   while its own trace is open, then uses CUDA again.
 *   wrap: copies whose size wraps the address space (must reach CUDA unchanged).
 *   reset: staged copies, cudaDeviceReset, staged copies again.
 *   loop N [profiler|pause|odd]: a start-up phase (other launches and copies), then N iterations of
 *   a training-like loop (its batch copied in, three kernels, a result copied out, a sync), then a
 *   teardown copy; with "profiler", iterations 4 to 6 between cudaProfilerStart and Stop; with
 *   "pause", 400 ms of sleep after iteration 5 (an iteration takes 20 ms); with "odd", one more
 *   launch in iteration 1.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <cupti.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fake/fake_api.h"
#include <cuda_profiler_api.h>

cudaError_t cudaMemcpy_ptds(void *, const void *, size_t, enum cudaMemcpyKind);
cudaError_t cudaMemcpyAsync_ptsz(void *, const void *, size_t, enum cudaMemcpyKind, cudaStream_t);
cudaError_t cudaLaunchKernel_ptsz(const void *, dim3, dim3, void **, size_t, cudaStream_t);
cudaError_t __cudaLaunchKernel(cudaKernel_t, dim3, dim3, void **, size_t, cudaStream_t);
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t, dim3, dim3, void **, size_t, cudaStream_t);
cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *, const void *, void **);
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t);

static int failures;
#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "interpose_prog: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);     \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

/* The elision modes' step: a staged copy into dev, then the stream's sync, which must succeed
 * (elided or real). */
static void copy_and_sync(void *dev, const void *src, size_t n, cudaStream_t s) {
  cudaMemcpyAsync(dev, src, n, cudaMemcpyHostToDevice, s);
  CHECK(cudaStreamSynchronize(s) == cudaSuccess);
}

static void check_last(const char *name) {
  fake_call c = fake_last();
  if (strcmp(c.name, name)) {
    fprintf(stderr, "interpose_prog: expected the fake to see %s, it saw %s\n", name, c.name);
    failures++;
  }
}

static char page_calls[8192];

static int mode_calls(void) {
  char a[64], b[64];
  void *dev;
  CHECK(cudaMalloc(&dev, 4096) == cudaSuccess);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, 0);
  dim3 g = {3, 5, 7}, bl = {32, 2, 1};
  void *args[2] = {a, b};
  cudaLaunchConfig_t cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.stream = s;
  cudaEvent_t ev;
  cudaEventCreateWithFlags(&ev, 0);
  /* Each call twice: once succeeding, once with an injected error that must come back. */
  for (int fail = 0; fail < 2; fail++) {
    cudaError_t want = fail ? cudaErrorInvalidValue : cudaSuccess;
#define EXPECT(call, name, extra)                                                                  \
  do {                                                                                             \
    if (fail) fake_fail_next(cudaErrorInvalidValue);                                               \
    cudaError_t r = call;                                                                          \
    CHECK(r == want);                                                                              \
    check_last(name);                                                                              \
    fake_call c = fake_last();                                                                     \
    (void)c;                                                                                       \
    CHECK(extra);                                                                                  \
    if (fail) cudaGetLastError();                                                                  \
  } while (0)
    EXPECT(cudaMemcpy(a, b, 17, cudaMemcpyHostToHost), "cudaMemcpy",
           c.dst == a && c.src == b && c.count == 17 && c.kind == cudaMemcpyHostToHost);
    EXPECT(cudaMemcpy_ptds(dev, b, 19, cudaMemcpyHostToDevice), "cudaMemcpy_ptds",
           c.dst == dev && c.src == b && c.count == 19 && c.kind == cudaMemcpyHostToDevice);
    EXPECT(cudaMemcpyAsync(a, dev, 23, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync",
           c.dst == a && c.src == dev && c.count == 23 && c.stream == s);
    EXPECT(cudaMemcpyAsync_ptsz(dev, a, 29, cudaMemcpyDefault, s), "cudaMemcpyAsync_ptsz",
           c.dst == dev && c.src == a && c.count == 29 && c.kind == cudaMemcpyDefault &&
               c.stream == s);
    EXPECT(cudaLaunchKernel((void *)mode_calls, g, bl, args, 96, s), "cudaLaunchKernel",
           c.func == (void *)mode_calls && c.grid.y == 5 && c.block.x == 32 && c.args == args &&
               c.shared == 96 && c.stream == s);
    EXPECT(cudaLaunchKernel_ptsz((void *)mode_calls, g, bl, args, 97, s), "cudaLaunchKernel_ptsz",
           c.grid.z == 7 && c.shared == 97 && c.stream == s);
    EXPECT(__cudaLaunchKernel((cudaKernel_t)a, g, bl, args, 98, s), "__cudaLaunchKernel",
           c.func == (void *)a && c.grid.x == 3 && c.block.y == 2 && c.shared == 98);
    EXPECT(__cudaLaunchKernel_ptsz((cudaKernel_t)b, g, bl, args, 99, 0), "__cudaLaunchKernel_ptsz",
           c.func == (void *)b && c.shared == 99 && c.stream == 0);
    EXPECT(cudaLaunchKernelExC(&cfg, (void *)mode_calls, args), "cudaLaunchKernelExC",
           c.config == &cfg && c.args == args);
    EXPECT(cudaLaunchKernelExC_ptsz(&cfg, (void *)b, args), "cudaLaunchKernelExC_ptsz",
           c.config == &cfg && c.func == (void *)b);
    EXPECT(cudaStreamSynchronize(s), "cudaStreamSynchronize", c.stream == s);
    EXPECT(cudaStreamSynchronize_ptsz(0), "cudaStreamSynchronize_ptsz", c.stream == 0);
    EXPECT(cudaDeviceSynchronize(), "cudaDeviceSynchronize", 1);
    EXPECT(cudaEventSynchronize(ev), "cudaEventSynchronize", c.event == ev);
    void *h = NULL, *m = NULL;
    EXPECT(cudaHostAlloc(&h, 4100, 3), "cudaHostAlloc",
           c.args == &h && c.count == 4100 && c.kind == 3 && (h == NULL) == fail);
    EXPECT(cudaFreeHost(h), "cudaFreeHost", c.dst == h);
    EXPECT(cudaMallocHost(&m, 5000), "cudaMallocHost", c.args == &m && c.count == 5000);
    EXPECT(cudaFreeHost(m), "cudaFreeHost", c.dst == m);
    EXPECT(cudaHostRegister(page_calls, sizeof page_calls, 1), "cudaHostRegister",
           c.dst == page_calls && c.count == sizeof page_calls && c.kind == 1);
    EXPECT(cudaHostUnregister(page_calls), "cudaHostUnregister", c.dst == page_calls);
  }
  printf("calls %s\n", failures ? "FAILED" : "ok");
  return failures != 0;
}

static char page[4][4096];

static void one_round(void *dev, void *pinned, cudaStream_t s) {
  /* H2D pageable (sync API), H2D pinned (async), D2H pageable, D2D, launches, syncs */
  cudaMemcpy(dev, page[0], 1000, cudaMemcpyHostToDevice);
  cudaMemcpyAsync(dev, pinned, 2000, cudaMemcpyHostToDevice, s);
  cudaMemcpyAsync(page[1], dev, 3000, cudaMemcpyDeviceToHost, s);
  cudaMemcpy((char *)dev + 4096, dev, 100, cudaMemcpyDeviceToDevice);
  dim3 g = {1, 1, 1};
  cudaLaunchKernel((void *)one_round, g, g, NULL, 0, s);
  __cudaLaunchKernel((cudaKernel_t)one_round, g, g, NULL, 0, s);
  __cudaLaunchKernel((cudaKernel_t)one_round, g, g, NULL, 0, s);
  cudaStreamSynchronize(s);
  cudaDeviceSynchronize();
}

static int mode_counts(int n) {
  void *dev, *pinned;
  cudaMalloc(&dev, 8192);
  cudaHostAlloc(&pinned, 4096, 0);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, 0);
  for (int i = 0; i < n; i++)
    one_round(dev, pinned, s);
  printf("counts done\n");
  return 0;
}

static int per_thread_n;
static void *thread_main(void *arg) {
  void *dev = arg;
  char buf[512];
  dim3 g = {1, 1, 1};
  for (int i = 0; i < per_thread_n; i++) {
    __cudaLaunchKernel((cudaKernel_t)thread_main, g, g, NULL, 0, 0);
    cudaMemcpyAsync(dev, buf, sizeof buf, cudaMemcpyHostToDevice, 0);
  }
  return NULL;
}

static int mode_threads(int t, int n) {
  pthread_t th[64];
  per_thread_n = n;
  void *dev;
  cudaMalloc(&dev, 1 << 16);
  for (int i = 0; i < t; i++)
    pthread_create(&th[i], NULL, thread_main, dev);
  for (int i = 0; i < t; i++)
    pthread_join(th[i], NULL);
  printf("threads done\n");
  return 0;
}

static unsigned rng = 12345;
static unsigned next_rand(void) {
  return rng = rng * 1103515245u + 12345u;
}

static int mode_stage(void) {
  size_t max = 24u << 20;
  char *dev, *back = malloc(max), *expect = malloc(max);
  cudaMalloc((void **)&dev, max + 4096);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, 0);
  size_t sizes[] = {70000, 1u << 20, (3u << 20) + 17, 9u << 20, max - 5, 65536, 123457};
  int n = (int)(sizeof sizes / sizeof sizes[0]);
  for (int round = 0; round < 3; round++)
    for (int i = 0; i < n; i++) {
      size_t sz = sizes[i], off = next_rand() % 64;
      char *src = malloc(sz);
      for (size_t k = 0; k < sz; k++)
        src[k] = (char)next_rand();
      memcpy(expect, src, sz);
      cudaError_t r = round == 1 ? cudaMemcpy(dev + off, src, sz, cudaMemcpyHostToDevice)
                                 : cudaMemcpyAsync(dev + off, src, sz, cudaMemcpyHostToDevice, s);
      CHECK(r == cudaSuccess);
      memset(src, 0x5a, sz); /* the caller may overwrite and free the source at once */
      free(src);
      cudaStreamSynchronize(s);
      memset(back, 0, sz);
      CHECK(cudaMemcpy(back, dev + off, sz, cudaMemcpyDeviceToHost) == cudaSuccess);
      if (memcmp(back, expect, sz)) {
        fprintf(stderr, "interpose_prog: bytes differ after a copy of %zu bytes\n", sz);
        failures++;
      }
    }
  printf("stage %s\n", failures ? "FAILED" : "ok");
  return failures != 0;
}

static int mode_capture(void) {
  size_t sz = 1u << 20;
  char *dev, *src = malloc(sz);
  memset(src, 7, sz);
  cudaMalloc((void **)&dev, sz);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, 0);
  fake_set_capturing(s, 1);
  CHECK(cudaMemcpyAsync(dev, src, sz, cudaMemcpyHostToDevice, s) == cudaSuccess);
  fake_call c = fake_last();
  CHECK(c.src == src && c.dst == dev && c.stream == s); /* reached CUDA unchanged */
  printf("capture %s\n", failures ? "FAILED" : "ok");
  return failures != 0;
}

/* A size that wraps the address space (issue 20): dst + n - 1 lands just before dst, inside the
 * same allocation, so a check of the last byte alone would stage it and read far past src.  It
 * must reach CUDA unchanged, which refuses it. */
static int mode_wrap(void) {
  size_t sz = 1u << 20, n = (size_t)-16;
  char *dev, *src = malloc(sz);
  memset(src, 7, sz);
  cudaMalloc((void **)&dev, sz);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, 0);
  CHECK(cudaMemcpyAsync(dev + 64, src, n, cudaMemcpyHostToDevice, s) == cudaErrorInvalidValue);
  fake_call c = fake_last();
  CHECK(c.src == src && c.dst == dev + 64 && c.count == n); /* reached CUDA unchanged */
  CHECK(cudaGetLastError() == cudaErrorInvalidValue); /* the error the program reads, then clears */
  CHECK(cudaMemcpy(dev + 64, src, n, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);
  char *back = malloc(sz);
  CHECK(cudaMemcpy(back, dev + 64, n, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue);
  printf("wrap %s\n", failures ? "FAILED" : "ok");
  return failures != 0;
}

/* cudaDeviceReset between staged copies (issue 20): everything pinwheel allocated dies with the
 * context; the copies after it must be staged again, bytes right. */
static int mode_reset(void) {
  size_t sz = 3u << 20;
  char *src = malloc(sz), *back = malloc(sz);
  for (int round = 0; round < 2; round++) {
    char *dev;
    cudaStream_t s;
    CHECK(cudaMalloc((void **)&dev, sz) == cudaSuccess);
    cudaStreamCreateWithFlags(&s, 0);
    for (int i = 0; i < 3; i++) {
      memset(src, round * 16 + i + 1, sz);
      CHECK(cudaMemcpyAsync(dev, src, sz, cudaMemcpyHostToDevice, s) == cudaSuccess);
      CHECK(cudaStreamSynchronize(s) == cudaSuccess);
      CHECK(cudaMemcpy(back, dev, sz, cudaMemcpyDeviceToHost) == cudaSuccess);
      CHECK(memcmp(back, src, sz) == 0);
    }
    if (!round) CHECK(cudaDeviceReset() == cudaSuccess);
  }
  printf("reset %s\n", failures ? "FAILED" : "ok");
  return failures != 0;
}

/* Sync elision through the wrappers, with the fake's events pending until waited for
 * (FAKE_LAZY_EVENTS), as on a busy GPU.  Each sync right after a staged copy is elided unless a
 * rule keeps it; each observer must meet a fence.  The driver (test_interpose) checks the counts
 * in the summary: 4 elided; kept: host_write 1, mapped 2, ipc 1.  With PINWHEEL_SYNC=keep, or
 * FAKE_PAGEABLE_ACCESS, no fence is made (nothing was elided), and every answer is the same. */
static void host_fn(void *p) {
  *(int *)p = 1;
}
/* cuDNN (the fake cuDNN 9: a dispatcher over a graph library): the pinned memory cudnnCreate
 * allocates, the handle's error storage, keeps no sync; what cudnnQueryRuntimeError reads through
 * the shim (the exported wrapper; the wrapper dlsym hands out, looked up after the sync; in each
 * mode) is as after a real sync, though the storage, read past the shim right after the elided
 * sync, is not written yet.  With "many", the query is looked up in five libraries, one more than
 * the shim has wrappers for: from then on the storage keeps syncs, and what was elided before is
 * waited for at once.  The driver (test_interpose) checks the summary: 3 elided, 1 kept (mapped:
 * the program's own pinned memory); with many, 1 elided, 2 kept (mapped). */
typedef struct handle cudnn_handle;
int cudnnCreate(cudnn_handle **h);
int cudnnSetStream(cudnn_handle *h, cudaStream_t s);
int cudnnDestroy(cudnn_handle *h);
int cudnnQueryRuntimeError(cudnn_handle *h, int *rstatus, int mode, void *tag);
int fake_cudnn_kernel(cudnn_handle *h);
int fake_cudnn_peek(cudnn_handle *h);
typedef int (*cudnn_query_fn)(cudnn_handle *, int *, int, void *);
static cudnn_query_fn query_of(const char *lib) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", PW_FAKE_CUDNN_DIR, lib);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL); /* kept open: the query may be called */
  return h ? (cudnn_query_fn)dlsym(h, "cudnnQueryRuntimeError") : NULL;
}
static int mode_elide_cudnn(int many) {
  const char *opt = getenv("PINWHEEL_SYNC");
  int elides = !opt || strcmp(opt, "keep");
  size_t n = 2 << 20;
  char *dev, *src = malloc(n);
  memset(src, 7, n);
  cudaMalloc((void **)&dev, n);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudnn_handle *h;
  CHECK(cudnnCreate(&h) == 0);
  cudnnSetStream(h, s);
  int st = -1;
  if (many) {
    CHECK(fake_cudnn_kernel(h) == 0);
    copy_and_sync(dev, src, n, s);
    static const char *const libs[] = {"libcudnn_graph.so.9", "libcudnn.so.9", "libcudnnx.so.9",
                                       "libcudnny.so.9", "libcudnnz.so.9"};
    for (int i = 0; i < 5; i++)
      CHECK(query_of(libs[i]) != NULL);
    CHECK(fake_cudnn_peek(h) == 2000); /* the fifth: the elided sync waited for */
    CHECK(fake_cudnn_kernel(h) == 0);
    copy_and_sync(dev, src, n, s); /* kept: the storage is the program's now */
    CHECK(fake_cudnn_peek(h) == 2000);
  }
  for (int how = 0; how < 2 && !many; how++) { /* the exported wrapper, then the dlsym'd one */
    st = -1;
    CHECK(fake_cudnn_kernel(h) == 0);
    copy_and_sync(dev, src, n, s);
    CHECK(fake_cudnn_peek(h) == (elides ? 0 : 2000)); /* elided: the kernel is not done yet */
    cudnn_query_fn q = how ? query_of("libcudnn.so.9") : cudnnQueryRuntimeError;
    CHECK(q && q(h, &st, 0, NULL) == 0);
    CHECK(st == 2000); /* as after a real sync */
  }
  if (!many) {
    /* BLOCKING: cuDNN syncs the handle's stream itself, right after this thread's staged copy */
    st = -1;
    CHECK(fake_cudnn_kernel(h) == 0);
    cudaMemcpyAsync(dev, src, n, cudaMemcpyHostToDevice, s);
    CHECK(cudnnQueryRuntimeError(h, &st, 2, NULL) == 0);
    CHECK(st == 2000);
    CHECK(cudaStreamSynchronize(s) == cudaSuccess);
    /* NONBLOCKING after an elided sync: the stream answers done */
    st = -1;
    CHECK(fake_cudnn_kernel(h) == 0);
    copy_and_sync(dev, src, n, s);
    CHECK(cudnnQueryRuntimeError(h, &st, 1, NULL) == 0);
    CHECK(st == 2000);
  }
  cudnnDestroy(h);
  /* the program's own pinned memory keeps the sync */
  void *pinned;
  cudaHostAlloc(&pinned, 4096, 0);
  copy_and_sync(dev, src, n, s);
  cudaFreeHost(pinned);
  free(src);
  printf("elide_cudnn done\n");
  return failures != 0;
}

/* A program with a __managed__ variable (registered as its CUDA code loads): a copy and its sync,
 * which must be real (a kernel may have written the variable the host reads next). */
void __cudaRegisterManagedVar(void **, void **, char *, const char *, int, size_t, int, int);
static int mode_managedvar(void) {
  static char var[64];
  __cudaRegisterManagedVar(NULL, (void **)&var, var, "var", 0, sizeof var, 0, 0);
  size_t n = 2 << 20;
  char *dev, *src = calloc(1, n);
  cudaMalloc((void **)&dev, n);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  copy_and_sync(dev, src, n, s);
  free(src);
  printf("managedvar done\n");
  return failures != 0;
}

/* A shared mapping of a new 32 MiB /dev/shm file (unlinked, as PyTorch's), every page written
 * (its index), or NULL. */
static char *shm_batch(int *fd) {
  size_t n = 32 << 20;
  char path[64];
  snprintf(path, sizeof path, "/pw-interpose-%d", (int)getpid());
  *fd = shm_open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (*fd < 0) return NULL;
  shm_unlink(path);
  if (ftruncate(*fd, (off_t)n)) return NULL;
  char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
  if (p == MAP_FAILED) return NULL;
  for (size_t i = 0; i < n; i += 4096)
    p[i] = (char)(i >> 12);
  return p;
}

/* munmap of a batch: 0 and the range unmapped at return (msync: ENOMEM), the file intact. */
static void unmap_batch(char *p, int fd) {
  size_t n = 32 << 20;
  char b = 0;
  CHECK(munmap(p, n) == 0);
  CHECK(msync(p, 4096, MS_ASYNC) == -1 && errno == ENOMEM); /* nothing maps the range */
  CHECK(pread(fd, &b, 1, 77 << 12) == 1 && b == 77);        /* the file kept its bytes */
  close(fd);
}

static int mode_shmunmap(void) {
  int fd;
  char *p = shm_batch(&fd); /* before CUDA: pinwheel does nothing yet */
  if (!p) return 2;
  unmap_batch(p, fd);
  char *dev, *priv = calloc(1, 1 << 20);
  cudaMalloc((void **)&dev, 32 << 20);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  copy_and_sync(dev, priv, 1 << 20, s); /* CUDA in use */
  free(priv);
  if (!(p = shm_batch(&fd))) return 2;
  unmap_batch(p, fd);
  if (!(p = shm_batch(&fd))) return 2;
  copy_and_sync(dev, p, 32 << 20, s); /* staged: shared memory is copied in before the return */
  unmap_batch(p, fd);
  printf("shmunmap done\n");
  return failures != 0;
}

/* As a CUDA program does where CUDA is unusable: its first call fails, it says so and exits 1. */
static int mode_nodriver(void) {
  void *p;
  cudaError_t e = cudaMalloc(&p, 1 << 20);
  if (e != cudaSuccess) {
    fprintf(stderr, "CUDA error: %s\n",
            e == cudaErrorInsufficientDriver
                ? "CUDA driver version is insufficient for CUDA runtime version"
                : "other");
    return 1;
  }
  return 0;
}

static int mode_elide(void) {
  const char *opt = getenv("PINWHEEL_SYNC");
  /* a fence each time below, where syncs are elided (not with keep, nor on a device that reaches
   * pageable memory) */
  long f = (!opt || strcmp(opt, "keep")) && !getenv("FAKE_PAGEABLE_ACCESS");
  size_t n = 2 << 20;
  char *dev, *src = malloc(n);
  memset(src, 7, n);
  cudaMalloc((void **)&dev, 4 * n);
  cudaStream_t s, t;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking);
  cudaEvent_t before, e2;
  cudaEventCreateWithFlags(&before, 0);
  cudaEventCreateWithFlags(&e2, 0);
  dim3 g = {1, 1, 1};
  /* 1: elided; a launch on another stream waits for it first */
  cudaEventRecord(before, s);
  copy_and_sync(dev, src, n, s);
  long waits = fake_count("cudaStreamWaitEvent");
  __cudaLaunchKernel((cudaKernel_t)mode_elide, g, g, NULL, 0, t);
  CHECK(fake_count("cudaStreamWaitEvent") == waits + f && (!f || fake_last_wait() == t));
  __cudaLaunchKernel((cudaKernel_t)mode_elide, g, g, NULL, 0, t); /* fenced once already */
  CHECK(fake_count("cudaStreamWaitEvent") == waits + f);
  /* the legacy stream is another stream too: a memset there (a PW_ENQUEUE entry) waits as well */
  cudaMemsetAsync(dev + n, 0, 16, 0);
  CHECK(fake_count("cudaStreamWaitEvent") == waits + 2 * f &&
        (!f || fake_last_wait() == cudaStreamLegacy));
  /* questions answer as after a real sync: the event recorded before it, the stream */
  CHECK(cudaEventQuery(before) == cudaSuccess);
  CHECK(cudaStreamQuery(s) == cudaSuccess);
  /* 2: elided; an event recorded on another stream, a stream waiting for it: fenced first */
  copy_and_sync(dev, src, n, s);
  waits = fake_count("cudaStreamWaitEvent");
  cudaEventRecord(e2, t);
  CHECK(fake_count("cudaStreamWaitEvent") == waits + f && (!f || fake_last_wait() == t));
  /* the stream-ordered allocator on a third stream: a free there waits too */
  cudaStream_t u;
  cudaStreamCreateWithFlags(&u, cudaStreamNonBlocking);
  void *pool_mem = NULL;
  cudaMalloc(&pool_mem, 4096);
  CHECK(cudaFreeAsync(pool_mem, u) == cudaSuccess);
  CHECK(fake_count("cudaStreamWaitEvent") == waits + 2 * f && (!f || fake_last_wait() == u));
  /* 3: elided, then a second sync of the same stream is real (nothing staged in between) */
  copy_and_sync(dev, src, n, s);
  CHECK(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(cudaStreamQuery(s) == cudaSuccess);
  /* kept: a host function on the stream since its last real sync */
  static int written;
  cudaLaunchHostFunc(s, host_fn, &written);
  copy_and_sync(dev, src, n, s);
  CHECK(written == 1);
  /* kept: the program holds pinned memory; after it is freed, elided again (4) */
  void *pinned;
  cudaHostAlloc(&pinned, 4096, 0);
  copy_and_sync(dev, src, n, s);
  cudaFreeHost(pinned);
  copy_and_sync(dev, src, n, s);
  /* managed memory: kept (mapped), for good */
  void *m;
  cudaMallocManaged(&m, 4096, cudaMemAttachGlobal);
  copy_and_sync(dev, src, n, s);
  /* an IPC export: what was elided is waited for, and nothing is elided again (kept: ipc) */
  cudaIpcMemHandle_t h;
  cudaIpcGetMemHandle(&h, dev);
  CHECK(cudaStreamQuery(s) == cudaSuccess);
  copy_and_sync(dev, src, n, s);
  free(src);
  printf("elide done\n");
  return failures != 0;
}

/* A memory pool handed between processes stops elision as the other IPC calls do (argument: which
 * call): one sync elided, then, after the call, one kept (ipc); the driver checks the summary. */
static int mode_elide_pool_ipc(const char *which) {
  size_t n = 2 << 20;
  char *dev, *src = malloc(n);
  memset(src, 3, n);
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, 0) == cudaSuccess);
  CHECK(cudaMalloc((void **)&dev, n) == cudaSuccess);
  copy_and_sync(dev, src, n, s);
  cudaMemPool_t pool = NULL;
  struct cudaMemPoolPtrExportData d;
  void *p;
  int fd;
  if (!strcmp(which, "export_pool"))
    cudaMemPoolExportToShareableHandle(&fd, pool, cudaMemHandleTypePosixFileDescriptor, 0);
  else if (!strcmp(which, "import_pool"))
    cudaMemPoolImportFromShareableHandle(&pool, &fd, cudaMemHandleTypePosixFileDescriptor, 0);
  else if (!strcmp(which, "export_pointer"))
    cudaMemPoolExportPointer(&d, dev);
  else if (!strcmp(which, "import_pointer"))
    cudaMemPoolImportPointer(&p, pool, &d);
  else
    return 2;
  copy_and_sync(dev, src, n, s);
  free(src);
  printf("elide_pool_ipc done\n");
  return failures != 0;
}

/* More of sync elision through the wrappers (FAKE_LAZY_EVENTS): the other calls that enqueue work
 * on another stream wait for an elided sync first (a copy into a symbol, between arrays, a
 * graphics unmap, an external semaphore's signal); the signal's stream syncs for real after it; a
 * destroyed event's handle, reused by an IPC event, is unknown (a stream waiting for it syncs for
 * real); a memory pool on the host keeps syncs real, one on the device does not.  The driver
 * (test_interpose) checks the summary: 2 elided; kept: host_write 2, mapped 1; 4 fences. */
static int mode_elide_more(void) {
  long f = 1; /* a fence each time below (PINWHEEL_SYNC is the default) */
  size_t n = 2 << 20;
  char *dev, *src = malloc(n);
  memset(src, 7, n);
  cudaMalloc((void **)&dev, n);
  cudaStream_t s, t, u, v;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&u, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&v, cudaStreamNonBlocking);
  static char symbol[16];
  /* 1: elided; then each call on another stream waits for it */
  copy_and_sync(dev, src, n, s);
  long waits = fake_count("cudaStreamWaitEvent");
  CHECK(cudaMemcpyToSymbolAsync(symbol, src, 16, 0, cudaMemcpyHostToDevice, t) == cudaSuccess);
  CHECK(fake_count("cudaStreamWaitEvent") == waits + f && fake_last_wait() == t);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  CHECK(cudaMemcpyArrayToArray(NULL, 0, 0, NULL, 0, 0, 16, cudaMemcpyDeviceToDevice) ==
        cudaSuccess);
#pragma GCC diagnostic pop
  CHECK(fake_count("cudaStreamWaitEvent") == waits + 2 * f && fake_last_wait() == cudaStreamLegacy);
  CHECK(cudaGraphicsUnmapResources(0, NULL, u) == cudaSuccess);
  CHECK(fake_count("cudaStreamWaitEvent") == waits + 3 * f && fake_last_wait() == u);
  CHECK(cudaSignalExternalSemaphoresAsync(NULL, NULL, 0, v) == cudaSuccess);
  CHECK(fake_count("cudaStreamWaitEvent") == waits + 4 * f && fake_last_wait() == v);
  /* kept (host_write): another API may be asked, from the host, whether v's signal came */
  cudaMemcpyAsync(dev, src, n, cudaMemcpyHostToDevice, v);
  CHECK(cudaStreamSynchronize(v) == cudaSuccess);
  /* kept (host_write): an event recorded after nothing that writes host memory, destroyed; an
   * event opened from another process gets its handle, and s waits for it */
  cudaEvent_t ev, ipc = NULL;
  cudaEventCreateWithFlags(&ev, 0);
  cudaEventRecord(ev, t);
  CHECK(cudaEventDestroy(ev) == cudaSuccess);
  cudaIpcEventHandle_t h;
  memset(&h, 0, sizeof h);
  CHECK(cudaIpcOpenEventHandle(&ipc, h) == cudaSuccess && ipc == ev);
  cudaStreamWaitEvent(s, ipc, 0);
  copy_and_sync(dev, src, n, s);
  /* a pool on the device: elided (2); one on the host: kept (mapped) */
  struct cudaMemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  cudaMemPool_t pool;
  CHECK(cudaMemPoolCreate(&pool, &props) == cudaSuccess);
  copy_and_sync(dev, src, n, s);
  props.location.type = cudaMemLocationTypeHostNuma;
  CHECK(cudaMemPoolCreate(&pool, &props) == cudaSuccess);
  copy_and_sync(dev, src, n, s);
  free(src);
  printf("elide_more done\n");
  return failures != 0;
}

static int mode_fork(void) {
  mode_counts(2);
  fflush(stdout);
  pid_t p = fork();
  if (p == 0) {
    mode_counts(1);
    exit(0);
  }
  int st = 0;
  waitpid(p, &st, 0);
  printf("fork child status %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  return !WIFEXITED(st) || WEXITSTATUS(st) != 0;
}

/* A traced run (the test sets PINWHEEL_TRACE and PINWHEEL_CUPTI to the fake CUPTI): CUDA
 * calls, a forked child that never uses CUDA, and with "profiler" the program's own CUPTI client
 * starting in the middle, as torch.profiler does; with "cudnn" a cuDNN handle made and destroyed
 * (the fake CUPTI marks its last record with the last correlation pushed: cudnnCreate's). */
static int prof_buffers, prof_driver_calls;
static CUptiResult (*prof_next)(uint8_t *, size_t, CUpti_Activity **);
static void CUPTIAPI prof_req(uint8_t **b, size_t *s, size_t *m) {
  *b = malloc(1 << 16);
  *s = 1 << 16;
  *m = 0;
}
static void CUPTIAPI prof_done(CUcontext c, uint32_t st, uint8_t *b, size_t s, size_t v) {
  prof_buffers += v > 0;
  CUpti_Activity *r = NULL; /* the driver calls' records it gets */
  while (prof_next && prof_next(b, v, &r) == CUPTI_SUCCESS)
    prof_driver_calls += r->kind == CUPTI_ACTIVITY_KIND_DRIVER;
  free(b);
}

/* How many of this process's threads run at SCHED_IDLE (the trace writer should). */
static int idle_threads(void) {
  DIR *d = opendir("/proc/self/task");
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));)
    if (e->d_name[0] != '.' && sched_getscheduler(atoi(e->d_name)) == SCHED_IDLE) n++;
  if (d) closedir(d);
  return n;
}

static int mode_traced(int profiler, int cudnn) {
  void *dev;
  static char host[1 << 20]; /* large enough to be staged in stage mode */
  CHECK(cudaMalloc(&dev, sizeof host) == cudaSuccess);
  CHECK(cudaMemcpy(dev, host, sizeof host, cudaMemcpyHostToDevice) == cudaSuccess);
  printf("idle threads %d\n", idle_threads());
  if (cudnn) {
    cudnn_handle *h;
    CHECK(cudnnCreate(&h) == 0);
    cudnnDestroy(h);
    /* what cudnnCreate pushed is popped (CUSTOM2, trace.c's mark of its calls) */
    void *cupti = dlopen(getenv("PINWHEEL_CUPTI"), RTLD_NOW | RTLD_NOLOAD);
    int (*depth)(int) = cupti ? (int (*)(int))dlsym(cupti, "fake_cupti_ext_depth") : NULL;
    CHECK(depth && depth(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2) == 0);
    if (cupti) dlclose(cupti);
  }
  pid_t p = fork();
  if (p == 0) _exit(0);
  int st = 0;
  waitpid(p, &st, 0);
  if (profiler) {
    /* as PyTorch has it: libcupti in a local scope (a dependency of an extension module that
     * Python opened RTLD_LOCAL), the client's call bound to the first definition in the global
     * scope, which is the shim's */
    void *h = dlopen(getenv("PINWHEEL_CUPTI"), RTLD_NOW | RTLD_LOCAL);
    CHECK(h != NULL);
    CUptiResult (*reg)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
    CUptiResult (*flush)(uint32_t);
    *(void **)&reg = dlsym(RTLD_DEFAULT, "cuptiActivityRegisterCallbacks");
    *(void **)&flush = dlsym(h, "cuptiActivityFlushAll");
    *(void **)&prof_next = dlsym(h, "cuptiActivityGetNextRecord");
    CHECK(reg && flush && prof_next);
    /* the kernel kind enabled before registering, as NVIDIA's activity samples do; through the
     * global scope, the shim's definition */
    CUptiResult (*enable)(CUpti_ActivityKind);
    *(void **)&enable = dlsym(RTLD_DEFAULT, "cuptiActivityEnable");
    CHECK(enable && enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS);
    CHECK(reg(prof_req, prof_done) == CUPTI_SUCCESS);
    int (*kinds_on)(void); /* the fake CUPTI's count of the kinds enabled */
    *(void **)&kinds_on = dlsym(h, "fake_cupti_enabled_kinds");
    CHECK(kinds_on != NULL);
    printf("kinds enabled when the profiler registered: %d\n", kinds_on());
    CHECK(flush(0) == CUPTI_SUCCESS);
    int before = prof_driver_calls; /* the driver kind not enabled yet: no driver records */
    CHECK(enable(CUPTI_ACTIVITY_KIND_DRIVER) == CUPTI_SUCCESS);
    CHECK(flush(0) == CUPTI_SUCCESS);
    printf("profiler got %d buffers, %d driver calls before it enabled their kind, %d after\n",
           prof_buffers, before, prof_driver_calls - before);
  }
  CHECK(cudaMemcpy(host, dev, sizeof host, cudaMemcpyDeviceToHost) == cudaSuccess);
  printf("traced %s\n", failures ? "FAILED" : "ok");
  return failures != 0;
}

static void k_start(void) {}
static void k_fwd(void) {}
static void k_bwd(void) {}
static void k_opt(void) {}
static int mode_loop(int n, const char *how) {
  static char batch[1 << 20], out[4096];
  void *dev;
  cudaStream_t s;
  CHECK(cudaMalloc(&dev, sizeof batch) == cudaSuccess);
  cudaStreamCreateWithFlags(&s, 0);
  dim3 g = {1, 1, 1};
  for (int i = 0; i < 5; i++) { /* start-up: weights in, a warm-up kernel */
    cudaMemcpyAsync(dev, batch, 65536u * (unsigned)(i + 1), cudaMemcpyHostToDevice, s);
    cudaLaunchKernel((void *)k_start, g, g, NULL, 0, s);
  }
  cudaStreamSynchronize(s);
  struct timespec ms = {0, 20000000}; /* steady enough for the report's period tolerance */
  for (int it = 1; it <= n; it++) {
    if (how && !strcmp(how, "profiler") && it == 4) cudaProfilerStart();
    cudaMemcpyAsync(dev, batch, sizeof batch, cudaMemcpyHostToDevice, s);
    cudaLaunchKernel((void *)k_fwd, g, g, NULL, 0, s);
    cudaLaunchKernel((void *)k_bwd, g, g, NULL, 0, s);
    cudaLaunchKernel((void *)k_opt, g, g, NULL, 0, s);
    if (how && !strcmp(how, "odd") && it == 1) /* the first iteration differs (an optimizer's) */
      cudaLaunchKernel((void *)k_start, g, g, NULL, 0, s);
    cudaMemcpyAsync(out, dev, sizeof out, cudaMemcpyDeviceToHost, s);
    cudaStreamSynchronize(s);
    nanosleep(&ms, NULL);
    if (how && !strcmp(how, "profiler") && it == 6) cudaProfilerStop();
    if (how && !strcmp(how, "pause") && it == 5) {
      struct timespec p = {0, 400000000};
      nanosleep(&p, NULL);
    }
  }
  cudaMemcpy(out, dev, 1000, cudaMemcpyDeviceToHost); /* teardown */
  printf("loop %s\n", failures ? "FAILED" : "ok");
  return failures != 0;
}

/* An NVTX module's first call, as nvtx3 makes it: load the library NVTX_INJECTION64_PATH names and
 * call its InitializeInjectionNvtx2 with the module's export table; then one CUDA call, so a traced
 * run starts its collector and flushes at exit. */
static const void *nvtx_export_table(uint32_t id) {
  (void)id;
  return NULL;
}
static int mode_nvtx(void) {
  const char *path = getenv("NVTX_INJECTION64_PATH");
  if (!path || !*path) {
    printf("nvtx: no injection library\n");
  } else {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    int (*init)(void *) = NULL;
    if (h) *(void **)&init = dlsym(h, "InitializeInjectionNvtx2");
    printf("nvtx: %s init %d\n", strrchr(path, '/') ? strrchr(path, '/') + 1 : path,
           init ? init((void *)nvtx_export_table) : -1);
  }
  char b[8] = {0};
  cudaMemcpy(b + 4, b, 4, cudaMemcpyHostToHost);
  return 0;
}

/* A pattern of n bytes that differs with seed. */
static void fill(unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    p[i] = (unsigned char)(i * 7 + seed + (i >> 12));
}
static int same(const unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != (unsigned char)(i * 7 + seed + (i >> 12))) return 0;
  return 1;
}

/* The program's own staging through the runtime, as CuPy and PyTorch do it: copies into and out
 * of pinned memory it allocated or registered, by memmove and by memcpy.  Which of them reach the
 * staging threads is the summary's to say (test_interpose); the bytes are checked here. */
static int mode_hostcopy(void) {
  size_t n = (8 << 20) + 3, sh = 4096;
  unsigned char *src = malloc(n), *reg = malloc(n + 4096);
  fill(src, n, 1);
  void *pin = NULL, *mh = NULL;
  CHECK(cudaHostAlloc(&pin, n + 64, 0) == cudaSuccess && pin);
  CHECK(cudaMallocHost(&mh, n) == cudaSuccess && mh);
  CHECK(cudaHostRegister(reg, n + 4096, 0) == cudaSuccess);
  unsigned char *p = (unsigned char *)pin + 1;
  memmove(p, src, n); /* 1: into pinned memory by memmove, unaligned (NumPy's assignment) */
  CHECK(same(p, n, 1));
  memset(p, 0, n);
  memcpy(p, src, n); /* 2: by memcpy */
  CHECK(same(p, n, 1));
  unsigned char *fresh = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  memmove(fresh, p, n); /* out of it into fresh pages */
  CHECK(same(fresh, n, 1));
  memcpy(mh, src, n); /* 3: into cudaMallocHost memory */
  CHECK(same(mh, n, 1));
  memmove(reg + 5, src, n - 5); /* 4: into registered memory */
  CHECK(same(reg + 5, n - 5, 1));
  /* Overlapping ranges inside pinned memory, both ways: glibc's memmove, whose result is defined
   * (a forward copy in parts would read bytes it had already overwritten). */
  memmove(p + sh, p, n - sh);
  CHECK(same(p + sh, n - sh, 1) && same(p, sh, 1));
  memcpy(p, src, n); /* 5 */
  memmove(p, p + sh, n - sh);
  CHECK(memcmp(p, src + sh, n - sh) == 0 && memcmp(p + n - sh, src + n - sh, sh) == 0);
  memmove(p, src, 1000); /* small: glibc's */
  CHECK(same(p, 1000, 1));
  CHECK(cudaHostUnregister(reg) == cudaSuccess);
  memmove(reg, src, n); /* no longer pinned: glibc's */
  CHECK(same(reg, n, 1));
  /* Freed: the same addresses, mapped again as plain memory, are not pinned. */
  CHECK(cudaFreeHost(pin) == cudaSuccess);
  uintptr_t base = (uintptr_t)pin & ~(uintptr_t)4095;
  size_t len = (uintptr_t)pin + n + 64 - base;
  void *again = mmap((void *)base, len, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  CHECK(again == (void *)base);
  if (again == (void *)base) {
    memcpy(pin, src, n);
    CHECK(same(pin, n, 1));
    munmap(again, len);
  }
  CHECK(cudaFreeHost(mh) == cudaSuccess);
  munmap(fresh, n);
  free(reg);
  free(src);
  printf("hostcopy %s\n", failures ? "FAILED" : "ok");
  return failures != 0;
}

/* CuPy's cp.asarray through the runtime, five times over one buffer of its pinned memory: a
 * memmove fills it, cudaMemcpyAsync copies it to the device, the stream is synchronized.  Between
 * fill and copy: in round 1 a kernel launch, in round 2 a write of the program, in round 3 a copy
 * from the device into the buffer; each must give an upload made ahead up (PINWHEEL_FILL_AHEAD,
 * the summary says which).  The device's bytes are checked every round. */
static int mode_fillahead(void) {
  size_t n = (8 << 20) + 3, at = 100, k = 3 * 4096 + 7;
  unsigned char *src = malloc(n), *back = malloc(n), *mark = malloc(4096);
  void *pin = NULL, *dev = NULL, *dev2 = NULL;
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  CHECK(cudaHostAlloc(&pin, n + at, cudaHostAllocPortable) == cudaSuccess && pin);
  unsigned flags = 99;
  CHECK(cudaHostGetFlags(&flags, pin) == cudaSuccess && flags != 99);
  CHECK(cudaMalloc(&dev, n) == cudaSuccess && cudaMalloc(&dev2, 4096) == cudaSuccess);
  memset(mark, 0xa5, 4096);
  CHECK(cudaMemcpy(dev2, mark, 4096, cudaMemcpyHostToDevice) == cudaSuccess);
  unsigned char *p = (unsigned char *)pin + at;
  for (int round = 0; round < 5; round++) {
    fill(src, n, (unsigned)round + 1);
    memmove(p, src, n);
    if (round == 1) {
      dim3 g = {1, 1, 1};
      CHECK(cudaLaunchKernel((const void *)mode_fillahead, g, g, NULL, 0, s) == cudaSuccess);
    } else if (round == 2) {
      p[n / 2] ^= 0xff; /* a write onto a guarded page: it waits until the upload is given up */
      src[n / 2] ^= 0xff;
    } else if (round == 3) {
      CHECK(cudaMemcpyAsync(p + k, dev2, 4096, cudaMemcpyDeviceToHost, s) == cudaSuccess);
      CHECK(cudaStreamSynchronize(s) == cudaSuccess);
      memset(src + k, 0xa5, 4096);
    }
    CHECK(cudaMemcpyAsync(dev, p, n, cudaMemcpyHostToDevice, s) == cudaSuccess);
    CHECK(cudaStreamSynchronize(s) == cudaSuccess);
    CHECK(cudaMemcpy(back, dev, n, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(memcmp(back, src, n) == 0);
  }
  CHECK(cudaFreeHost(pin) == cudaSuccess);
  free(src);
  free(back);
  free(mark);
  printf("fillahead %s\n", failures ? "FAILED" : "ok");
  return failures != 0;
}

/* The host function of mode_fillahead_hazards: it writes the pinned buffer after the fill, before
 * the copy that the stream orders after it (the fake runs it at once; CUDA would run it later, so
 * no guard could see the write in time). */
typedef struct hazard_write {
  unsigned char *p, *src;
  size_t n;
} hazard_write;
static void write_buffer(void *arg) {
  hazard_write *w = arg;
  for (size_t i = 0; i < w->n; i += 4096) {
    w->p[i] ^= 0x5a;
    w->src[i] ^= 0x5a;
  }
}

/* cp.asarray five times, as in mode_fillahead, with the calls no other hook sees between fill and
 * copy: in round 1 a cudaMemsetAsync of another buffer (the upload must be given up:
 * memset_or_copy), in round 3 a cudaLaunchHostFunc whose function writes the pinned buffer (every
 * upload is given up and none made again: stream_ordered; the device must get what the function
 * wrote).  Rounds 0 and 2 copy from uploads, round 4 is CUDA's own copy.  Bytes checked every
 * round. */
static int mode_fillahead_hazards(void) {
  size_t n = (8 << 20) + 3, at = 100;
  unsigned char *src = malloc(n), *back = malloc(n), *mark = malloc(4096);
  void *pin = NULL, *dev = NULL, *dev2 = NULL;
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  CHECK(cudaHostAlloc(&pin, n + at, cudaHostAllocPortable) == cudaSuccess && pin);
  CHECK(cudaMalloc(&dev, n) == cudaSuccess && cudaMalloc(&dev2, 4096) == cudaSuccess);
  unsigned char *p = (unsigned char *)pin + at;
  for (int round = 0; round < 5; round++) {
    fill(src, n, (unsigned)round + 1);
    memmove(p, src, n);
    if (round == 1) {
      CHECK(cudaMemsetAsync(dev2, 0x3c, 4096, s) == cudaSuccess);
    } else if (round == 3) {
      hazard_write w = {p, src, n};
      CHECK(cudaLaunchHostFunc(s, write_buffer, &w) == cudaSuccess);
    }
    CHECK(cudaMemcpyAsync(dev, p, n, cudaMemcpyHostToDevice, s) == cudaSuccess);
    CHECK(cudaStreamSynchronize(s) == cudaSuccess);
    CHECK(cudaMemcpy(back, dev, n, cudaMemcpyDeviceToHost) == cudaSuccess);
    if (memcmp(back, src, n)) {
      fprintf(stderr, "interpose_prog: fillahead_hazards: round %d: the device's bytes differ\n",
              round);
      failures++;
    }
  }
  memset(mark, 0x3c, 4096);
  CHECK(cudaMemcpy(back, dev2, 4096, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(memcmp(back, mark, 4096) == 0);
  CHECK(cudaFreeHost(pin) == cudaSuccess);
  free(src);
  free(back);
  free(mark);
  printf("fillahead_hazards %s\n", failures ? "FAILED" : "ok");
  return failures != 0;
}

/* The program's fd 2 becomes its data file: nothing of pinwheel's may land in it. */
static int mode_reopen2(const char *path) {
  close(2);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  CHECK(fd == 2);
  static const char data[] = "the program's data\n";
  CHECK(write(2, data, sizeof data - 1) == (ssize_t)(sizeof data - 1));
  mode_counts(1);
  printf("reopen2 done\n");
  return failures != 0;
}

static int mode_exec_traced(const char *self) {
  char b[8] = {0};
  CHECK(cudaMemcpy(b + 4, b, 4, cudaMemcpyHostToHost) == cudaSuccess); /* the trace starts */
  fflush(stdout);
  pid_t p = fork();
  if (p == 0) {
    execl(self, self, "traced", "plain", (char *)NULL);
    _exit(127);
  }
  int st = 0;
  waitpid(p, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK(cudaMemcpy(b + 4, b, 4, cudaMemcpyHostToHost) == cudaSuccess);
  printf("exec-traced %s\n", failures ? "FAILED" : "ok");
  return failures != 0;
}

#define FIRST_BYTES (1u << 20)
static pthread_barrier_t first_line;
static atomic_int first_bad;
static void *first_main(void *arg) {
  char *dev = arg, *src = malloc(FIRST_BYTES), *back = malloc(FIRST_BYTES);
  unsigned char tag = (unsigned char)((uintptr_t)dev >> 20);
  for (size_t k = 0; k < FIRST_BYTES; k++)
    src[k] = (char)(k * 131 + tag);
  pthread_barrier_wait(&first_line);
  if (cudaMemcpy(dev, src, FIRST_BYTES, cudaMemcpyHostToDevice) != cudaSuccess)
    atomic_fetch_add(&first_bad, 1);
  memset(src, 0x5a, FIRST_BYTES); /* the caller may overwrite and free the source at once */
  if (cudaMemcpy(back, dev, FIRST_BYTES, cudaMemcpyDeviceToHost) != cudaSuccess)
    atomic_fetch_add(&first_bad, 1);
  for (size_t k = 0; k < FIRST_BYTES; k++)
    if (back[k] != (char)(k * 131 + tag)) {
      atomic_fetch_add(&first_bad, 1);
      break;
    }
  free(src);
  free(back);
  return NULL;
}

static int mode_first(int t) {
  pthread_t th[64];
  char *dev[64];
  if (t < 1 || t > 64) return 2;
  pthread_barrier_init(&first_line, NULL, (unsigned)t);
  for (int i = 0; i < t; i++)
    CHECK(cudaMalloc((void **)&dev[i], FIRST_BYTES) == cudaSuccess);
  for (int i = 0; i < t; i++)
    pthread_create(&th[i], NULL, first_main, dev[i]);
  for (int i = 0; i < t; i++)
    pthread_join(th[i], NULL);
  failures += atomic_load(&first_bad);
  printf("first %s\n", failures ? "FAILED" : "ok");
  return failures != 0;
}

/* atexitcopy: handlers run newest first, and CUDA (the fake too) registers its teardown at its
 * first call, after this one: exit_copy runs once CUDA is gone, pinwheel's own handlers before. */
static void *exit_dst;
static void exit_copy(void) {
  size_t n = 1 << 20;
  char *src = malloc(n);
  if (!src) return;
  memset(src, 7, n);
  cudaError_t rc = cudaMemcpy(exit_dst, src, n, cudaMemcpyHostToDevice);
  free(src);
  printf("exit copy: status %d\n", (int)rc);
  fflush(stdout);
}
static int mode_atexit_copy(void) {
  atexit(exit_copy);
  if (cudaMalloc(&exit_dst, 1 << 20) != cudaSuccess) return 1; /* the first CUDA call */
  printf("atexitcopy: exiting\n");
  return 0;
}

int main(int argc, char **argv) {
  const char *m = argc > 1 ? argv[1] : "none";
  if (!strcmp(m, "calls")) return mode_calls();
  if (!strcmp(m, "counts")) return mode_counts(argc > 2 ? atoi(argv[2]) : 1);
  if (!strcmp(m, "threads")) return mode_threads(atoi(argv[2]), atoi(argv[3]));
  if (!strcmp(m, "stage")) return mode_stage();
  if (!strcmp(m, "hostcopy")) return mode_hostcopy();
  if (!strcmp(m, "fillahead")) return mode_fillahead();
  if (!strcmp(m, "fillahead_hazards")) return mode_fillahead_hazards();
  if (!strcmp(m, "capture")) return mode_capture();
  if (!strcmp(m, "wrap")) return mode_wrap();
  if (!strcmp(m, "reset")) return mode_reset();
  if (!strcmp(m, "fork")) return mode_fork();
  if (!strcmp(m, "elide")) return mode_elide();
  if (!strcmp(m, "elide_more")) return mode_elide_more();
  if (!strcmp(m, "elide_cudnn")) return mode_elide_cudnn(argc > 2 && !strcmp(argv[2], "many"));
  if (!strcmp(m, "elide_pool_ipc") && getenv("POOL_IPC"))
    return mode_elide_pool_ipc(getenv("POOL_IPC"));
  if (!strcmp(m, "nodriver")) return mode_nodriver();
  if (!strcmp(m, "managedvar")) return mode_managedvar();
  if (!strcmp(m, "shmunmap")) return mode_shmunmap();
  if (!strcmp(m, "nvtx")) return mode_nvtx();
  if (!strcmp(m, "reopen2") && argc > 2) return mode_reopen2(argv[2]);
  if (!strcmp(m, "exec-traced")) return mode_exec_traced(argv[0]);
  if (!strcmp(m, "first") && argc > 2) return mode_first(atoi(argv[2]));
  if (!strcmp(m, "atexitcopy")) return mode_atexit_copy();
  if (!strcmp(m, "traced"))
    return mode_traced(argc > 2 && !strcmp(argv[2], "profiler"),
                       argc > 2 && !strcmp(argv[2], "cudnn"));
  if (!strcmp(m, "loop") && argc > 2) return mode_loop(atoi(argv[2]), argc > 3 ? argv[3] : NULL);
  if (!strcmp(m, "exit")) { /* one CUDA call, then the given status */
    char b[8] = {0};
    cudaMemcpy(b + 4, b, 4, cudaMemcpyHostToHost);
    return argc > 2 ? atoi(argv[2]) : 0;
  }
  /* never uses CUDA: report how many threads the process has (the shim must have started none) */
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  int threads = -1;
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, "Threads:", 8)) threads = atoi(line + 8);
  if (f) fclose(f);
  printf("hello from a program that never uses CUDA; threads %d\n", threads);
  return 3;
}
