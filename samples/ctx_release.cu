// ctx_release — a driver-API program that manages its contexts itself: pageable copies in the
// primary context (which pinwheel stages), the program's release of that context, copies under a
// context of its own from cuCtxCreate (pinwheel leaves those to CUDA), and the primary context
// retained and released again.  Every byte is compared, and after each release of its last
// reference the program checks that the primary context is really gone (inactive): pinwheel must
// hold no reference of its own then.
//   ctx_release [MiB=64]
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CU(call)                                                                                   \
  do {                                                                                             \
    CUresult e_ = (call);                                                                          \
    if (e_ != CUDA_SUCCESS) {                                                                      \
      const char *s_ = "?";                                                                        \
      cuGetErrorString(e_, &s_);                                                                   \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, s_);                           \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static int bad;

// Two rounds of H2D then D2H through pageable memory, in the current context; bytes compared.
static void copies(size_t bytes, int seed) {
  CUdeviceptr d;
  CU(cuMemAlloc(&d, bytes));
  for (int k = 0; k < 2; k++) {
    char *h = (char *)malloc(bytes), *back = (char *)malloc(bytes);
    for (size_t i = 0; i < bytes; i++)
      h[i] = (char)(i * 131 + 7 * k + seed);
    CU(cuMemcpyHtoD(d, h, bytes));
    memset(h, 0, bytes); // the source is the program's again once the call returned
    CU(cuMemcpyDtoH(back, d, bytes));
    for (size_t i = 0; i < bytes; i++)
      if (back[i] != (char)(i * 131 + 7 * k + seed)) {
        bad++;
        break;
      }
    free(h);
    free(back);
  }
  CU(cuMemFree(d));
}

static void release_primary(CUdevice dev, const char *when) {
  CU(cuCtxSetCurrent(NULL));
  CU(cuDevicePrimaryCtxRelease(dev));
  unsigned flags;
  int active = -1;
  CU(cuDevicePrimaryCtxGetState(dev, &flags, &active));
  printf("ctx_release: primary context after the program's release %s: %s\n", when,
         active ? "STILL ACTIVE" : "freed");
  bad += active != 0;
}

int main(int argc, char **argv) {
  size_t bytes = (size_t)(argc > 1 ? atol(argv[1]) : 64) << 20;
  CUdevice dev;
  CUcontext primary, own;
  CU(cuInit(0));
  CU(cuDeviceGet(&dev, 0));
  CU(cuDevicePrimaryCtxRetain(&primary, dev));
  CU(cuCtxSetCurrent(primary));
  copies(bytes, 1);
  release_primary(dev, "(1)");
  CU(cuCtxCreate(&own, NULL, 0, dev));
  copies(bytes, 2);
  CU(cuCtxDestroy(own));
  CU(cuDevicePrimaryCtxRetain(&primary, dev));
  CU(cuCtxSetCurrent(primary));
  copies(bytes, 3);
  release_primary(dev, "(2)");
  printf("ctx_release: 12 copies of %zu MiB, bytes %s\n", bytes >> 20, bad ? "DIFFER" : "ok");
  return bad != 0;
}
