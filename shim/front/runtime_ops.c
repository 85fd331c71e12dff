/* runtime_ops.c — the engine's pw_ops table over the real CUDA runtime.
 *
 * Owns: the translation between the engine's opaque handles / PW_* constants and CUDA.
 * Must never: call an exported wrapper of the shim (everything goes through pw_real).
 */
#include "front.h"
#include "drv.h" /* the driver functions the runtime has no counterpart for */
#include "real.h"
#include "trace.h"

#define MISSING cudaErrorSharedObjectSymbolNotFound
#define CALL(fn, ...) (pw_real.fn ? (int)pw_real.fn(__VA_ARGS__) : (int)MISSING)
_Static_assert(cudaErrorCudartUnloading == PW_OPS_ERR_UNLOADING, "the engine's teardown code");
static int op_pointer_info(const void *p, int *kind, int *device) {
  struct cudaPointerAttributes a;
  int rc = CALL(cudaPointerGetAttributes, &a, p);
  if (rc) return rc;
  switch (a.type) {
  case cudaMemoryTypeUnregistered:
    *kind = PW_MEM_PAGEABLE;
    break;
  case cudaMemoryTypeHost:
    *kind = PW_MEM_PINNED;
    break;
  case cudaMemoryTypeDevice:
    *kind = PW_MEM_DEVICE;
    break;
  case cudaMemoryTypeManaged:
    *kind = PW_MEM_MANAGED;
    break;
  default:
    *kind = PW_MEM_UNKNOWN;
  }
  *device = a.device;
  return 0;
}

static int op_stream_capturing(void *s, int *cap) {
  enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  int rc = CALL(cudaStreamIsCapturing, (cudaStream_t)s, &st);
  *cap = st != cudaStreamCaptureStatusNone;
  return rc;
}

static int op_stream_device(void *s, int *device) {
  return CALL(cudaStreamGetDevice, (cudaStream_t)s, device);
}
static int op_get_device(int *device) {
  return CALL(cudaGetDevice, device);
}
static int op_set_device(int device) {
  return CALL(cudaSetDevice, device);
}
static int op_host_alloc(void **p, size_t n) {
  /* mapped: deferred staging's flag in it is what the side stream waits on */
  return CALL(cudaHostAlloc, p, n, cudaHostAllocPortable | cudaHostAllocMapped);
}
static void op_host_free(void *p) {
  (void)CALL(cudaFreeHost, p);
}
static int op_host_register(void *p, size_t n) {
  return CALL(cudaHostRegister, p, n, cudaHostRegisterPortable | cudaHostRegisterMapped);
}
static int op_host_unregister(void *p) {
  return CALL(cudaHostUnregister, p);
}
static int op_host_device_pointer(void *p, void **dptr) {
  return CALL(cudaHostGetDevicePointer, dptr, p, 0);
}
static int op_device_sync(void) {
  return CALL(cudaDeviceSynchronize);
}
static int op_device_alloc(void **p, size_t n) {
  return CALL(cudaMalloc, p, n);
}
static void op_device_free(void *p) {
  (void)CALL(cudaFree, p);
}
static int op_stream_create(void **s) { /* only pinwheel's side stream is made here */
  int rc = CALL(cudaStreamCreateWithFlags, (cudaStream_t *)s, cudaStreamNonBlocking);
  int dev;
  if (!rc && pw_trace_active() && pw_real.cudaGetDevice && !pw_real.cudaGetDevice(&dev))
    pw_trace_side_stream(dev, *s);
  return rc;
}
static int op_event_create(void **e) {
  return CALL(cudaEventCreateWithFlags, (cudaEvent_t *)e, cudaEventDisableTiming);
}
static int op_event_record(void *e, void *s) {
  return CALL(cudaEventRecord, (cudaEvent_t)e, (cudaStream_t)s);
}
static int op_event_query(void *e) {
  int rc = CALL(cudaEventQuery, (cudaEvent_t)e);
  /* cudaErrorNotReady is a status, not an error: the runtime does not keep it as the last error. */
  return rc == cudaErrorNotReady ? 1 : rc;
}
static int op_event_sync(void *e) {
  return CALL(cudaEventSynchronize, (cudaEvent_t)e);
}
static int op_stream_wait_event(void *s, void *e) {
  return CALL(cudaStreamWaitEvent, (cudaStream_t)s, (cudaEvent_t)e, 0);
}
static int op_copy_async(void *dst, const void *src, size_t n, int dir, void *s) {
  static const enum cudaMemcpyKind kinds[PW_DIR_N] = {[PW_DIR_H2D] = cudaMemcpyHostToDevice,
                                                      [PW_DIR_D2H] = cudaMemcpyDeviceToHost,
                                                      [PW_DIR_D2D] = cudaMemcpyDeviceToDevice,
                                                      [PW_DIR_H2H] = cudaMemcpyHostToHost};
  return CALL(cudaMemcpyAsync, dst, src, n, kinds[dir], (cudaStream_t)s);
}
static int op_stream_sync(void *s) {
  return CALL(cudaStreamSynchronize, (cudaStream_t)s);
}
static void op_clear_error(void) {
  (void)CALL(cudaGetLastError);
}
static int op_error_pending(void) {
  return CALL(cudaPeekAtLastError) != cudaSuccess;
}
/* Our calls must not break a capture another thread runs in global mode; returns the mode to
 * restore, or -1 when nothing was changed. */
static int op_relax_capture(int restore, int mode) {
  if (restore && mode < 0) return -1;
  enum cudaStreamCaptureMode m =
      restore ? (enum cudaStreamCaptureMode)mode : cudaStreamCaptureModeRelaxed;
  if (CALL(cudaThreadExchangeStreamCaptureMode, &m)) {
    op_clear_error();
    return -1;
  }
  return (int)m;
}

/* The runtime's copies share the engine's state of a device with the driver's: once that state
 * went with a primary context the program released (drv_ops.c), neither stages there again. */
static int op_context_ok(void *s, int device) {
  (void)s;
  return !pw_drv_state_gone(device);
}

/* alloc_range, pci_bus_id, wait_host_value, push_context, pop_context: drv_ops.c's, through the
 * driver in the process (drv.h names them): the runtime has no counterpart, or, the bus id, needs
 * none. */

/* The table, one entry per member of pw_ops.def (PW_OPS_ENTRY, engine.h). */
#define PW_OP(ret, name, params) .name = PW_OPS_ENTRY(op_##name, ret, params),
const pw_ops pw_real_ops = {
#include "pw_ops.def"
};
