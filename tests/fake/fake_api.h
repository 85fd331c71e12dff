/* fake_api.h — what the fake libcudart.so.13 tells the test programs about the calls it saw. */
#ifndef FAKE_API_H
#define FAKE_API_H
#include <cuda_runtime_api.h>
#include <stddef.h>

typedef struct fake_call {
  char name[64];
  void *dst;
  const void *src;
  size_t count;
  int kind;
  cudaStream_t stream;
  const void *func;
  dim3 grid, block;
  void **args;
  size_t shared;
  const cudaLaunchConfig_t *config;
  cudaEvent_t event;
} fake_call;

/* The last call a test-visible entry point received (copies made by the engine included). */
fake_call fake_last(void);
/* How many times the named function was called. */
long fake_count(const char *name);
/* The next call of any recorded function returns err (once). */
void fake_fail_next(cudaError_t err);
/* Make a stream report that it is being captured. */
void fake_set_capturing(cudaStream_t s, int on);
/* The stream of the last cudaStreamWaitEvent; whether an event is still pending (FAKE_LAZY_EVENTS).
 */
cudaStream_t fake_last_wait(void);
int fake_event_pending(cudaEvent_t e);
/* Whether an event recorded on s is still pending (FAKE_LAZY_EVENTS): its work not waited for. */
int fake_stream_pending(cudaStream_t s);
/* dlsym on libcuda.so.1 (when loaded) from inside the runtime, as libcudart takes its entry points.
 */
void *fake_cudart_driver_entry(const char *name);
#endif
