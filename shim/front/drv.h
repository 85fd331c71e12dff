/* drv.h — the table of real CUDA driver functions, generated from drv_hooks.def, and the driver
 * backend of the engine.  Only drv.c, drv_ops.c and the tests' fake driver include the driver
 * header; the rest of the shim never sees it. */
#ifndef PW_DRV_H
#define PW_DRV_H

#include <cuda.h>
/* cuda.h maps this name to cuGetProcAddress_v2; both are separate exported functions. */
#undef cuGetProcAddress

#include "engine.h"

#define PW_DRV_LEGACY(s) ((s) ? (s) : CU_STREAM_LEGACY)
#define PW_DRV_PTSZ(s) ((s) ? (s) : CU_STREAM_PER_THREAD)

typedef struct pw_drv_table {
#define PW_DRV_HOOK(name, class, params, args, stream, dir, base, version, pt)                     \
  CUresult(*name) params;
#define PW_DRV_ENQUEUE(name, how, el, proto, params, args, stream, base, version, pt)              \
  CUresult(*name) params;
#define PW_DRV_REAL(name, params) CUresult(*name) params;
#include "drv_hooks.def"
} pw_drv_table;

extern pw_drv_table pw_drv;
extern const pw_ops pw_drv_ops;
/* A driver function the program called that no libcuda defines: logged, and the driver's own
 * "symbol not found" status. */
CUresult pw_drv_missing(const char *name);

/* Fill pw_drv from the libcuda in the process (idempotent, thread-safe); 1 when it is filled. */
int pw_drv_resolve(void);
/* 1 once pw_drv is filled; never looks (no dlopen): for the ops a device's setup calls, under the
 * engine's setup lock, after the copy's checks resolved it (alloc_range, or the driver front's
 * own calls). */
int pw_drv_resolved(void);
/* glibc's dlsym (never the shim's exported wrapper), or NULL: for the shim's own lookups. */
typedef void *(*pw_dlsym_fn)(void *, const char *);
pw_dlsym_fn pw_dlsym_resolve(void);
/* drv_ops.c: the engine's ops only the driver has, for both backends (0 or a CUresult). */
int pw_drv_alloc_range(const void *p, void **base, size_t *size);
int pw_drv_pci_bus_id(int device, char *buf, int len);
int pw_drv_push_context(void *stream);
void pw_drv_pop_context(void);
/* Both backends' tables (runtime_ops.c, drv_ops.c) take these ops from the driver as they are:
 * PW_OPS_ENTRY names op_<name>, and checks each one's type. */
#define op_alloc_range pw_drv_alloc_range
#define op_pci_bus_id pw_drv_pci_bus_id
#define op_push_context pw_drv_push_context
#define op_pop_context pw_drv_pop_context
#define op_wait_host_value pw_drv_wait_host_value
int pw_drv_wait_host_value(void *s, const uint32_t *flag, uint32_t value);
void pw_drv_ops_fork_child(void);
/* The program is about to release (reset 0) or reset (1) dev's primary context (drv.c's wrapper):
 * pinwheel quiesces what it runs there (a reset: drains and forgets it), then releases the
 * reference it holds, first.  pw_drv_primary_released, after the program's release: when that
 * destroyed the context, pinwheel forgets what it made there, without a CUDA call. */
void pw_drv_primary_release(int dev, int reset);
void pw_drv_primary_released(int dev);

#endif
