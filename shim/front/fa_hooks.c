/* fa_hooks.c — the other entry points that enqueue work: memsets, 2D/3D/symbol/array/peer copies
 * (from and to), cooperative launches, host functions, graphs, stream value and external semaphore
 * operations, graphics unmaps, the stream-ordered allocator, for uploads made ahead (fa.h) and sync
 * elision (engine/elide.h).
 * Owns: their wrappers, generated from one list (PW_FA_HOOKS), and pw_fa_drv_entries, which drv.c
 * offers for what cuGetProcAddress and dlsym hand out.
 * Must never: change a real call's arguments or status, print or allocate on the way to the real
 * call, call an exported wrapper of the shim.
 * How it works: the comment below.
 */

/* They matter to uploads made ahead of the program's copies (PINWHEEL_FILL_AHEAD, fa.h;
 * docs/DESIGN.md §11): calls that can write the program's pinned memory, or order a write of it
 * after a fill from the GPU's side, out of the sight of every other hook; and to sync elision
 * (engine/elide.h): work on another stream than an elided sync's waits for it first, and host
 * functions, graphs and external semaphore signals make their stream's next sync real.  With both
 * off each wrapper is one or two relaxed loads (REVOKE) or one test of the option (TAINT) in front
 * of the real call.  TAINT  host functions and stream callbacks, stream waits on a value, external
 *           semaphore waits and signals, graph launches, IPC events: the program (or another API
 *           it signals) can order a write of its buffer after a fill from the GPU's side;
 *           pw_fa_taint gives every upload up, for good.
 * REVOKE    memsets, 2D/3D/peer/device-to-device copies and copies from arrays and symbols,
 *           cooperative launches, stream value writes: they may write the buffer (a destination
 *           in it, or through its device mapping) but order nothing after a fill; every live
 *           upload is given up (PW_FA_OTHER_WRITE), as a launch gives them up through the hooked
 *           launch entry points (front.h).
 * NOTHING   the stream-ordered allocator, copies into arrays and symbols, graphics unmaps: they
 *           write only device memory; listed for sync elision.
 * Each wrapper then makes the real call with the program's arguments and returns its status; the
 * real function is looked up once (the runtime's as runtime.c finds them, the driver's from the
 * libcuda drv.c resolved) and kept in a relaxed atomic pointer (two threads may both look it up:
 * they store the same address).  No real function: the library's own "symbol not found".
 *
 * The names are the symbols libcudart.so.13 and libcuda.so.1 export (an ABI each: _v2, _ptds and
 * _ptsz are separate functions), with the CUDA 13 headers' prototypes; every one has the same
 * prototype as the same symbol of CUDA 12's libraries.  The cuda.h names that are macros
 * (cuStreamWaitValue32 is cuStreamWaitValue32_v2 ...) are #undef'd: their unsuffixed symbols are
 * the CUDA 11 ABI of the same prototype, wrapped too.  Not wrapped: the 32-bit-pointer driver
 * functions of CUDA < 3.2 (cuMemsetD8, cuMemcpy2D ... without _v2), and the batched copies
 * (cudaMemcpyBatchAsync, cudaMemcpy3DBatchAsync, cuMemcpyBatchAsync, cuMemcpy3DBatchAsync*), whose
 * unsuffixed prototypes differ between CUDA 12.8 and 13 (a wrapper of one would break the other).
 * What cuGetProcAddress, cudaGetDriverEntryPoint or a dlsym of libcuda hand out for the driver's
 * names leads here too: drv.c recognises them from pw_fa_drv_entries, as it does drv_hooks.def's.
 */
#define _GNU_SOURCE
#include "real.h"
#include "drv.h"
#include "front.h"

/* cuda.h's aliases of the names listed below (without per-thread default streams they name the
 * _v2 function, or the name itself). */
#undef cuStreamWaitValue32
#undef cuStreamWaitValue64
#undef cuStreamWriteValue32
#undef cuStreamWriteValue64
#undef cuStreamBatchMemOp
#undef cudaWaitExternalSemaphoresAsync
#undef cudaSignalExternalSemaphoresAsync

/* The prototypes, once each: P_<base> is (params), (args) of the CUDA 13 header's declaration of
 * base, which the per-thread and older variants share. */
#define P_cudaLaunchHostFunc                                                                       \
  (cudaStream_t stream, cudaHostFn_t fn, void *userData), (stream, fn, userData)
#define P_cudaStreamAddCallback                                                                    \
  (cudaStream_t stream, cudaStreamCallback_t callback, void *userData, unsigned int flags),        \
      (stream, callback, userData, flags)
#define P_cudaGraphLaunch (cudaGraphExec_t graphExec, cudaStream_t stream), (graphExec, stream)
#define P_cudaWaitExternalSemaphoresAsync                                                          \
  (const cudaExternalSemaphore_t *extSemArray,                                                     \
   const struct cudaExternalSemaphoreWaitParams *paramsArray, unsigned int numExtSems,             \
   cudaStream_t stream),                                                                           \
      (extSemArray, paramsArray, numExtSems, stream)
#define P_cudaIpcOpenEventHandle (cudaEvent_t * event, cudaIpcEventHandle_t handle), (event, handle)
#define P_cudaMemset (void *devPtr, int value, size_t count), (devPtr, value, count)
#define P_cudaMemsetAsync                                                                          \
  (void *devPtr, int value, size_t count, cudaStream_t stream), (devPtr, value, count, stream)
#define P_cudaMemset2D                                                                             \
  (void *devPtr, size_t pitch, int value, size_t width, size_t height),                            \
      (devPtr, pitch, value, width, height)
#define P_cudaMemset2DAsync                                                                        \
  (void *devPtr, size_t pitch, int value, size_t width, size_t height, cudaStream_t stream),       \
      (devPtr, pitch, value, width, height, stream)
#define P_cudaMemset3D                                                                             \
  (struct cudaPitchedPtr pitchedDevPtr, int value, struct cudaExtent extent),                      \
      (pitchedDevPtr, value, extent)
#define P_cudaMemset3DAsync                                                                        \
  (struct cudaPitchedPtr pitchedDevPtr, int value, struct cudaExtent extent, cudaStream_t stream), \
      (pitchedDevPtr, value, extent, stream)
#define P_cudaMemcpy2D                                                                             \
  (void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,          \
   enum cudaMemcpyKind kind),                                                                      \
      (dst, dpitch, src, spitch, width, height, kind)
#define P_cudaMemcpy2DAsync                                                                        \
  (void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,          \
   enum cudaMemcpyKind kind, cudaStream_t stream),                                                 \
      (dst, dpitch, src, spitch, width, height, kind, stream)
#define P_cudaMemcpy3D (const struct cudaMemcpy3DParms *p), (p)
#define P_cudaMemcpy3DAsync (const struct cudaMemcpy3DParms *p, cudaStream_t stream), (p, stream)
#define P_cudaMemcpy2DFromArray                                                                    \
  (void *dst, size_t dpitch, cudaArray_const_t src, size_t wOffset, size_t hOffset, size_t width,  \
   size_t height, enum cudaMemcpyKind kind),                                                       \
      (dst, dpitch, src, wOffset, hOffset, width, height, kind)
#define P_cudaMemcpy2DFromArrayAsync                                                               \
  (void *dst, size_t dpitch, cudaArray_const_t src, size_t wOffset, size_t hOffset, size_t width,  \
   size_t height, enum cudaMemcpyKind kind, cudaStream_t stream),                                  \
      (dst, dpitch, src, wOffset, hOffset, width, height, kind, stream)
#define P_cudaMemcpyFromSymbol                                                                     \
  (void *dst, const void *symbol, size_t count, size_t offset, enum cudaMemcpyKind kind),          \
      (dst, symbol, count, offset, kind)
#define P_cudaMemcpyFromSymbolAsync                                                                \
  (void *dst, const void *symbol, size_t count, size_t offset, enum cudaMemcpyKind kind,           \
   cudaStream_t stream),                                                                           \
      (dst, symbol, count, offset, kind, stream)
#define P_cudaMallocAsync                                                                          \
  (void **devPtr, size_t size, cudaStream_t hStream), (devPtr, size, hStream)
#define P_cudaFreeAsync (void *devPtr, cudaStream_t hStream), (devPtr, hStream)
#define P_cudaMallocFromPoolAsync                                                                  \
  (void **ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream),                           \
      (ptr, size, memPool, stream)
#define P_cuMemAllocAsync                                                                          \
  (CUdeviceptr * dptr, size_t bytesize, CUstream hStream), (dptr, bytesize, hStream)
#define P_cuMemFreeAsync (CUdeviceptr dptr, CUstream hStream), (dptr, hStream)
#define P_cuMemAllocFromPoolAsync                                                                  \
  (CUdeviceptr * dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream),                      \
      (dptr, bytesize, pool, hStream)
#define P_cudaLaunchCooperativeKernel                                                              \
  (const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,                   \
   cudaStream_t stream),                                                                           \
      (func, gridDim, blockDim, args, sharedMem, stream)
#define P_cuLaunchHostFunc (CUstream hStream, CUhostFn fn, void *userData), (hStream, fn, userData)
#define P_cuStreamAddCallback                                                                      \
  (CUstream hStream, CUstreamCallback callback, void *userData, unsigned int flags),               \
      (hStream, callback, userData, flags)
#define P_cuStreamWaitValue32_v2                                                                   \
  (CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags),                       \
      (stream, addr, value, flags)
#define P_cuStreamWaitValue64_v2                                                                   \
  (CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags),                       \
      (stream, addr, value, flags)
#define P_cuStreamBatchMemOp_v2                                                                    \
  (CUstream stream, unsigned int count, CUstreamBatchMemOpParams *paramArray, unsigned int flags), \
      (stream, count, paramArray, flags)
#define P_cuGraphLaunch (CUgraphExec hGraphExec, CUstream hStream), (hGraphExec, hStream)
#define P_cuWaitExternalSemaphoresAsync                                                            \
  (const CUexternalSemaphore *extSemArray, const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS *paramsArray, \
   unsigned int numExtSems, CUstream stream),                                                      \
      (extSemArray, paramsArray, numExtSems, stream)
#define P_cuIpcOpenEventHandle (CUevent * phEvent, CUipcEventHandle handle), (phEvent, handle)
#define P_cuMemsetD8_v2 (CUdeviceptr dstDevice, unsigned char uc, size_t N), (dstDevice, uc, N)
#define P_cuMemsetD16_v2 (CUdeviceptr dstDevice, unsigned short us, size_t N), (dstDevice, us, N)
#define P_cuMemsetD32_v2 (CUdeviceptr dstDevice, unsigned int ui, size_t N), (dstDevice, ui, N)
#define P_cuMemsetD8Async                                                                          \
  (CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream), (dstDevice, uc, N, hStream)
#define P_cuMemsetD16Async                                                                         \
  (CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream),                          \
      (dstDevice, us, N, hStream)
#define P_cuMemsetD32Async                                                                         \
  (CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream), (dstDevice, ui, N, hStream)
#define P_cuMemsetD2D8_v2                                                                          \
  (CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width, size_t Height),         \
      (dstDevice, dstPitch, uc, Width, Height)
#define P_cuMemsetD2D16_v2                                                                         \
  (CUdeviceptr dstDevice, size_t dstPitch, unsigned short us, size_t Width, size_t Height),        \
      (dstDevice, dstPitch, us, Width, Height)
#define P_cuMemsetD2D32_v2                                                                         \
  (CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui, size_t Width, size_t Height),          \
      (dstDevice, dstPitch, ui, Width, Height)
#define P_cuMemsetD2D8Async                                                                        \
  (CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width, size_t Height,          \
   CUstream hStream),                                                                              \
      (dstDevice, dstPitch, uc, Width, Height, hStream)
#define P_cuMemsetD2D16Async                                                                       \
  (CUdeviceptr dstDevice, size_t dstPitch, unsigned short us, size_t Width, size_t Height,         \
   CUstream hStream),                                                                              \
      (dstDevice, dstPitch, us, Width, Height, hStream)
#define P_cuMemsetD2D32Async                                                                       \
  (CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui, size_t Width, size_t Height,           \
   CUstream hStream),                                                                              \
      (dstDevice, dstPitch, ui, Width, Height, hStream)
#define P_cuMemcpy2D_v2 (const CUDA_MEMCPY2D *pCopy), (pCopy)
#define P_cuMemcpy2DUnaligned_v2 (const CUDA_MEMCPY2D *pCopy), (pCopy)
#define P_cuMemcpy2DAsync_v2 (const CUDA_MEMCPY2D *pCopy, CUstream hStream), (pCopy, hStream)
#define P_cuMemcpy3D_v2 (const CUDA_MEMCPY3D *pCopy), (pCopy)
#define P_cuMemcpy3DAsync_v2 (const CUDA_MEMCPY3D *pCopy, CUstream hStream), (pCopy, hStream)
#define P_cuMemcpyDtoD_v2                                                                          \
  (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount),                                \
      (dstDevice, srcDevice, ByteCount)
#define P_cuMemcpyDtoDAsync_v2                                                                     \
  (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream),              \
      (dstDevice, srcDevice, ByteCount, hStream)
#define P_cuMemcpyAtoD_v2                                                                          \
  (CUdeviceptr dstDevice, CUarray srcArray, size_t srcOffset, size_t ByteCount),                   \
      (dstDevice, srcArray, srcOffset, ByteCount)
#define P_cuMemcpyPeer                                                                             \
  (CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext,       \
   size_t ByteCount),                                                                              \
      (dstDevice, dstContext, srcDevice, srcContext, ByteCount)
#define P_cuMemcpyPeerAsync                                                                        \
  (CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext,       \
   size_t ByteCount, CUstream hStream),                                                            \
      (dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream)
#define P_cuMemcpy3DPeer (const CUDA_MEMCPY3D_PEER *pCopy), (pCopy)
#define P_cuMemcpy3DPeerAsync (const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream), (pCopy, hStream)
#define P_cudaMemcpyPeer                                                                           \
  (void *dst, int dstDevice, const void *src, int srcDevice, size_t count),                        \
      (dst, dstDevice, src, srcDevice, count)
#define P_cudaMemcpyPeerAsync                                                                      \
  (void *dst, int dstDevice, const void *src, int srcDevice, size_t count, cudaStream_t stream),   \
      (dst, dstDevice, src, srcDevice, count, stream)
#define P_cudaMemcpy3DPeer (const struct cudaMemcpy3DPeerParms *p), (p)
#define P_cudaMemcpy3DPeerAsync                                                                    \
  (const struct cudaMemcpy3DPeerParms *p, cudaStream_t stream), (p, stream)
#define P_cudaMemcpyFromArray                                                                      \
  (void *dst, cudaArray_const_t src, size_t wOffset, size_t hOffset, size_t count,                 \
   enum cudaMemcpyKind kind),                                                                      \
      (dst, src, wOffset, hOffset, count, kind)
#define P_cudaMemcpyFromArrayAsync                                                                 \
  (void *dst, cudaArray_const_t src, size_t wOffset, size_t hOffset, size_t count,                 \
   enum cudaMemcpyKind kind, cudaStream_t stream),                                                 \
      (dst, src, wOffset, hOffset, count, kind, stream)
#define P_cuMemcpyAtoH_v2                                                                          \
  (void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount),                           \
      (dstHost, srcArray, srcOffset, ByteCount)
#define P_cuMemcpyAtoHAsync_v2                                                                     \
  (void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount, CUstream hStream),         \
      (dstHost, srcArray, srcOffset, ByteCount, hStream)
#define P_cuLaunchCooperativeKernel                                                                \
  (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,              \
   unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,                         \
   unsigned int sharedMemBytes, CUstream hStream, void **kernelParams),                            \
      (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream,  \
       kernelParams)
#define P_cuStreamWriteValue32_v2                                                                  \
  (CUstream stream, CUdeviceptr addr, cuuint32_t value, unsigned int flags),                       \
      (stream, addr, value, flags)
#define P_cuStreamWriteValue64_v2                                                                  \
  (CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags),                       \
      (stream, addr, value, flags)
#define P_cudaMemcpyToSymbol                                                                       \
  (const void *symbol, const void *src, size_t count, size_t offset, enum cudaMemcpyKind kind),    \
      (symbol, src, count, offset, kind)
#define P_cudaMemcpyToSymbolAsync                                                                  \
  (const void *symbol, const void *src, size_t count, size_t offset, enum cudaMemcpyKind kind,     \
   cudaStream_t stream),                                                                           \
      (symbol, src, count, offset, kind, stream)
#define P_cudaMemcpy2DToArray                                                                      \
  (cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src, size_t spitch, size_t width,  \
   size_t height, enum cudaMemcpyKind kind),                                                       \
      (dst, wOffset, hOffset, src, spitch, width, height, kind)
#define P_cudaMemcpy2DToArrayAsync                                                                 \
  (cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src, size_t spitch, size_t width,  \
   size_t height, enum cudaMemcpyKind kind, cudaStream_t stream),                                  \
      (dst, wOffset, hOffset, src, spitch, width, height, kind, stream)
#define P_cudaMemcpyToArray                                                                        \
  (cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src, size_t count,                 \
   enum cudaMemcpyKind kind),                                                                      \
      (dst, wOffset, hOffset, src, count, kind)
#define P_cudaMemcpyToArrayAsync                                                                   \
  (cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src, size_t count,                 \
   enum cudaMemcpyKind kind, cudaStream_t stream),                                                 \
      (dst, wOffset, hOffset, src, count, kind, stream)
#define P_cudaMemcpyArrayToArray                                                                   \
  (cudaArray_t dst, size_t wOffsetDst, size_t hOffsetDst, cudaArray_const_t src,                   \
   size_t wOffsetSrc, size_t hOffsetSrc, size_t count, enum cudaMemcpyKind kind),                  \
      (dst, wOffsetDst, hOffsetDst, src, wOffsetSrc, hOffsetSrc, count, kind)
#define P_cudaMemcpy2DArrayToArray                                                                 \
  (cudaArray_t dst, size_t wOffsetDst, size_t hOffsetDst, cudaArray_const_t src,                   \
   size_t wOffsetSrc, size_t hOffsetSrc, size_t width, size_t height, enum cudaMemcpyKind kind),   \
      (dst, wOffsetDst, hOffsetDst, src, wOffsetSrc, hOffsetSrc, width, height, kind)
#define P_cudaSignalExternalSemaphoresAsync                                                        \
  (const cudaExternalSemaphore_t *extSemArray,                                                     \
   const struct cudaExternalSemaphoreSignalParams *paramsArray, unsigned int numExtSems,           \
   cudaStream_t stream),                                                                           \
      (extSemArray, paramsArray, numExtSems, stream)
#define P_cudaGraphicsUnmapResources                                                               \
  (int count, cudaGraphicsResource_t *resources, cudaStream_t stream), (count, resources, stream)
#define P_cuMemcpyHtoA_v2                                                                          \
  (CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount),                     \
      (dstArray, dstOffset, srcHost, ByteCount)
#define P_cuMemcpyHtoAAsync_v2                                                                     \
  (CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount, CUstream hStream),   \
      (dstArray, dstOffset, srcHost, ByteCount, hStream)
#define P_cuMemcpyDtoA_v2                                                                          \
  (CUarray dstArray, size_t dstOffset, CUdeviceptr srcDevice, size_t ByteCount),                   \
      (dstArray, dstOffset, srcDevice, ByteCount)
#define P_cuMemcpyAtoA_v2                                                                          \
  (CUarray dstArray, size_t dstOffset, CUarray srcArray, size_t srcOffset, size_t ByteCount),      \
      (dstArray, dstOffset, srcArray, srcOffset, ByteCount)
#define P_cuSignalExternalSemaphoresAsync                                                          \
  (const CUexternalSemaphore *extSemArray,                                                         \
   const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS *paramsArray, unsigned int numExtSems,              \
   CUstream stream),                                                                               \
      (extSemArray, paramsArray, numExtSems, stream)
#define P_cuGraphicsUnmapResources                                                                 \
  (unsigned int count, CUgraphicsResource *resources, CUstream hStream), (count, resources, hStream)

/* The one list.  RT(how, name, base, el, stream): a runtime function; DRV(how, name, base, el,
 * stream, gbase, version, pt): a driver one, which a program may also take from cuGetProcAddress
 * as (gbase, version, per-thread pt), its ABI's name, version and flag there (drv.c offers the
 * wrapper for what that hands out, as for drv_hooks.def's).  how
 * is TAINT, REVOKE or NOTHING; base names the prototype (P_base), the name the CUDA 13 header
 * declares with it (the per-thread and older variants are checked against it); el is what sync
 * elision does (engine/elide.h): FENCE the stream waits for elided syncs of other streams first,
 * HOSTW that and the stream's next sync is real (its work can write host memory, or be seen from
 * the host outside CUDA), NONE nothing; stream is the stream the call enqueues on, normalised as
 * in hooks.def (the synchronous calls': a default stream).
 * Copies to or from host memory are FENCE, not HOSTW, in both directions: from pageable memory
 * CUDA reads the source before the call returns, into pageable memory the call returns once the
 * bytes arrived (the host waits, elided work included), and pinned memory, the only memory such a
 * copy writes after its return, keeps every sync real while the program holds it
 * (PW_KEEP_MAPPED).  An external semaphore's signal is HOSTW: the GPU's order is elision's to
 * keep, and it does (another API's GPU-side wait sees the signal when the GPU reaches it, after
 * the elided work), but that API also answers the host (a timeline semaphore's value, a fence's
 * completed value, a wait with timeout 0) out of pinwheel's sight, and after the program's sync
 * of the stream it must answer "signalled", so that sync stays real. */
#define PW_FA_HOOKS(RT, DRV)                                                                       \
  /* ---- the runtime: TAINT ---- */                                                               \
  RT(TAINT, cudaLaunchHostFunc, cudaLaunchHostFunc, HOSTW, PW_LEGACY(stream))                      \
  RT(TAINT, cudaLaunchHostFunc_ptsz, cudaLaunchHostFunc, HOSTW, PW_PTSZ(stream))                   \
  RT(TAINT, cudaStreamAddCallback, cudaStreamAddCallback, HOSTW, PW_LEGACY(stream))                \
  RT(TAINT, cudaStreamAddCallback_ptsz, cudaStreamAddCallback, HOSTW, PW_PTSZ(stream))             \
  RT(TAINT, cudaGraphLaunch, cudaGraphLaunch, HOSTW, PW_LEGACY(stream))                            \
  RT(TAINT, cudaGraphLaunch_ptsz, cudaGraphLaunch, HOSTW, PW_PTSZ(stream))                         \
  RT(TAINT, cudaWaitExternalSemaphoresAsync, cudaWaitExternalSemaphoresAsync, FENCE,               \
     PW_LEGACY(stream))                                                                            \
  RT(TAINT, cudaWaitExternalSemaphoresAsync_ptsz, cudaWaitExternalSemaphoresAsync, FENCE,          \
     PW_PTSZ(stream))                                                                              \
  /* CUDA 12's names of the same function (libcudart.so.12): a program built with CUDA 12 */       \
  RT(TAINT, cudaWaitExternalSemaphoresAsync_v2, cudaWaitExternalSemaphoresAsync, FENCE,            \
     PW_LEGACY(stream))                                                                            \
  RT(TAINT, cudaWaitExternalSemaphoresAsync_v2_ptsz, cudaWaitExternalSemaphoresAsync, FENCE,       \
     PW_PTSZ(stream))                                                                              \
  /* a signal another API (Vulkan, D3D12, NvSciSync) waits for: it may then write the program's    \
   * pinned memory out of pinwheel's sight (TAINT), and it answers host questions pinwheel never   \
   * sees (a timeline semaphore's value, a fence's completed value): HOSTW (see above) */          \
  RT(TAINT, cudaSignalExternalSemaphoresAsync, cudaSignalExternalSemaphoresAsync, HOSTW,           \
     PW_LEGACY(stream))                                                                            \
  RT(TAINT, cudaSignalExternalSemaphoresAsync_ptsz, cudaSignalExternalSemaphoresAsync, HOSTW,      \
     PW_PTSZ(stream))                                                                              \
  RT(TAINT, cudaSignalExternalSemaphoresAsync_v2, cudaSignalExternalSemaphoresAsync, HOSTW,        \
     PW_LEGACY(stream))                                                                            \
  RT(TAINT, cudaSignalExternalSemaphoresAsync_v2_ptsz, cudaSignalExternalSemaphoresAsync, HOSTW,   \
     PW_PTSZ(stream))                                                                              \
  RT(TAINT, cudaIpcOpenEventHandle, cudaIpcOpenEventHandle, NONE, NULL)                            \
  /* ---- the runtime: REVOKE ---- */                                                              \
  RT(REVOKE, cudaMemset, cudaMemset, FENCE, cudaStreamLegacy)                                      \
  RT(REVOKE, cudaMemset_ptds, cudaMemset, FENCE, cudaStreamPerThread)                              \
  RT(REVOKE, cudaMemsetAsync, cudaMemsetAsync, FENCE, PW_LEGACY(stream))                           \
  RT(REVOKE, cudaMemsetAsync_ptsz, cudaMemsetAsync, FENCE, PW_PTSZ(stream))                        \
  RT(REVOKE, cudaMemset2D, cudaMemset2D, FENCE, cudaStreamLegacy)                                  \
  RT(REVOKE, cudaMemset2D_ptds, cudaMemset2D, FENCE, cudaStreamPerThread)                          \
  RT(REVOKE, cudaMemset2DAsync, cudaMemset2DAsync, FENCE, PW_LEGACY(stream))                       \
  RT(REVOKE, cudaMemset2DAsync_ptsz, cudaMemset2DAsync, FENCE, PW_PTSZ(stream))                    \
  RT(REVOKE, cudaMemset3D, cudaMemset3D, FENCE, cudaStreamLegacy)                                  \
  RT(REVOKE, cudaMemset3D_ptds, cudaMemset3D, FENCE, cudaStreamPerThread)                          \
  RT(REVOKE, cudaMemset3DAsync, cudaMemset3DAsync, FENCE, PW_LEGACY(stream))                       \
  RT(REVOKE, cudaMemset3DAsync_ptsz, cudaMemset3DAsync, FENCE, PW_PTSZ(stream))                    \
  RT(REVOKE, cudaMemcpy2D, cudaMemcpy2D, FENCE, cudaStreamLegacy)                                  \
  RT(REVOKE, cudaMemcpy2D_ptds, cudaMemcpy2D, FENCE, cudaStreamPerThread)                          \
  RT(REVOKE, cudaMemcpy2DAsync, cudaMemcpy2DAsync, FENCE, PW_LEGACY(stream))                       \
  RT(REVOKE, cudaMemcpy2DAsync_ptsz, cudaMemcpy2DAsync, FENCE, PW_PTSZ(stream))                    \
  RT(REVOKE, cudaMemcpy3D, cudaMemcpy3D, FENCE, cudaStreamLegacy)                                  \
  RT(REVOKE, cudaMemcpy3D_ptds, cudaMemcpy3D, FENCE, cudaStreamPerThread)                          \
  RT(REVOKE, cudaMemcpy3DAsync, cudaMemcpy3DAsync, FENCE, PW_LEGACY(stream))                       \
  RT(REVOKE, cudaMemcpy3DAsync_ptsz, cudaMemcpy3DAsync, FENCE, PW_PTSZ(stream))                    \
  RT(REVOKE, cudaMemcpy2DFromArray, cudaMemcpy2DFromArray, FENCE, cudaStreamLegacy)                \
  RT(REVOKE, cudaMemcpy2DFromArray_ptds, cudaMemcpy2DFromArray, FENCE, cudaStreamPerThread)        \
  RT(REVOKE, cudaMemcpy2DFromArrayAsync, cudaMemcpy2DFromArrayAsync, FENCE, PW_LEGACY(stream))     \
  RT(REVOKE, cudaMemcpy2DFromArrayAsync_ptsz, cudaMemcpy2DFromArrayAsync, FENCE, PW_PTSZ(stream))  \
  RT(REVOKE, cudaMemcpyFromSymbol, cudaMemcpyFromSymbol, FENCE, cudaStreamLegacy)                  \
  RT(REVOKE, cudaMemcpyFromSymbol_ptds, cudaMemcpyFromSymbol, FENCE, cudaStreamPerThread)          \
  RT(REVOKE, cudaMemcpyFromSymbolAsync, cudaMemcpyFromSymbolAsync, FENCE, PW_LEGACY(stream))       \
  RT(REVOKE, cudaMemcpyFromSymbolAsync_ptsz, cudaMemcpyFromSymbolAsync, FENCE, PW_PTSZ(stream))    \
  RT(REVOKE, cudaMemcpyPeer, cudaMemcpyPeer, FENCE, cudaStreamLegacy)                              \
  RT(REVOKE, cudaMemcpyPeerAsync, cudaMemcpyPeerAsync, FENCE, PW_LEGACY(stream))                   \
  RT(REVOKE, cudaMemcpy3DPeer, cudaMemcpy3DPeer, FENCE, cudaStreamLegacy)                          \
  RT(REVOKE, cudaMemcpy3DPeer_ptds, cudaMemcpy3DPeer, FENCE, cudaStreamPerThread)                  \
  RT(REVOKE, cudaMemcpy3DPeerAsync, cudaMemcpy3DPeerAsync, FENCE, PW_LEGACY(stream))               \
  RT(REVOKE, cudaMemcpy3DPeerAsync_ptsz, cudaMemcpy3DPeerAsync, FENCE, PW_PTSZ(stream))            \
  RT(REVOKE, cudaMemcpyFromArray, cudaMemcpyFromArray, FENCE, cudaStreamLegacy)                    \
  RT(REVOKE, cudaMemcpyFromArray_ptds, cudaMemcpyFromArray, FENCE, cudaStreamPerThread)            \
  RT(REVOKE, cudaMemcpyFromArrayAsync, cudaMemcpyFromArrayAsync, FENCE, PW_LEGACY(stream))         \
  RT(REVOKE, cudaMemcpyFromArrayAsync_ptsz, cudaMemcpyFromArrayAsync, FENCE, PW_PTSZ(stream))      \
  RT(REVOKE, cudaLaunchCooperativeKernel, cudaLaunchCooperativeKernel, FENCE, PW_LEGACY(stream))   \
  RT(REVOKE, cudaLaunchCooperativeKernel_ptsz, cudaLaunchCooperativeKernel, FENCE,                 \
     PW_PTSZ(stream))                                                                              \
  /* ---- the runtime: the stream-ordered allocator (sync elision fences it; fill-ahead, no) ----  \
   */                                                                                              \
  RT(NOTHING, cudaMallocAsync, cudaMallocAsync, FENCE, PW_LEGACY(hStream))                         \
  RT(NOTHING, cudaMallocAsync_ptsz, cudaMallocAsync, FENCE, PW_PTSZ(hStream))                      \
  RT(NOTHING, cudaFreeAsync, cudaFreeAsync, FENCE, PW_LEGACY(hStream))                             \
  RT(NOTHING, cudaFreeAsync_ptsz, cudaFreeAsync, FENCE, PW_PTSZ(hStream))                          \
  RT(NOTHING, cudaMallocFromPoolAsync, cudaMallocFromPoolAsync, FENCE, PW_LEGACY(stream))          \
  RT(NOTHING, cudaMallocFromPoolAsync_ptsz, cudaMallocFromPoolAsync, FENCE, PW_PTSZ(stream))       \
  /* ---- the runtime: copies into arrays and symbols (device memory: fill-ahead, nothing) ---- */ \
  RT(NOTHING, cudaMemcpyToSymbol, cudaMemcpyToSymbol, FENCE, cudaStreamLegacy)                     \
  RT(NOTHING, cudaMemcpyToSymbol_ptds, cudaMemcpyToSymbol, FENCE, cudaStreamPerThread)             \
  RT(NOTHING, cudaMemcpyToSymbolAsync, cudaMemcpyToSymbolAsync, FENCE, PW_LEGACY(stream))          \
  RT(NOTHING, cudaMemcpyToSymbolAsync_ptsz, cudaMemcpyToSymbolAsync, FENCE, PW_PTSZ(stream))       \
  RT(NOTHING, cudaMemcpy2DToArray, cudaMemcpy2DToArray, FENCE, cudaStreamLegacy)                   \
  RT(NOTHING, cudaMemcpy2DToArray_ptds, cudaMemcpy2DToArray, FENCE, cudaStreamPerThread)           \
  RT(NOTHING, cudaMemcpy2DToArrayAsync, cudaMemcpy2DToArrayAsync, FENCE, PW_LEGACY(stream))        \
  RT(NOTHING, cudaMemcpy2DToArrayAsync_ptsz, cudaMemcpy2DToArrayAsync, FENCE, PW_PTSZ(stream))     \
  RT(NOTHING, cudaMemcpyToArray, cudaMemcpyToArray, FENCE, cudaStreamLegacy)                       \
  RT(NOTHING, cudaMemcpyToArray_ptds, cudaMemcpyToArray, FENCE, cudaStreamPerThread)               \
  RT(NOTHING, cudaMemcpyToArrayAsync, cudaMemcpyToArrayAsync, FENCE, PW_LEGACY(stream))            \
  RT(NOTHING, cudaMemcpyToArrayAsync_ptsz, cudaMemcpyToArrayAsync, FENCE, PW_PTSZ(stream))         \
  RT(NOTHING, cudaMemcpyArrayToArray, cudaMemcpyArrayToArray, FENCE, cudaStreamLegacy)             \
  RT(NOTHING, cudaMemcpyArrayToArray_ptds, cudaMemcpyArrayToArray, FENCE, cudaStreamPerThread)     \
  RT(NOTHING, cudaMemcpy2DArrayToArray, cudaMemcpy2DArrayToArray, FENCE, cudaStreamLegacy)         \
  RT(NOTHING, cudaMemcpy2DArrayToArray_ptds, cudaMemcpy2DArrayToArray, FENCE, cudaStreamPerThread) \
  /* a graphics resource handed back to OpenGL, Direct3D or Vulkan, whose work then waits for the  \
   * stream's (not for another stream's elided sync: fenced) */                                    \
  RT(NOTHING, cudaGraphicsUnmapResources, cudaGraphicsUnmapResources, FENCE, PW_LEGACY(stream))    \
  /* ---- the driver: TAINT ---- */                                                                \
  DRV(TAINT, cuLaunchHostFunc, cuLaunchHostFunc, HOSTW, PW_DRV_LEGACY(hStream), cuLaunchHostFunc,  \
      10000, 0)                                                                                    \
  DRV(TAINT, cuLaunchHostFunc_ptsz, cuLaunchHostFunc, HOSTW, PW_DRV_PTSZ(hStream),                 \
      cuLaunchHostFunc, 10000, 1)                                                                  \
  DRV(TAINT, cuStreamAddCallback, cuStreamAddCallback, HOSTW, PW_DRV_LEGACY(hStream),              \
      cuStreamAddCallback, 5000, 0)                                                                \
  DRV(TAINT, cuStreamAddCallback_ptsz, cuStreamAddCallback, HOSTW, PW_DRV_PTSZ(hStream),           \
      cuStreamAddCallback, 7000, 1)                                                                \
  DRV(TAINT, cuStreamWaitValue32_v2, cuStreamWaitValue32_v2, FENCE, PW_DRV_LEGACY(stream),         \
      cuStreamWaitValue32, 11070, 0)                                                               \
  DRV(TAINT, cuStreamWaitValue32_v2_ptsz, cuStreamWaitValue32_v2, FENCE, PW_DRV_PTSZ(stream),      \
      cuStreamWaitValue32, 11070, 1)                                                               \
  DRV(TAINT, cuStreamWaitValue32, cuStreamWaitValue32_v2, FENCE, PW_DRV_LEGACY(stream),            \
      cuStreamWaitValue32, 8000, 0)                                                                \
  DRV(TAINT, cuStreamWaitValue32_ptsz, cuStreamWaitValue32_v2, FENCE, PW_DRV_PTSZ(stream),         \
      cuStreamWaitValue32, 8000, 1)                                                                \
  DRV(TAINT, cuStreamWaitValue64_v2, cuStreamWaitValue64_v2, FENCE, PW_DRV_LEGACY(stream),         \
      cuStreamWaitValue64, 11070, 0)                                                               \
  DRV(TAINT, cuStreamWaitValue64_v2_ptsz, cuStreamWaitValue64_v2, FENCE, PW_DRV_PTSZ(stream),      \
      cuStreamWaitValue64, 11070, 1)                                                               \
  DRV(TAINT, cuStreamWaitValue64, cuStreamWaitValue64_v2, FENCE, PW_DRV_LEGACY(stream),            \
      cuStreamWaitValue64, 9000, 0)                                                                \
  DRV(TAINT, cuStreamWaitValue64_ptsz, cuStreamWaitValue64_v2, FENCE, PW_DRV_PTSZ(stream),         \
      cuStreamWaitValue64, 9000, 1)                                                                \
  DRV(TAINT, cuStreamBatchMemOp_v2, cuStreamBatchMemOp_v2, FENCE, PW_DRV_LEGACY(stream),           \
      cuStreamBatchMemOp, 11070, 0)                                                                \
  DRV(TAINT, cuStreamBatchMemOp_v2_ptsz, cuStreamBatchMemOp_v2, FENCE, PW_DRV_PTSZ(stream),        \
      cuStreamBatchMemOp, 11070, 1)                                                                \
  DRV(TAINT, cuStreamBatchMemOp, cuStreamBatchMemOp_v2, FENCE, PW_DRV_LEGACY(stream),              \
      cuStreamBatchMemOp, 8000, 0)                                                                 \
  DRV(TAINT, cuStreamBatchMemOp_ptsz, cuStreamBatchMemOp_v2, FENCE, PW_DRV_PTSZ(stream),           \
      cuStreamBatchMemOp, 8000, 1)                                                                 \
  DRV(TAINT, cuGraphLaunch, cuGraphLaunch, HOSTW, PW_DRV_LEGACY(hStream), cuGraphLaunch, 10000, 0) \
  DRV(TAINT, cuGraphLaunch_ptsz, cuGraphLaunch, HOSTW, PW_DRV_PTSZ(hStream), cuGraphLaunch, 10000, \
      1)                                                                                           \
  DRV(TAINT, cuWaitExternalSemaphoresAsync, cuWaitExternalSemaphoresAsync, FENCE,                  \
      PW_DRV_LEGACY(stream), cuWaitExternalSemaphoresAsync, 10000, 0)                              \
  DRV(TAINT, cuWaitExternalSemaphoresAsync_ptsz, cuWaitExternalSemaphoresAsync, FENCE,             \
      PW_DRV_PTSZ(stream), cuWaitExternalSemaphoresAsync, 10000, 1)                                \
  DRV(TAINT, cuSignalExternalSemaphoresAsync, cuSignalExternalSemaphoresAsync, HOSTW,              \
      PW_DRV_LEGACY(stream), cuSignalExternalSemaphoresAsync, 10000, 0)                            \
  DRV(TAINT, cuSignalExternalSemaphoresAsync_ptsz, cuSignalExternalSemaphoresAsync, HOSTW,         \
      PW_DRV_PTSZ(stream), cuSignalExternalSemaphoresAsync, 10000, 1)                              \
  DRV(TAINT, cuIpcOpenEventHandle, cuIpcOpenEventHandle, NONE, NULL, cuIpcOpenEventHandle, 4010,   \
      0)                                                                                           \
  /* ---- the driver: REVOKE ---- */                                                               \
  DRV(REVOKE, cuMemsetD8_v2, cuMemsetD8_v2, FENCE, CU_STREAM_LEGACY, cuMemsetD8, 3020, 0)          \
  DRV(REVOKE, cuMemsetD8_v2_ptds, cuMemsetD8_v2, FENCE, CU_STREAM_PER_THREAD, cuMemsetD8, 7000, 1) \
  DRV(REVOKE, cuMemsetD16_v2, cuMemsetD16_v2, FENCE, CU_STREAM_LEGACY, cuMemsetD16, 3020, 0)       \
  DRV(REVOKE, cuMemsetD16_v2_ptds, cuMemsetD16_v2, FENCE, CU_STREAM_PER_THREAD, cuMemsetD16, 7000, \
      1)                                                                                           \
  DRV(REVOKE, cuMemsetD32_v2, cuMemsetD32_v2, FENCE, CU_STREAM_LEGACY, cuMemsetD32, 3020, 0)       \
  DRV(REVOKE, cuMemsetD32_v2_ptds, cuMemsetD32_v2, FENCE, CU_STREAM_PER_THREAD, cuMemsetD32, 7000, \
      1)                                                                                           \
  DRV(REVOKE, cuMemsetD8Async, cuMemsetD8Async, FENCE, PW_DRV_LEGACY(hStream), cuMemsetD8Async,    \
      3020, 0)                                                                                     \
  DRV(REVOKE, cuMemsetD8Async_ptsz, cuMemsetD8Async, FENCE, PW_DRV_PTSZ(hStream), cuMemsetD8Async, \
      7000, 1)                                                                                     \
  DRV(REVOKE, cuMemsetD16Async, cuMemsetD16Async, FENCE, PW_DRV_LEGACY(hStream), cuMemsetD16Async, \
      3020, 0)                                                                                     \
  DRV(REVOKE, cuMemsetD16Async_ptsz, cuMemsetD16Async, FENCE, PW_DRV_PTSZ(hStream),                \
      cuMemsetD16Async, 7000, 1)                                                                   \
  DRV(REVOKE, cuMemsetD32Async, cuMemsetD32Async, FENCE, PW_DRV_LEGACY(hStream), cuMemsetD32Async, \
      3020, 0)                                                                                     \
  DRV(REVOKE, cuMemsetD32Async_ptsz, cuMemsetD32Async, FENCE, PW_DRV_PTSZ(hStream),                \
      cuMemsetD32Async, 7000, 1)                                                                   \
  DRV(REVOKE, cuMemsetD2D8_v2, cuMemsetD2D8_v2, FENCE, CU_STREAM_LEGACY, cuMemsetD2D8, 3020, 0)    \
  DRV(REVOKE, cuMemsetD2D8_v2_ptds, cuMemsetD2D8_v2, FENCE, CU_STREAM_PER_THREAD, cuMemsetD2D8,    \
      7000, 1)                                                                                     \
  DRV(REVOKE, cuMemsetD2D16_v2, cuMemsetD2D16_v2, FENCE, CU_STREAM_LEGACY, cuMemsetD2D16, 3020, 0) \
  DRV(REVOKE, cuMemsetD2D16_v2_ptds, cuMemsetD2D16_v2, FENCE, CU_STREAM_PER_THREAD, cuMemsetD2D16, \
      7000, 1)                                                                                     \
  DRV(REVOKE, cuMemsetD2D32_v2, cuMemsetD2D32_v2, FENCE, CU_STREAM_LEGACY, cuMemsetD2D32, 3020, 0) \
  DRV(REVOKE, cuMemsetD2D32_v2_ptds, cuMemsetD2D32_v2, FENCE, CU_STREAM_PER_THREAD, cuMemsetD2D32, \
      7000, 1)                                                                                     \
  DRV(REVOKE, cuMemsetD2D8Async, cuMemsetD2D8Async, FENCE, PW_DRV_LEGACY(hStream),                 \
      cuMemsetD2D8Async, 3020, 0)                                                                  \
  DRV(REVOKE, cuMemsetD2D8Async_ptsz, cuMemsetD2D8Async, FENCE, PW_DRV_PTSZ(hStream),              \
      cuMemsetD2D8Async, 7000, 1)                                                                  \
  DRV(REVOKE, cuMemsetD2D16Async, cuMemsetD2D16Async, FENCE, PW_DRV_LEGACY(hStream),               \
      cuMemsetD2D16Async, 3020, 0)                                                                 \
  DRV(REVOKE, cuMemsetD2D16Async_ptsz, cuMemsetD2D16Async, FENCE, PW_DRV_PTSZ(hStream),            \
      cuMemsetD2D16Async, 7000, 1)                                                                 \
  DRV(REVOKE, cuMemsetD2D32Async, cuMemsetD2D32Async, FENCE, PW_DRV_LEGACY(hStream),               \
      cuMemsetD2D32Async, 3020, 0)                                                                 \
  DRV(REVOKE, cuMemsetD2D32Async_ptsz, cuMemsetD2D32Async, FENCE, PW_DRV_PTSZ(hStream),            \
      cuMemsetD2D32Async, 7000, 1)                                                                 \
  DRV(REVOKE, cuMemcpy2D_v2, cuMemcpy2D_v2, FENCE, CU_STREAM_LEGACY, cuMemcpy2D, 3020, 0)          \
  DRV(REVOKE, cuMemcpy2D_v2_ptds, cuMemcpy2D_v2, FENCE, CU_STREAM_PER_THREAD, cuMemcpy2D, 7000, 1) \
  DRV(REVOKE, cuMemcpy2DUnaligned_v2, cuMemcpy2DUnaligned_v2, FENCE, CU_STREAM_LEGACY,             \
      cuMemcpy2DUnaligned, 3020, 0)                                                                \
  DRV(REVOKE, cuMemcpy2DUnaligned_v2_ptds, cuMemcpy2DUnaligned_v2, FENCE, CU_STREAM_PER_THREAD,    \
      cuMemcpy2DUnaligned, 7000, 1)                                                                \
  DRV(REVOKE, cuMemcpy2DAsync_v2, cuMemcpy2DAsync_v2, FENCE, PW_DRV_LEGACY(hStream),               \
      cuMemcpy2DAsync, 3020, 0)                                                                    \
  DRV(REVOKE, cuMemcpy2DAsync_v2_ptsz, cuMemcpy2DAsync_v2, FENCE, PW_DRV_PTSZ(hStream),            \
      cuMemcpy2DAsync, 7000, 1)                                                                    \
  DRV(REVOKE, cuMemcpy3D_v2, cuMemcpy3D_v2, FENCE, CU_STREAM_LEGACY, cuMemcpy3D, 3020, 0)          \
  DRV(REVOKE, cuMemcpy3D_v2_ptds, cuMemcpy3D_v2, FENCE, CU_STREAM_PER_THREAD, cuMemcpy3D, 7000, 1) \
  DRV(REVOKE, cuMemcpy3DAsync_v2, cuMemcpy3DAsync_v2, FENCE, PW_DRV_LEGACY(hStream),               \
      cuMemcpy3DAsync, 3020, 0)                                                                    \
  DRV(REVOKE, cuMemcpy3DAsync_v2_ptsz, cuMemcpy3DAsync_v2, FENCE, PW_DRV_PTSZ(hStream),            \
      cuMemcpy3DAsync, 7000, 1)                                                                    \
  /* copies between devices and from arrays: a destination may be the buffer's device pointer */   \
  DRV(REVOKE, cuMemcpyDtoD_v2, cuMemcpyDtoD_v2, FENCE, CU_STREAM_LEGACY, cuMemcpyDtoD, 3020, 0)    \
  DRV(REVOKE, cuMemcpyDtoD_v2_ptds, cuMemcpyDtoD_v2, FENCE, CU_STREAM_PER_THREAD, cuMemcpyDtoD,    \
      7000, 1)                                                                                     \
  DRV(REVOKE, cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2, FENCE, PW_DRV_LEGACY(hStream),           \
      cuMemcpyDtoDAsync, 3020, 0)                                                                  \
  DRV(REVOKE, cuMemcpyDtoDAsync_v2_ptsz, cuMemcpyDtoDAsync_v2, FENCE, PW_DRV_PTSZ(hStream),        \
      cuMemcpyDtoDAsync, 7000, 1)                                                                  \
  DRV(REVOKE, cuMemcpyAtoD_v2, cuMemcpyAtoD_v2, FENCE, CU_STREAM_LEGACY, cuMemcpyAtoD, 3020, 0)    \
  DRV(REVOKE, cuMemcpyAtoD_v2_ptds, cuMemcpyAtoD_v2, FENCE, CU_STREAM_PER_THREAD, cuMemcpyAtoD,    \
      7000, 1)                                                                                     \
  DRV(REVOKE, cuMemcpyPeer, cuMemcpyPeer, FENCE, CU_STREAM_LEGACY, cuMemcpyPeer, 4000, 0)          \
  DRV(REVOKE, cuMemcpyPeer_ptds, cuMemcpyPeer, FENCE, CU_STREAM_PER_THREAD, cuMemcpyPeer, 7000, 1) \
  DRV(REVOKE, cuMemcpyPeerAsync, cuMemcpyPeerAsync, FENCE, PW_DRV_LEGACY(hStream),                 \
      cuMemcpyPeerAsync, 4000, 0)                                                                  \
  DRV(REVOKE, cuMemcpyPeerAsync_ptsz, cuMemcpyPeerAsync, FENCE, PW_DRV_PTSZ(hStream),              \
      cuMemcpyPeerAsync, 7000, 1)                                                                  \
  DRV(REVOKE, cuMemcpy3DPeer, cuMemcpy3DPeer, FENCE, CU_STREAM_LEGACY, cuMemcpy3DPeer, 4000, 0)    \
  DRV(REVOKE, cuMemcpy3DPeer_ptds, cuMemcpy3DPeer, FENCE, CU_STREAM_PER_THREAD, cuMemcpy3DPeer,    \
      7000, 1)                                                                                     \
  DRV(REVOKE, cuMemcpy3DPeerAsync, cuMemcpy3DPeerAsync, FENCE, PW_DRV_LEGACY(hStream),             \
      cuMemcpy3DPeerAsync, 4000, 0)                                                                \
  DRV(REVOKE, cuMemcpy3DPeerAsync_ptsz, cuMemcpy3DPeerAsync, FENCE, PW_DRV_PTSZ(hStream),          \
      cuMemcpy3DPeerAsync, 7000, 1)                                                                \
  DRV(REVOKE, cuMemcpyAtoH_v2, cuMemcpyAtoH_v2, FENCE, CU_STREAM_LEGACY, cuMemcpyAtoH, 3020, 0)    \
  DRV(REVOKE, cuMemcpyAtoH_v2_ptds, cuMemcpyAtoH_v2, FENCE, CU_STREAM_PER_THREAD, cuMemcpyAtoH,    \
      7000, 1)                                                                                     \
  DRV(REVOKE, cuMemcpyAtoHAsync_v2, cuMemcpyAtoHAsync_v2, FENCE, PW_DRV_LEGACY(hStream),           \
      cuMemcpyAtoHAsync, 3020, 0)                                                                  \
  DRV(REVOKE, cuMemcpyAtoHAsync_v2_ptsz, cuMemcpyAtoHAsync_v2, FENCE, PW_DRV_PTSZ(hStream),        \
      cuMemcpyAtoHAsync, 7000, 1)                                                                  \
  DRV(REVOKE, cuLaunchCooperativeKernel, cuLaunchCooperativeKernel, FENCE, PW_DRV_LEGACY(hStream), \
      cuLaunchCooperativeKernel, 9000, 0)                                                          \
  DRV(REVOKE, cuLaunchCooperativeKernel_ptsz, cuLaunchCooperativeKernel, FENCE,                    \
      PW_DRV_PTSZ(hStream), cuLaunchCooperativeKernel, 9000, 1)                                    \
  /* ---- the driver: the stream-ordered allocator ---- */                                         \
  DRV(NOTHING, cuMemAllocAsync, cuMemAllocAsync, FENCE, PW_DRV_LEGACY(hStream), cuMemAllocAsync,   \
      11020, 0)                                                                                    \
  DRV(NOTHING, cuMemAllocAsync_ptsz, cuMemAllocAsync, FENCE, PW_DRV_PTSZ(hStream),                 \
      cuMemAllocAsync, 11020, 1)                                                                   \
  DRV(NOTHING, cuMemFreeAsync, cuMemFreeAsync, FENCE, PW_DRV_LEGACY(hStream), cuMemFreeAsync,      \
      11020, 0)                                                                                    \
  DRV(NOTHING, cuMemFreeAsync_ptsz, cuMemFreeAsync, FENCE, PW_DRV_PTSZ(hStream), cuMemFreeAsync,   \
      11020, 1)                                                                                    \
  DRV(NOTHING, cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, FENCE, PW_DRV_LEGACY(hStream),    \
      cuMemAllocFromPoolAsync, 11020, 0)                                                           \
  DRV(NOTHING, cuMemAllocFromPoolAsync_ptsz, cuMemAllocFromPoolAsync, FENCE, PW_DRV_PTSZ(hStream), \
      cuMemAllocFromPoolAsync, 11020, 1)                                                           \
  /* ---- the driver: copies into arrays, graphics unmaps (as the runtime's) ---- */               \
  DRV(NOTHING, cuMemcpyHtoA_v2, cuMemcpyHtoA_v2, FENCE, CU_STREAM_LEGACY, cuMemcpyHtoA, 3020, 0)   \
  DRV(NOTHING, cuMemcpyHtoA_v2_ptds, cuMemcpyHtoA_v2, FENCE, CU_STREAM_PER_THREAD, cuMemcpyHtoA,   \
      7000, 1)                                                                                     \
  DRV(NOTHING, cuMemcpyHtoAAsync_v2, cuMemcpyHtoAAsync_v2, FENCE, PW_DRV_LEGACY(hStream),          \
      cuMemcpyHtoAAsync, 3020, 0)                                                                  \
  DRV(NOTHING, cuMemcpyHtoAAsync_v2_ptsz, cuMemcpyHtoAAsync_v2, FENCE, PW_DRV_PTSZ(hStream),       \
      cuMemcpyHtoAAsync, 7000, 1)                                                                  \
  DRV(NOTHING, cuMemcpyDtoA_v2, cuMemcpyDtoA_v2, FENCE, CU_STREAM_LEGACY, cuMemcpyDtoA, 3020, 0)   \
  DRV(NOTHING, cuMemcpyDtoA_v2_ptds, cuMemcpyDtoA_v2, FENCE, CU_STREAM_PER_THREAD, cuMemcpyDtoA,   \
      7000, 1)                                                                                     \
  DRV(NOTHING, cuMemcpyAtoA_v2, cuMemcpyAtoA_v2, FENCE, CU_STREAM_LEGACY, cuMemcpyAtoA, 3020, 0)   \
  DRV(NOTHING, cuMemcpyAtoA_v2_ptds, cuMemcpyAtoA_v2, FENCE, CU_STREAM_PER_THREAD, cuMemcpyAtoA,   \
      7000, 1)                                                                                     \
  DRV(NOTHING, cuGraphicsUnmapResources, cuGraphicsUnmapResources, FENCE, PW_DRV_LEGACY(hStream),  \
      cuGraphicsUnmapResources, 3000, 0)                                                           \
  DRV(NOTHING, cuGraphicsUnmapResources_ptsz, cuGraphicsUnmapResources, FENCE,                     \
      PW_DRV_PTSZ(hStream), cuGraphicsUnmapResources, 7000, 1)                                     \
  /* a value written to device memory, which may be the buffer's device mapping */                 \
  DRV(REVOKE, cuStreamWriteValue32_v2, cuStreamWriteValue32_v2, FENCE, PW_DRV_LEGACY(stream),      \
      cuStreamWriteValue32, 11070, 0)                                                              \
  DRV(REVOKE, cuStreamWriteValue32_v2_ptsz, cuStreamWriteValue32_v2, FENCE, PW_DRV_PTSZ(stream),   \
      cuStreamWriteValue32, 11070, 1)                                                              \
  DRV(REVOKE, cuStreamWriteValue32, cuStreamWriteValue32_v2, FENCE, PW_DRV_LEGACY(stream),         \
      cuStreamWriteValue32, 8000, 0)                                                               \
  DRV(REVOKE, cuStreamWriteValue32_ptsz, cuStreamWriteValue32_v2, FENCE, PW_DRV_PTSZ(stream),      \
      cuStreamWriteValue32, 8000, 1)                                                               \
  DRV(REVOKE, cuStreamWriteValue64_v2, cuStreamWriteValue64_v2, FENCE, PW_DRV_LEGACY(stream),      \
      cuStreamWriteValue64, 11070, 0)                                                              \
  DRV(REVOKE, cuStreamWriteValue64_v2_ptsz, cuStreamWriteValue64_v2, FENCE, PW_DRV_PTSZ(stream),   \
      cuStreamWriteValue64, 11070, 1)                                                              \
  DRV(REVOKE, cuStreamWriteValue64, cuStreamWriteValue64_v2, FENCE, PW_DRV_LEGACY(stream),         \
      cuStreamWriteValue64, 9000, 0)                                                               \
  DRV(REVOKE, cuStreamWriteValue64_ptsz, cuStreamWriteValue64_v2, FENCE, PW_DRV_PTSZ(stream),      \
      cuStreamWriteValue64, 9000, 1)

/* ---- what each kind does before the real call ---- */

/* The program may order a write of its pinned memory after a fill from the GPU's side: every
 * upload is given up, for good.  A call before init first runs it (as every hooked entry point
 * does), so that fill-ahead, once on, knows of it. */
static inline void fa_before_TAINT(const char *name) {
  /* fill-ahead is on only in stage mode: pw_enter's OFF is init recursing, or the shim's own call
   */
  if (pw_enter() != PW_MODE_OFF && PW_UNLIKELY(pw_fa_on())) pw_fa_taint(name);
}

/* Calls that neither write nor order anything fill-ahead cares about (the stream-ordered
 * allocator, copies into arrays and symbols, graphics unmaps): listed for sync elision only. */
static inline void fa_before_NOTHING(const char *name) {
  (void)name;
}

/* The call may write the program's pinned memory: every live upload is given up (none live: one
 * relaxed load). */
static inline void fa_before_REVOKE(const char *name) {
  (void)name;
  if (PW_UNLIKELY(pw_fa_live()) && !pw_depth) pw_fa_revoke_all(PW_FA_OTHER_WRITE);
}

/* ---- what sync elision does around the real call ---- */

/* Work on another stream than an elided sync's waits for it (no live elided sync: one load). */
#define el_before_FENCE(ops, s)                                                                    \
  if (!pw_depth) pw_elide_fence(ops, (void *)(s))
#define el_before_HOSTW(ops, s) el_before_FENCE(ops, s)
#define el_before_NONE(ops, s)
/* Host functions and graphs can write host memory, a semaphore's signal be seen from the host:
 * the stream's next sync is real. */
#define el_after_HOSTW(ops, s, ok)                                                                 \
  if ((ok) && !pw_depth && pw_mode == PW_MODE_STAGE && pw_sync_mode == PW_SYNC_ELIDE)              \
  pw_elide_host_write(ops, (void *)(s))
#define el_after_FENCE(ops, s, ok)
#define el_after_NONE(ops, s, ok)

/* ---- the wrappers ----
 * T the status type, OK its success, lookup and missing the library's, ops its backend; the
 * header's declaration of base must have the wrapper's type (a per-thread or older variant has its
 * base's prototype). */
#define FA_WRAP(T, OK, lookup, missing, ops, how, name, base, el, stream, params, args)            \
  typedef T(*fa_fn_##name) params;                                                                 \
  static _Atomic(fa_fn_##name) fa_real_##name;                                                     \
  PW_EXPORT T name params;                                                                         \
  _Static_assert(__builtin_types_compatible_p(__typeof__(&name), __typeof__(&base)),               \
                 #name " has the prototype of " #base);                                            \
  T name params {                                                                                  \
    fa_before_##how(#name);                                                                        \
    fa_fn_##name f_ = atomic_load_explicit(&fa_real_##name, memory_order_relaxed);                 \
    if (PW_UNLIKELY(!f_)) {                                                                        \
      *(void **)&f_ = lookup(#name);                                                               \
      if (!f_) return missing(#name);                                                              \
      atomic_store_explicit(&fa_real_##name, f_, memory_order_relaxed);                            \
    }                                                                                              \
    el_before_##el(ops, stream);                                                                   \
    T r_ = f_ args;                                                                                \
    el_after_##el(ops, stream, r_ == OK);                                                          \
    return r_;                                                                                     \
  }
#define FA_WRAP_(...) FA_WRAP(__VA_ARGS__) /* P_base expanded into its two arguments first */
#define FA_RT(how, name, base, el, stream)                                                         \
  FA_WRAP_(cudaError_t, cudaSuccess, pw_runtime_lookup, pw_runtime_missing, &pw_real_ops, how,     \
           name, base, el, stream, P_##base)
#define FA_DRV(how, name, base, el, stream, gbase, version, pt)                                    \
  FA_WRAP_(CUresult, CUDA_SUCCESS, pw_drv_lookup, pw_drv_missing, &pw_drv_ops, how, name, base,    \
           el, stream, P_##base)

/* cudaMemcpyFromArray(Async), cudaMemcpyToArray(Async) and cudaMemcpyArrayToArray are deprecated,
 * still exported, and still copy */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
PW_FA_HOOKS(FA_RT, FA_DRV)
#pragma GCC diagnostic pop

/* The driver's entries, for drv.c's recognition of what cuGetProcAddress and dlsym hand out. */
#define FA_RT_NONE(how, name, base, el, stream)
#define FA_DRV_ENTRY(how, name, base, el, stream, gbase, version, pt)                              \
  {#name, (void *)name, #gbase, version, pt},
const pw_fa_drv_entry pw_fa_drv_entries[] = {PW_FA_HOOKS(FA_RT_NONE, FA_DRV_ENTRY)};
const int pw_fa_drv_count = sizeof pw_fa_drv_entries / sizeof *pw_fa_drv_entries;
