/* cudnn_local.c — cuDNN linked by a library the program opens with RTLD_LOCAL (as Python opens
 * PyTorch's extension modules): cuDNN is in that library's scope only, not the global one the
 * shim's RTLD_NEXT searches.  As the library, `go` makes a handle (whose error storage must keep
 * no sync), a staged copy and its sync, and queries the storage; as the program (CUDNN_LOCAL_PROG),
 * main opens the library named by argv[1] locally and calls `go`.  Exit 0 when every call worked.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef CUDNN_LOCAL_PROG
int main(int argc, char **argv) {
  void *h = argc > 1 ? dlopen(argv[1], RTLD_NOW | RTLD_LOCAL) : NULL;
  int (*go)(void) = h ? (int (*)(void))dlsym(h, "go") : NULL;
  if (!go) {
    fprintf(stderr, "cudnn_local: %s\n", dlerror());
    return 2;
  }
  int r = go();
  printf("cudnn_local %s (%d)\n", r ? "FAILED" : "ok", r);
  return r != 0;
}
#else
#include <cuda_runtime_api.h>
typedef struct handle handle;
int cudnnCreate(handle **h);
int cudnnSetStream(handle *h, cudaStream_t s);
int cudnnDestroy(handle *h);
int cudnnQueryRuntimeError(handle *h, int *rstatus, int mode, void *tag);

int go(void) {
  handle *h;
  if (cudnnCreate(&h)) return 1; /* the shim found no real cudnnCreate */
  size_t n = 2 << 20;
  char *dev, *src = calloc(1, n);
  cudaStream_t s;
  if (!src || cudaMalloc((void **)&dev, n) || cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking))
    return 2;
  cudnnSetStream(h, s);
  int bad = cudaMemcpyAsync(dev, src, n, cudaMemcpyHostToDevice, s) != cudaSuccess ||
            cudaStreamSynchronize(s) != cudaSuccess;
  int st = -1;
  if (cudnnQueryRuntimeError(h, &st, 0, NULL) || st != 0) bad = 1;
  cudnnDestroy(h);
  free(src);
  return bad ? 3 : 0;
}
#endif
