/* drv_ops.c — the engine's pw_ops table over the real CUDA driver (the driver front end's backend).
 *
 * Owns: the translation between the engine's opaque handles / PW_* constants and the driver API,
 * and the primary context of each device the driver front end stages for.
 * Must never: call an exported wrapper of the shim (everything goes through pw_drv).
 */

/* The engine's state of a device (pinned pool, ring, side stream, events) lives in the device's
 * primary context, whichever front end set it up: the runtime's handles are the driver's
 * (cudaStream_t is a CUstream, cudaEvent_t a CUevent), so both backends use the same state.  A
 * driver copy is therefore staged only when the thread's current context and its stream's are
 * that primary context (context_ok).  The driver keeps no "last error", so clear_error and
 * error_pending have nothing to do.
 *
 * pinwheel retains a device's primary context once (primary_of), so that the context it stages in
 * cannot vanish under a copy.  When the program releases that context (cuDevicePrimaryCtxRelease),
 * the release may be the last (the context is destroyed) or not (another module holds it), so
 * pinwheel first quiesces what it runs there (the engine's deferred copy-ins queued so far and its
 * side stream; the uploads ahead made through this backend, given up and waited for) while the
 * context surely lives, then its own reference goes, so the program's last release frees the
 * context as it would without pinwheel.  If the engine's state of the device (pinned pool, ring,
 * side stream) was made in it through this backend, the device is marked gone and nothing is
 * staged there again (context_ok, and the runtime backend's); a setup under way there (on the
 * thread of a copy) ends first, in the context that still lives (the engine's quiesce waits for
 * it).  After the program's release, if the
 * context is no longer active it was destroyed: the engine and fill-ahead forget what they made
 * there without a CUDA call, so no handle of it is used again, at exit neither.  If it is still
 * active, everything stays valid, unused by the engine.  A reset (cuDevicePrimaryCtxReset)
 * destroys the context's resources whoever holds it: as at cudaDeviceReset, the engine's state
 * and the uploads ahead there (any front end's) are drained and forgotten first, pinwheel's
 * reference goes, and the next staged copy sets the device up anew.
 */
#include "drv.h"
#include "fa.h"
#include "front.h"
#include "trace.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define MISSING CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND
#define CALL(fn, ...) (pw_drv.fn ? (int)pw_drv.fn(__VA_ARGS__) : (int)MISSING)
_Static_assert(CUDA_ERROR_DEINITIALIZED == PW_OPS_ERR_UNLOADING, "the engine's teardown code");
#define MAX_DEVICES 64

static CUcontext primary[MAX_DEVICES]; /* retained once, held for the engine's state */
static pthread_mutex_t primary_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int state_made[MAX_DEVICES]; /* the engine's setup began in dev's primary context */
static atomic_int gone[MAX_DEVICES];       /* ... and the program released the context since */

/* cuDevicePageableMemoryAccess of the device with this ordinal: 1, 0, or 1 when it cannot be
 * asked (in doubt a kernel may write any host memory). */
int pw_drv_pageable_access(int ordinal) {
  CUdevice d;
  int on = 1;
  if (!pw_drv_resolve() || !pw_drv.cuDeviceGet || !pw_drv.cuDeviceGetAttribute) return 1;
  if (pw_drv.cuDeviceGet(&d, ordinal) != CUDA_SUCCESS ||
      pw_drv.cuDeviceGetAttribute(&on, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, d) !=
          CUDA_SUCCESS)
    return 1;
  return on != 0;
}

int pw_drv_state_gone(int device) {
  return device >= 0 && device < MAX_DEVICES && atomic_load(&gone[device]);
}

void pw_drv_primary_release(int dev, int reset) {
  if (dev < 0 || dev >= MAX_DEVICES) return;
  /* a reset destroys the events of the syncs elided there, a release may: they are waited for
   * while the context surely lives, whichever front end elided them (elide.h), and forgotten
   * before a reset, after a release that left the context inactive (pw_drv_primary_released) */
  pw_elide_device_wait(&pw_drv_ops, dev);
  if (reset) {
    pw_elide_device_forget(dev);
    /* the context's resources go whoever holds it: as at cudaDeviceReset, pinwheel's state there
     * (any front end's) is drained and forgotten, and set up anew by the next staged copy: the
     * uploads ahead first (fa.h), then the engine's */
    pw_fa_device_reset(dev);
    pw_engine_device_reset(pw_eng, dev);
    pthread_mutex_lock(&primary_lock);
    atomic_store(&state_made[dev], 0);
    atomic_store(&gone[dev], 0); /* an earlier release's mark: the state it meant is forgotten */
  } else {
    pthread_mutex_lock(&primary_lock);
    int held = primary[dev] != NULL, made = held && atomic_load(&state_made[dev]);
    if (made) atomic_store(&gone[dev], 1); /* no copy that comes later stages there */
    pthread_mutex_unlock(&primary_lock);
    /* The release may be the last (the context goes) or not (it lives on): nothing of pinwheel's
     * may still be running in it, and nothing it keeps may become wrong.  Without the lock: the
     * engine's copy thread may ask for the primary context. */
    if (held && !made) {
      /* a setup through this backend may be under way (it retained the context and has not
       * allocated yet): it ends first (the quiesce waits for a setup under way), then the state
       * it made, if any, is marked gone and quiesced as above */
      pw_engine_device_quiesce(pw_eng, dev);
      pthread_mutex_lock(&primary_lock);
      if ((made = atomic_load(&state_made[dev])) != 0) atomic_store(&gone[dev], 1);
      pthread_mutex_unlock(&primary_lock);
    }
    if (made) pw_engine_device_quiesce(pw_eng, dev);
    /* every release: after one that was not the last, pinwheel holds none, and the program's
     * fills may still upload there */
    pw_fa_device_quiesce(dev, &pw_drv_ops);
    pthread_mutex_lock(&primary_lock);
  }
  CUcontext c = primary[dev];
  if (c) {
    __atomic_store_n(&primary[dev], NULL, __ATOMIC_RELEASE);
    (void)CALL(cuDevicePrimaryCtxRelease_v2, dev);
  }
  pthread_mutex_unlock(&primary_lock);
}

void pw_drv_primary_released(int dev) {
  unsigned flags = 0;
  int active = 1;
  if (dev < 0 || dev >= MAX_DEVICES || CALL(cuDevicePrimaryCtxGetState, dev, &flags, &active) ||
      active)
    return; /* it lives on (another module holds it): the state stays, unused (gone) */
  pw_elide_device_forget(dev);
  pw_fa_context_released(dev, &pw_drv_ops);
  if (atomic_load(&state_made[dev])) pw_engine_device_gone(pw_eng, dev);
}

/* dev's primary context when it is active (the program uses it), else NULL.  Never creates one. */
static CUcontext primary_of(int dev) {
  if (dev < 0 || dev >= MAX_DEVICES) return NULL;
  CUcontext c = __atomic_load_n(&primary[dev], __ATOMIC_ACQUIRE);
  if (c) return c;
  unsigned flags = 0;
  int active = 0;
  if (CALL(cuDevicePrimaryCtxGetState, dev, &flags, &active) || !active) return NULL;
  pthread_mutex_lock(&primary_lock);
  if (!primary[dev] && !atomic_load(&gone[dev]) && !CALL(cuDevicePrimaryCtxRetain, &c, dev))
    __atomic_store_n(&primary[dev], c, __ATOMIC_RELEASE);
  c = primary[dev];
  pthread_mutex_unlock(&primary_lock);
  return c;
}

static int op_pointer_info(const void *p, int *kind, int *device) {
  CUpointer_attribute at[3] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                               CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                               CU_POINTER_ATTRIBUTE_IS_MANAGED};
  /* zeroed wide slots: whatever width the driver writes a flag in, non-zero means set */
  uint64_t type = 0, managed = 0;
  int ordinal = -2;
  void *data[3] = {&type, &ordinal, &managed};
  int rc = CALL(cuPointerGetAttributes, 3, at, data, (CUdeviceptr)(uintptr_t)p);
  if (rc) return rc;
  switch ((unsigned)type) {
  case 0: /* not known to CUDA: plain pageable memory */
    *kind = PW_MEM_PAGEABLE;
    ordinal = -2;
    break;
  case CU_MEMORYTYPE_HOST:
    *kind = PW_MEM_PINNED;
    break;
  case CU_MEMORYTYPE_DEVICE:
    *kind = managed ? PW_MEM_MANAGED : PW_MEM_DEVICE;
    break;
  default: /* arrays, unified: never staged */
    *kind = PW_MEM_UNKNOWN;
  }
  *device = ordinal;
  return 0;
}

static int op_stream_capturing(void *s, int *cap) {
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  int rc = CALL(cuStreamIsCapturing, (CUstream)s, &st);
  *cap = st != CU_STREAM_CAPTURE_STATUS_NONE;
  return rc;
}

static int op_get_device(int *device) {
  CUcontext c = NULL;
  int rc = CALL(cuCtxGetCurrent, &c);
  if (rc) return rc;
  if (!c) return CUDA_ERROR_INVALID_CONTEXT;
  CUdevice d = -1;
  rc = CALL(cuCtxGetDevice, &d);
  *device = (int)d;
  return rc;
}

/* The stream's device, when the stream belongs to the current context (else -1: not staged). */
static int op_stream_device(void *s, int *device) {
  CUcontext sc = NULL, cur = NULL;
  int rc = CALL(cuStreamGetCtx, (CUstream)s, &sc);
  if (!rc) rc = CALL(cuCtxGetCurrent, &cur);
  if (rc) return rc;
  if (!sc || sc != cur) return *device = -1, 0;
  CUdevice d = -1;
  rc = CALL(cuCtxGetDevice, &d); /* the current context's, which is the stream's */
  *device = (int)d;
  return rc;
}

/* After stream_device found the stream in the current context: is that context the device's
 * primary one? */
static int op_context_ok(void *s, int device) {
  (void)s;
  if (pw_drv_state_gone(device)) return 0;
  CUcontext cur = NULL, p = primary_of(device);
  return p && !CALL(cuCtxGetCurrent, &cur) && cur == p;
}

/* The engine's state is about to be made in the current context (dev's primary one). */
static void note_state(void) {
  int dev = -1;
  if (op_get_device(&dev) == 0 && dev >= 0 && dev < MAX_DEVICES) atomic_store(&state_made[dev], 1);
}

/* The upload thread's context (fill/fa.c): the device's primary one (context_ok retained it). */
static int op_set_device(int device) {
  CUcontext p = primary_of(device);
  return p ? CALL(cuCtxSetCurrent, p) : CUDA_ERROR_INVALID_CONTEXT;
}
static int op_host_alloc(void **p, size_t n) {
  note_state();
  /* mapped: deferred staging's flag in it is what the side stream waits on */
  return CALL(cuMemHostAlloc, p, n, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
}
static void op_host_free(void *p) {
  (void)CALL(cuMemFreeHost, p);
}
static int op_host_register(void *p, size_t n) {
  return CALL(cuMemHostRegister_v2, p, n,
              CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
}
static int op_host_unregister(void *p) {
  return CALL(cuMemHostUnregister, p);
}
static int op_host_device_pointer(void *p, void **dptr) {
  CUdeviceptr d = 0;
  int rc = CALL(cuMemHostGetDevicePointer_v2, &d, p, 0);
  *dptr = (void *)(uintptr_t)d;
  return rc;
}
static int op_device_sync(void) {
  return CALL(cuCtxSynchronize);
}
static int op_device_alloc(void **p, size_t n) {
  CUdeviceptr d = 0;
  int rc = CALL(cuMemAlloc_v2, &d, n);
  *p = (void *)(uintptr_t)d;
  return rc;
}
static void op_device_free(void *p) {
  (void)CALL(cuMemFree_v2, (CUdeviceptr)(uintptr_t)p);
}
static int op_stream_create(void **s) { /* only pinwheel's side stream is made here */
  int rc = CALL(cuStreamCreate, (CUstream *)s, CU_STREAM_NON_BLOCKING);
  int dev;
  if (!rc && pw_trace_active() && !op_get_device(&dev)) pw_trace_side_stream(dev, *s);
  return rc;
}
static int op_event_create(void **e) {
  return CALL(cuEventCreate, (CUevent *)e, CU_EVENT_DISABLE_TIMING);
}
static int op_event_record(void *e, void *s) {
  return CALL(cuEventRecord, (CUevent)e, (CUstream)s);
}
static int op_event_query(void *e) {
  int rc = CALL(cuEventQuery, (CUevent)e);
  return rc == CUDA_ERROR_NOT_READY ? 1 : rc;
}
static int op_event_sync(void *e) {
  return CALL(cuEventSynchronize, (CUevent)e);
}
static int op_stream_wait_event(void *s, void *e) {
  return CALL(cuStreamWaitEvent, (CUstream)s, (CUevent)e, 0);
}
static int op_copy_async(void *dst, const void *src, size_t n, int dir, void *s) {
  CUdeviceptr d = (CUdeviceptr)(uintptr_t)dst, sp = (CUdeviceptr)(uintptr_t)src;
  switch (dir) {
  case PW_DIR_H2D:
    return CALL(cuMemcpyHtoDAsync_v2, d, src, n, (CUstream)s);
  case PW_DIR_D2H:
    return CALL(cuMemcpyDtoHAsync_v2, dst, sp, n, (CUstream)s);
  case PW_DIR_D2D:
    return CALL(cuMemcpyDtoDAsync_v2, d, sp, n, (CUstream)s);
  default:
    return CUDA_ERROR_INVALID_VALUE;
  }
}
static int op_stream_sync(void *s) {
  return CALL(cuStreamSynchronize, (CUstream)s);
}
/* The ops below have no runtime counterpart (or, the bus id, need none): the runtime backend
 * (runtime_ops.c) calls these same functions, through the driver in the process (libcudart
 * loads it). */
int pw_drv_alloc_range(const void *p, void **base, size_t *size) {
  CUdeviceptr b = 0;
  int rc = pw_drv_resolve() ? CALL(cuMemGetAddressRange_v2, &b, size, (CUdeviceptr)(uintptr_t)p)
                            : (int)MISSING;
  *base = (void *)(uintptr_t)b;
  return rc;
}
int pw_drv_pci_bus_id(int device, char *buf, int len) {
  CUdevice d;
  /* asked by a device's setup (its NUMA node), under the engine's setup lock: no lookup here */
  if (!pw_drv_resolved()) return MISSING;
  int rc = CALL(cuDeviceGet, &d, device);
  return rc ? rc : CALL(cuDeviceGetPCIBusId, buf, len, d);
}
/* The side stream's context pushed above the thread's own and popped after (pw_ops.def).  A runtime
 * stream handle is the driver's CUstream. */
int pw_drv_push_context(void *s) {
  CUcontext c = NULL;
  if (!pw_drv_resolve()) return MISSING;
  int rc = CALL(cuStreamGetCtx, (CUstream)s, &c);
  return rc ? rc : CALL(cuCtxPushCurrent_v2, c);
}
void pw_drv_pop_context(void) {
  CUcontext c = NULL;
  (void)CALL(cuCtxPopCurrent_v2, &c);
}
/* flag lies in pinned memory allocated portable and mapped (host_alloc): its device address is
 * what the stream waits on.  A runtime stream handle is the driver's CUstream (the legacy and
 * per-thread defaults are the same values in both APIs). */
int pw_drv_wait_host_value(void *s, const uint32_t *flag, uint32_t value) {
  CUdeviceptr d = 0;
  if (!pw_drv_resolved()) return MISSING; /* asked by a device's setup, as the bus id is */
  int rc = CALL(cuMemHostGetDevicePointer_v2, &d, (void *)flag, 0);
  if (rc) return rc;
  return CALL(cuStreamWaitValue32_v2, (CUstream)s, d, value, CU_STREAM_WAIT_VALUE_GEQ);
}
static void op_clear_error(void) {}
static int op_error_pending(void) {
  return 0;
}
static int op_relax_capture(int restore, int mode) {
  if (restore && mode < 0) return -1;
  CUstreamCaptureMode m = restore ? (CUstreamCaptureMode)mode : CU_STREAM_CAPTURE_MODE_RELAXED;
  if (CALL(cuThreadExchangeStreamCaptureMode, &m)) return -1;
  return (int)m;
}

void pw_drv_ops_fork_child(void) {
  pthread_mutex_init(&primary_lock, NULL);
}

/* The table, one entry per member of pw_ops.def (PW_OPS_ENTRY, engine.h). */
#define PW_OP(ret, name, params) .name = PW_OPS_ENTRY(op_##name, ret, params),
const pw_ops pw_drv_ops = {
#include "pw_ops.def"
};
