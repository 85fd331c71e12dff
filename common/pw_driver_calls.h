/* pw_driver_calls.h — which CUDA driver calls pinwheel's collector records.
 *
 * Owns the list: shim/collector/trace.c switches the others off, one CUPTI callback id at a time,
 * and report/passes/an_whatif.c treats the others as queries, as it does in torch.profiler's and
 * nsys's traces, so every trace of one program gives one answer.  Recorded: the calls that do work
 * or wait — launches, graph launches and their instantiation and capture, copies, memsets,
 * allocation and mapping of device and pinned memory, module and library loads and links, events,
 * stream and context waits and syncs, external semaphores, stream callbacks, creation of contexts
 * and streams, the profiler's range — except any getter (a name with "Get").  Left out: getters,
 * setters and attribute queries, which the CUDA runtime makes many times per call of its own.
 * CUPTI writes no record of a driver call made inside a runtime call, yet with the driver kind
 * enabled it worked on each: a copy-bound PyTorch loop lost about 2 % to it (docs/RESULTS.md).
 * Must never: hold state, or include a CUDA, CUPTI, shim or report header (both halves include it).
 */
#ifndef PW_DRIVER_CALLS_H
#define PW_DRIVER_CALLS_H

#include <string.h>

static inline int pw_driver_call_recorded(const char *name) {
  static const char *const kept[] = {
      "cuLaunch",
      "cuGraphLaunch",
      "cuGraphInstantiate",
      "cuGraphUpload",
      "cuStreamBeginCapture",
      "cuStreamEndCapture",
      "cuMemcpy",
      "cuMemset",
      "cuMemAlloc",
      "cuMemFree",
      "cuMemHostAlloc",
      "cuMemHostRegister",
      "cuMemHostUnregister",
      "cuMemPrefetch",
      "cuMemDiscard",
      "cuMemCreate",
      "cuMemRelease",
      "cuMemMap",
      "cuMemUnmap",
      "cuMemSetAccess",
      "cuMemAddressReserve",
      "cuMemAddressFree",
      "cuModuleLoad",
      "cuModuleUnload",
      "cuLibraryLoad",
      "cuLibraryUnload",
      "cuLink",
      "cuEvent",
      "cuCtxRecordEvent",
      "cuCtxWaitEvent",
      "cuGreenCtxRecordEvent",
      "cuGreenCtxWaitEvent",
      "cuStreamSynchronize",
      "cuStreamWaitEvent",
      "cuStreamWaitValue",
      "cuStreamWriteValue",
      "cuStreamBatchMemOp",
      "cuStreamAddCallback",
      "cuStreamCreate",
      "cuStreamDestroy",
      "cuWaitExternalSemaphoresAsync",
      "cuSignalExternalSemaphoresAsync",
      "cuCtxSynchronize",
      "cuCtxCreate",
      "cuCtxDestroy",
      "cuDevicePrimaryCtxRetain",
      "cuDevicePrimaryCtxRelease",
      "cuDevicePrimaryCtxReset",
      "cuProfiler",
  };
  if (!name || strstr(name, "Get")) return 0;
  for (size_t i = 0; i < sizeof kept / sizeof *kept; i++)
    if (!strncmp(name, kept[i], strlen(kept[i]))) return 1;
  return 0;
}

#endif
