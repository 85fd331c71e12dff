/* fake_cuda_api.h — what the fake libcuda.so.1 tells the test programs about the calls it saw. */
#ifndef FAKE_CUDA_API_H
#define FAKE_CUDA_API_H
#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

typedef struct fake_drv_call {
  char name[64];
  uintptr_t dst, src;
  size_t count;
  CUstream stream;
  CUfunction func;
  unsigned grid[3], block[3], shared;
  void **params, **extra;
  const CUlaunchConfig *config;
  CUevent event;
  CUcontext ctx;
} fake_drv_call;

/* The last call a recorded entry point received (copies the engine made included). */
fake_drv_call fake_drv_last(void);
/* References held on the primary context (retains less releases). */
int fake_drv_primary_refs(void);
/* How many times the named function was called. */
long fake_drv_count(const char *name);
/* The next call of any recorded function returns err (once). */
void fake_drv_fail_next(CUresult err);
/* A context that is not the device's primary one. */
CUcontext fake_drv_new_context(void);
void fake_drv_set_capturing(CUstream s, int on);
/* Copies seen so far with pinned memory on one side, and with pageable memory on one side. */
void fake_drv_copies(long *pinned, long *pageable);
/* Whether p lies in pinned memory the fake allocated. */
int fake_drv_is_pinned(const void *p);
#endif
