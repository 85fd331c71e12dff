// cupti_cost — what CUPTI's activity kinds cost the host per CUDA call, one configuration per
// process: µs per launch of an empty kernel, per 4 KiB pinned -> device cudaMemcpyAsync and per
// cudaEventRecord, the calls made in batches of 500 and only the calls timed (the syncs between
// batches are not).  A loop that is host-bound pays this on every call; a GPU-bound one hides it.
// With "+push", every call is inside an external correlation id (pushed and popped around it, as
// pinwheel's collector marks its own calls): the records then show whether CUPTI linked each
// kernel to its id, which it needs for a trace without API records.
//   nvcc -O2 bench/cupti_cost.cu -o cupti_cost -lcupti -L<toolkit>/lib (or lib64)
//   ./cupti_cost none|attach|kernel|memcpy|runtime|driver|gpu|all [+push]
//     none: CUPTI not used; attach: the buffer callbacks and external correlation records only;
//     gpu: kernels, copies, memsets, syncs, NVTX, external correlation (no API records);
//     all: the collector's nine kinds, every API call recorded
// bench/cupti_cost.py builds it, runs every configuration in turn, several rounds, and prints medians.
#include <cuda_runtime.h>
#include <cupti.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "cupti_cost: %s: %s\n", #x, cudaGetErrorString(e_));                         \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)
#define CU(x)                                                                                      \
  do {                                                                                             \
    CUptiResult r_ = (x);                                                                          \
    if (r_ != CUPTI_SUCCESS) {                                                                     \
      const char *m_ = "?";                                                                        \
      cuptiGetResultString(r_, &m_);                                                               \
      fprintf(stderr, "cupti_cost: %s: %s\n", #x, m_);                                             \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

__global__ void empty(int *p) {
  if (p && threadIdx.x == 1024) *p = 1; // never: keeps the launch's argument
}

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static uint64_t n_kernel, n_ext, n_api, n_linked;
static uint32_t *kcorr; // kernels' correlation ids
static size_t nk, capk;
static uint32_t *ecorr; // correlation ids an external id was linked to
static size_t ne, cape;

static void CUPTIAPI requested(uint8_t **buf, size_t *size, size_t *max) {
  *size = 8u << 20;
  *buf = (uint8_t *)aligned_alloc(8, *size);
  *max = 0;
}

static int lost; // an id not kept (no memory): the linked count is then a lower bound
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; // completed can run on CUPTI's thread

static void push_id(uint32_t **a, size_t *n, size_t *cap, uint32_t v) {
  if (*n == *cap) {
    size_t nc = *cap ? 2 * *cap : 4096;
    uint32_t *na = (uint32_t *)realloc(*a, nc * sizeof **a);
    if (!na) {
      lost = 1;
      return;
    }
    *a = na, *cap = nc;
  }
  (*a)[(*n)++] = v;
}

static void CUPTIAPI completed(CUcontext, uint32_t, uint8_t *buf, size_t, size_t valid) {
  CUpti_Activity *rec = NULL;
  pthread_mutex_lock(&mu);
  while (cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      n_kernel++;
      push_id(&kcorr, &nk, &capk, ((CUpti_ActivityKernel10 *)rec)->correlationId);
    } else if (rec->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
      n_ext++;
      push_id(&ecorr, &ne, &cape, ((CUpti_ActivityExternalCorrelation *)rec)->correlationId);
    } else if (rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME || rec->kind == CUPTI_ACTIVITY_KIND_DRIVER) {
      n_api++;
    }
  }
  pthread_mutex_unlock(&mu);
  free(buf);
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  const char *cfg = argc > 1 ? argv[1] : "none";
  int push = argc > 2 && !strcmp(argv[2], "+push");
  CUpti_ActivityKind gpu[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,   CUPTI_ACTIVITY_KIND_MEMCPY,
                              CUPTI_ACTIVITY_KIND_MEMSET,              CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
                              CUPTI_ACTIVITY_KIND_MARKER,              CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};
  CUpti_ActivityKind all[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                              CUPTI_ACTIVITY_KIND_MEMCPY2,           CUPTI_ACTIVITY_KIND_MEMSET,
                              CUPTI_ACTIVITY_KIND_RUNTIME,           CUPTI_ACTIVITY_KIND_DRIVER,
                              CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,   CUPTI_ACTIVITY_KIND_MARKER,
                              CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};
  CUpti_ActivityKind one[2] = {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};
  CUpti_ActivityKind *kinds = one;
  size_t nkinds = 1;
  if (!strcmp(cfg, "kernel")) one[nkinds++] = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  else if (!strcmp(cfg, "memcpy")) one[nkinds++] = CUPTI_ACTIVITY_KIND_MEMCPY;
  else if (!strcmp(cfg, "runtime")) one[nkinds++] = CUPTI_ACTIVITY_KIND_RUNTIME;
  else if (!strcmp(cfg, "driver")) one[nkinds++] = CUPTI_ACTIVITY_KIND_DRIVER;
  else if (!strcmp(cfg, "gpu")) kinds = gpu, nkinds = sizeof gpu / sizeof *gpu;
  else if (!strcmp(cfg, "all")) kinds = all, nkinds = sizeof all / sizeof *all;
  else if (strcmp(cfg, "none") && strcmp(cfg, "attach")) {
    fprintf(stderr, "cupti_cost: unknown configuration %s\n", cfg);
    return 2;
  }
  int traced = strcmp(cfg, "none") != 0;
  if (push && !traced) {
    fprintf(stderr, "cupti_cost: +push needs CUPTI (not with none)\n");
    return 2;
  }
  if (traced) {
    CU(cuptiActivityRegisterCallbacks(requested, completed));
    for (size_t i = 0; i < nkinds; i++) CU(cuptiActivityEnable(kinds[i]));
  }
  int *d;
  void *h;
  CK(cudaMalloc((void **)&d, 1 << 20));
  CK(cudaMallocHost(&h, 4096));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t ev;
  CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  const int batch = 500, rounds = 40;
  double t_launch = 0, t_copy = 0, t_event = 0;
  uint64_t id = 1;
  for (int r = -2; r < rounds; r++) { // 2 rounds of warm-up
    double t0 = now_us();
    for (int i = 0; i < batch; i++) {
      if (push) cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_UNKNOWN, id++);
      empty<<<1, 32, 0, s>>>(d);
      if (push) cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_UNKNOWN, NULL);
    }
    double t1 = now_us();
    CK(cudaStreamSynchronize(s));
    double t2 = now_us();
    for (int i = 0; i < batch; i++) CK(cudaMemcpyAsync(d, h, 4096, cudaMemcpyHostToDevice, s));
    double t3 = now_us();
    CK(cudaStreamSynchronize(s));
    double t4 = now_us();
    for (int i = 0; i < batch; i++) CK(cudaEventRecord(ev, s));
    double t5 = now_us();
    CK(cudaStreamSynchronize(s));
    if (r >= 0) t_launch += t1 - t0, t_copy += t3 - t2, t_event += t5 - t4;
  }
  CK(cudaGetLastError());
  if (traced) CU(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  pthread_mutex_lock(&mu);
  if (lost) fprintf(stderr, "cupti_cost: out of memory for the ids; the linked count is a lower bound\n");
  if (push && nk) { // the kernels whose correlation id an external id was linked to
    qsort(ecorr, ne, sizeof *ecorr, cmp_u32);
    for (size_t i = 0; i < nk; i++)
      n_linked += bsearch(&kcorr[i], ecorr, ne, sizeof *ecorr, cmp_u32) != NULL;
  }
  double n = (double)batch * rounds;
  printf("cupti_cost %s%s: launch %.3f us, memcpyAsync %.3f us, eventRecord %.3f us; records: kernels "
         "%llu, API calls %llu, external ids %llu, kernels linked to one %llu\n",
         cfg, push ? " +push" : "", t_launch / n, t_copy / n, t_event / n, (unsigned long long)n_kernel,
         (unsigned long long)n_api, (unsigned long long)n_ext, (unsigned long long)n_linked);
  pthread_mutex_unlock(&mu);
  return 0;
}
