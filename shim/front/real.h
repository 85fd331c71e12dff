/* real.h — the table of real CUDA runtime functions, generated from hooks.def, and the runtime's
 * pw_ops backend (runtime_ops.c).  It brings the runtime's header (cuda_runtime_api.h) to the
 * runtime front end (runtime.c, runtime_ops.c) and to the top file (pinwheel.c), which makes the
 * engine with pw_real_ops; the driver's (cuda.h) comes through drv.h and CUPTI's headers through
 * trace.h.  Core, the engine and fill-ahead see none of them (their include paths hold no CUDA
 * header), so the tests run them on a simulated backend.
 */
#ifndef PW_REAL_H
#define PW_REAL_H

#include <cuda_runtime_api.h>

#include "engine.h"

#define PW_LEGACY(s) ((s) ? (s) : cudaStreamLegacy)
#define PW_PTSZ(s) ((s) ? (s) : cudaStreamPerThread)

typedef struct pw_real_table {
#define PW_HOOK(name, class, params, args, stream) cudaError_t(*name) params;
#define PW_ENQUEUE(name, how, el, proto, params, args, stream) cudaError_t(*name) params;
#define PW_REAL(name, params) cudaError_t(*name) params;
#include "hooks.def"
} pw_real_table;

extern pw_real_table pw_real;
extern const pw_ops pw_real_ops;
/* A runtime function the program called that no CUDA runtime defines: logged, and the runtime's
 * own "symbol not found" status. */
cudaError_t pw_runtime_missing(const char *name);

/* Resolve every real function (idempotent; called once from the shim's init). */
void pw_resolve_real(void);

#endif
