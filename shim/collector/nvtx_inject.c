/* nvtx_inject.c — libpinwheel_nvtx.so, the NVTX injection library of a traced run.
 *
 * A module's first NVTX call (nvtx3: each module that uses NVTX, on its first call) loads the
 * library NVTX_INJECTION64_PATH names and calls its InitializeInjectionNvtx2 with the module's
 * export table.  `pinwheel run --trace` points that variable here (when nothing else has set it:
 * Nsight Systems keeps its own).  This library only forwards to libpinwheel.so, which hands the
 * table to the CUPTI its collector uses (cuptiNvtxInitialize2, the entry CUPTI documents for a
 * profiling library that loads CUPTI itself), so the program's NVTX ranges reach the collector as
 * marker records.  Without libpinwheel.so in the process, or without a trace asked for, it
 * returns 0: NVTX then makes every call a no-op, as without a tool.
 *
 * It is a library of its own, not a symbol of libpinwheel.so: nvtx3 first looks for an
 * InitializeInjectionNvtx2 anywhere in the process, so a preloaded definition would take NVTX
 * from every program under the shim, and from any tool named by NVTX_INJECTION64_PATH.
 */
#define _GNU_SOURCE
#include <dlfcn.h>

__attribute__((visibility("default"))) int InitializeInjectionNvtx2(void *export_table) {
  int (*init)(void *);
  *(void **)&init = dlsym(RTLD_DEFAULT, "pw_trace_nvtx_init");
  return init ? init(export_table) : 0;
}
