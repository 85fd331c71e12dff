/* fake_cudnn.c — a fake cuDNN 9 for interpose_prog: what sync elision relies on of cuDNN.  Built
 * twice, as cuDNN 9 is: libcudnn_graph.so.9 (FAKE_CUDNN_GRAPH) does the work, and libcudnn.so.9
 * (also as libcudnnx.so.9, a name the shim does not know) is a dispatcher whose every function
 * looks its twin up with dlsym on the graph library's handle and calls it.  cudnnCreate allocates
 * the handle's error storage (4 bytes of pinned memory, as cuDNN 9 does, here through the runtime);
 * fake_cudnn_kernel queues a "kernel" on the handle's stream that reports an error into it;
 * cudnnQueryRuntimeError reads it (RAWCODE as it is; NONBLOCKING once the stream answers done;
 * BLOCKING after a sync of the stream): written only once the stream's work is done, which with
 * FAKE_LAZY_EVENTS means waited for (fake_stream_pending). fake_cudnn_peek reads it as RAWCODE
 * does, for the test, past the shim. */
#include <stdlib.h>

#include "fake_api.h"

#ifndef FAKE_CUDNN_GRAPH
#include <dlfcn.h>
#include <stdio.h>

static void *twin(const char *name) {
  static void *graph;
  if (!graph) graph = dlopen(FAKE_CUDNN_GRAPH_PATH, RTLD_NOW | RTLD_LOCAL);
  void *f = graph ? dlsym(graph, name) : NULL;
  if (!f) fprintf(stderr, "fake cudnn: no %s in the graph library\n", name);
  return f;
}
#define FORWARD(ret, name, params, args)                                                           \
  ret name params {                                                                                \
    ret(*f) params = (ret(*) params)twin(#name);                                                   \
    return f ? f args : 1001;                                                                      \
  }
struct handle;
FORWARD(int, cudnnCreate, (struct handle * *h), (h))
FORWARD(int, cudnnSetStream, (struct handle * h, cudaStream_t s), (h, s))
FORWARD(int, cudnnDestroy, (struct handle * h), (h))
FORWARD(int, fake_cudnn_kernel, (struct handle * h), (h))
FORWARD(int, fake_cudnn_peek, (struct handle * h), (h))
FORWARD(int, cudnnQueryRuntimeError, (struct handle * h, int *rstatus, int mode, void *tag),
        (h, rstatus, mode, tag))
#else

enum { SUCCESS = 0, NOT_INITIALIZED = 1001, KERNEL_ERROR = 2000 };
enum { RAWCODE = 0, NONBLOCKING = 1, BLOCKING = 2 }; /* cudnnErrQueryMode_t */
typedef struct handle {
  int *storage;
  cudaStream_t stream;
  int queued; /* a kernel that writes the storage was queued */
} handle;
int fake_cudnn_kernel(handle *h);

int cudnnCreate(handle **h) {
  handle *x = calloc(1, sizeof *x);
  if (!x || cudaHostAlloc((void **)&x->storage, 4, 0) != cudaSuccess) {
    free(x);
    return NOT_INITIALIZED;
  }
  *x->storage = SUCCESS;
  *h = x;
  return SUCCESS;
}

int cudnnSetStream(handle *h, cudaStream_t s) {
  h->stream = s;
  return SUCCESS;
}

int cudnnDestroy(handle *h) {
  cudaFreeHost(h->storage);
  free(h);
  return SUCCESS;
}

/* A kernel of the handle's stream that will find an error (a launch the fake runtime sees). */
int fake_cudnn_kernel(handle *h) {
  dim3 g = {1, 1, 1};
  *h->storage = SUCCESS; /* the error this kernel finds is not reported yet */
  h->queued = 1;
  return cudaLaunchKernel((const void *)fake_cudnn_kernel, g, g, NULL, 0, h->stream) ? 1 : 0;
}

int fake_cudnn_peek(handle *h) {
  if (h->queued && !fake_stream_pending(h->stream)) *h->storage = KERNEL_ERROR;
  return *h->storage;
}

int cudnnQueryRuntimeError(handle *h, int *rstatus, int mode, void *tag) {
  (void)tag;
  if (mode == BLOCKING && cudaStreamSynchronize(h->stream) != cudaSuccess) return NOT_INITIALIZED;
  if (mode == NONBLOCKING && cudaStreamQuery(h->stream) != cudaSuccess) return SUCCESS;
  *rstatus = fake_cudnn_peek(h);
  return SUCCESS;
}
#endif
