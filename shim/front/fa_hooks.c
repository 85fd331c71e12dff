/* fa_hooks.c — the entry points that matter only to uploads made ahead of the program's copies
 * (PINWHEEL_FILL_AHEAD, fa.h; docs/DESIGN.md §11): calls that can write the program's pinned
 * memory, or order a write of it after a fill from the GPU's side, out of the sight of every other
 * hook.  With fill-ahead off each wrapper is one relaxed load (REVOKE) or one test of the option
 * (TAINT) in front of the real call.
 *   TAINT   host functions and stream callbacks, stream waits on a value, external semaphore
 *           waits, graph launches, IPC events: the program can order a write of its buffer after
 *           a fill from the GPU's side; pw_fa_taint gives every upload up, for good.
 *   REVOKE  memsets, 2D/3D/symbol/array/peer/device-to-device copies, cooperative launches, stream
 *           value writes: they
 *           may write the buffer (a destination in it, or through its device mapping) but order
 *           nothing after a fill; every live upload is given up (PW_FA_OTHER_WRITE), as a launch
 *           gives them up through the hooked launch entry points (front.h).
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
 * Only the exported symbols are wrapped: what cuGetProcAddress, cudaGetDriverEntryPoint or a
 * dlsym of libcuda hand out for these names is the driver's own function (drv.c offers wrappers
 * for drv_hooks.def's entries only), so a program that takes them that way is not seen.
 *
 * Must never: change a real call's arguments or status, print or allocate on the way to the real
 * call, call an exported wrapper of the shim.
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

/* The one list.  RT(how, name, base): a runtime function; DRV(...): a driver one.  how is TAINT
 * or REVOKE; base names the prototype (P_base), the name the CUDA 13 header declares with it (the
 * per-thread and older variants are checked against it). */
#define PW_FA_HOOKS(RT, DRV)                                                                       \
  /* ---- the runtime: TAINT ---- */                                                               \
  RT(TAINT, cudaLaunchHostFunc, cudaLaunchHostFunc)                                                \
  RT(TAINT, cudaLaunchHostFunc_ptsz, cudaLaunchHostFunc)                                           \
  RT(TAINT, cudaStreamAddCallback, cudaStreamAddCallback)                                          \
  RT(TAINT, cudaStreamAddCallback_ptsz, cudaStreamAddCallback)                                     \
  RT(TAINT, cudaGraphLaunch, cudaGraphLaunch)                                                      \
  RT(TAINT, cudaGraphLaunch_ptsz, cudaGraphLaunch)                                                 \
  RT(TAINT, cudaWaitExternalSemaphoresAsync, cudaWaitExternalSemaphoresAsync)                      \
  RT(TAINT, cudaWaitExternalSemaphoresAsync_ptsz, cudaWaitExternalSemaphoresAsync)                 \
  /* CUDA 12's names of the same function (libcudart.so.12): a program built with CUDA 12 */       \
  RT(TAINT, cudaWaitExternalSemaphoresAsync_v2, cudaWaitExternalSemaphoresAsync)                   \
  RT(TAINT, cudaWaitExternalSemaphoresAsync_v2_ptsz, cudaWaitExternalSemaphoresAsync)              \
  RT(TAINT, cudaIpcOpenEventHandle, cudaIpcOpenEventHandle)                                        \
  /* ---- the runtime: REVOKE ---- */                                                              \
  RT(REVOKE, cudaMemset, cudaMemset)                                                               \
  RT(REVOKE, cudaMemset_ptds, cudaMemset)                                                          \
  RT(REVOKE, cudaMemsetAsync, cudaMemsetAsync)                                                     \
  RT(REVOKE, cudaMemsetAsync_ptsz, cudaMemsetAsync)                                                \
  RT(REVOKE, cudaMemset2D, cudaMemset2D)                                                           \
  RT(REVOKE, cudaMemset2D_ptds, cudaMemset2D)                                                      \
  RT(REVOKE, cudaMemset2DAsync, cudaMemset2DAsync)                                                 \
  RT(REVOKE, cudaMemset2DAsync_ptsz, cudaMemset2DAsync)                                            \
  RT(REVOKE, cudaMemset3D, cudaMemset3D)                                                           \
  RT(REVOKE, cudaMemset3D_ptds, cudaMemset3D)                                                      \
  RT(REVOKE, cudaMemset3DAsync, cudaMemset3DAsync)                                                 \
  RT(REVOKE, cudaMemset3DAsync_ptsz, cudaMemset3DAsync)                                            \
  RT(REVOKE, cudaMemcpy2D, cudaMemcpy2D)                                                           \
  RT(REVOKE, cudaMemcpy2D_ptds, cudaMemcpy2D)                                                      \
  RT(REVOKE, cudaMemcpy2DAsync, cudaMemcpy2DAsync)                                                 \
  RT(REVOKE, cudaMemcpy2DAsync_ptsz, cudaMemcpy2DAsync)                                            \
  RT(REVOKE, cudaMemcpy3D, cudaMemcpy3D)                                                           \
  RT(REVOKE, cudaMemcpy3D_ptds, cudaMemcpy3D)                                                      \
  RT(REVOKE, cudaMemcpy3DAsync, cudaMemcpy3DAsync)                                                 \
  RT(REVOKE, cudaMemcpy3DAsync_ptsz, cudaMemcpy3DAsync)                                            \
  RT(REVOKE, cudaMemcpy2DFromArray, cudaMemcpy2DFromArray)                                         \
  RT(REVOKE, cudaMemcpy2DFromArray_ptds, cudaMemcpy2DFromArray)                                    \
  RT(REVOKE, cudaMemcpy2DFromArrayAsync, cudaMemcpy2DFromArrayAsync)                               \
  RT(REVOKE, cudaMemcpy2DFromArrayAsync_ptsz, cudaMemcpy2DFromArrayAsync)                          \
  RT(REVOKE, cudaMemcpyFromSymbol, cudaMemcpyFromSymbol)                                           \
  RT(REVOKE, cudaMemcpyFromSymbol_ptds, cudaMemcpyFromSymbol)                                      \
  RT(REVOKE, cudaMemcpyFromSymbolAsync, cudaMemcpyFromSymbolAsync)                                 \
  RT(REVOKE, cudaMemcpyFromSymbolAsync_ptsz, cudaMemcpyFromSymbolAsync)                            \
  RT(REVOKE, cudaMemcpyPeer, cudaMemcpyPeer)                                                       \
  RT(REVOKE, cudaMemcpyPeerAsync, cudaMemcpyPeerAsync)                                             \
  RT(REVOKE, cudaMemcpy3DPeer, cudaMemcpy3DPeer)                                                   \
  RT(REVOKE, cudaMemcpy3DPeer_ptds, cudaMemcpy3DPeer)                                              \
  RT(REVOKE, cudaMemcpy3DPeerAsync, cudaMemcpy3DPeerAsync)                                         \
  RT(REVOKE, cudaMemcpy3DPeerAsync_ptsz, cudaMemcpy3DPeerAsync)                                    \
  RT(REVOKE, cudaMemcpyFromArray, cudaMemcpyFromArray)                                             \
  RT(REVOKE, cudaMemcpyFromArray_ptds, cudaMemcpyFromArray)                                        \
  RT(REVOKE, cudaMemcpyFromArrayAsync, cudaMemcpyFromArrayAsync)                                   \
  RT(REVOKE, cudaMemcpyFromArrayAsync_ptsz, cudaMemcpyFromArrayAsync)                              \
  RT(REVOKE, cudaLaunchCooperativeKernel, cudaLaunchCooperativeKernel)                             \
  RT(REVOKE, cudaLaunchCooperativeKernel_ptsz, cudaLaunchCooperativeKernel)                        \
  /* ---- the driver: TAINT ---- */                                                                \
  DRV(TAINT, cuLaunchHostFunc, cuLaunchHostFunc)                                                   \
  DRV(TAINT, cuLaunchHostFunc_ptsz, cuLaunchHostFunc)                                              \
  DRV(TAINT, cuStreamAddCallback, cuStreamAddCallback)                                             \
  DRV(TAINT, cuStreamAddCallback_ptsz, cuStreamAddCallback)                                        \
  DRV(TAINT, cuStreamWaitValue32_v2, cuStreamWaitValue32_v2)                                       \
  DRV(TAINT, cuStreamWaitValue32_v2_ptsz, cuStreamWaitValue32_v2)                                  \
  DRV(TAINT, cuStreamWaitValue32, cuStreamWaitValue32_v2)                                          \
  DRV(TAINT, cuStreamWaitValue32_ptsz, cuStreamWaitValue32_v2)                                     \
  DRV(TAINT, cuStreamWaitValue64_v2, cuStreamWaitValue64_v2)                                       \
  DRV(TAINT, cuStreamWaitValue64_v2_ptsz, cuStreamWaitValue64_v2)                                  \
  DRV(TAINT, cuStreamWaitValue64, cuStreamWaitValue64_v2)                                          \
  DRV(TAINT, cuStreamWaitValue64_ptsz, cuStreamWaitValue64_v2)                                     \
  DRV(TAINT, cuStreamBatchMemOp_v2, cuStreamBatchMemOp_v2)                                         \
  DRV(TAINT, cuStreamBatchMemOp_v2_ptsz, cuStreamBatchMemOp_v2)                                    \
  DRV(TAINT, cuStreamBatchMemOp, cuStreamBatchMemOp_v2)                                            \
  DRV(TAINT, cuStreamBatchMemOp_ptsz, cuStreamBatchMemOp_v2)                                       \
  DRV(TAINT, cuGraphLaunch, cuGraphLaunch)                                                         \
  DRV(TAINT, cuGraphLaunch_ptsz, cuGraphLaunch)                                                    \
  DRV(TAINT, cuWaitExternalSemaphoresAsync, cuWaitExternalSemaphoresAsync)                         \
  DRV(TAINT, cuWaitExternalSemaphoresAsync_ptsz, cuWaitExternalSemaphoresAsync)                    \
  DRV(TAINT, cuIpcOpenEventHandle, cuIpcOpenEventHandle)                                           \
  /* ---- the driver: REVOKE ---- */                                                               \
  DRV(REVOKE, cuMemsetD8_v2, cuMemsetD8_v2)                                                        \
  DRV(REVOKE, cuMemsetD8_v2_ptds, cuMemsetD8_v2)                                                   \
  DRV(REVOKE, cuMemsetD16_v2, cuMemsetD16_v2)                                                      \
  DRV(REVOKE, cuMemsetD16_v2_ptds, cuMemsetD16_v2)                                                 \
  DRV(REVOKE, cuMemsetD32_v2, cuMemsetD32_v2)                                                      \
  DRV(REVOKE, cuMemsetD32_v2_ptds, cuMemsetD32_v2)                                                 \
  DRV(REVOKE, cuMemsetD8Async, cuMemsetD8Async)                                                    \
  DRV(REVOKE, cuMemsetD8Async_ptsz, cuMemsetD8Async)                                               \
  DRV(REVOKE, cuMemsetD16Async, cuMemsetD16Async)                                                  \
  DRV(REVOKE, cuMemsetD16Async_ptsz, cuMemsetD16Async)                                             \
  DRV(REVOKE, cuMemsetD32Async, cuMemsetD32Async)                                                  \
  DRV(REVOKE, cuMemsetD32Async_ptsz, cuMemsetD32Async)                                             \
  DRV(REVOKE, cuMemsetD2D8_v2, cuMemsetD2D8_v2)                                                    \
  DRV(REVOKE, cuMemsetD2D8_v2_ptds, cuMemsetD2D8_v2)                                               \
  DRV(REVOKE, cuMemsetD2D16_v2, cuMemsetD2D16_v2)                                                  \
  DRV(REVOKE, cuMemsetD2D16_v2_ptds, cuMemsetD2D16_v2)                                             \
  DRV(REVOKE, cuMemsetD2D32_v2, cuMemsetD2D32_v2)                                                  \
  DRV(REVOKE, cuMemsetD2D32_v2_ptds, cuMemsetD2D32_v2)                                             \
  DRV(REVOKE, cuMemsetD2D8Async, cuMemsetD2D8Async)                                                \
  DRV(REVOKE, cuMemsetD2D8Async_ptsz, cuMemsetD2D8Async)                                           \
  DRV(REVOKE, cuMemsetD2D16Async, cuMemsetD2D16Async)                                              \
  DRV(REVOKE, cuMemsetD2D16Async_ptsz, cuMemsetD2D16Async)                                         \
  DRV(REVOKE, cuMemsetD2D32Async, cuMemsetD2D32Async)                                              \
  DRV(REVOKE, cuMemsetD2D32Async_ptsz, cuMemsetD2D32Async)                                         \
  DRV(REVOKE, cuMemcpy2D_v2, cuMemcpy2D_v2)                                                        \
  DRV(REVOKE, cuMemcpy2D_v2_ptds, cuMemcpy2D_v2)                                                   \
  DRV(REVOKE, cuMemcpy2DUnaligned_v2, cuMemcpy2DUnaligned_v2)                                      \
  DRV(REVOKE, cuMemcpy2DUnaligned_v2_ptds, cuMemcpy2DUnaligned_v2)                                 \
  DRV(REVOKE, cuMemcpy2DAsync_v2, cuMemcpy2DAsync_v2)                                              \
  DRV(REVOKE, cuMemcpy2DAsync_v2_ptsz, cuMemcpy2DAsync_v2)                                         \
  DRV(REVOKE, cuMemcpy3D_v2, cuMemcpy3D_v2)                                                        \
  DRV(REVOKE, cuMemcpy3D_v2_ptds, cuMemcpy3D_v2)                                                   \
  DRV(REVOKE, cuMemcpy3DAsync_v2, cuMemcpy3DAsync_v2)                                              \
  DRV(REVOKE, cuMemcpy3DAsync_v2_ptsz, cuMemcpy3DAsync_v2)                                         \
  /* copies between devices and from arrays: a destination may be the buffer's device pointer */   \
  DRV(REVOKE, cuMemcpyDtoD_v2, cuMemcpyDtoD_v2)                                                    \
  DRV(REVOKE, cuMemcpyDtoD_v2_ptds, cuMemcpyDtoD_v2)                                               \
  DRV(REVOKE, cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2)                                          \
  DRV(REVOKE, cuMemcpyDtoDAsync_v2_ptsz, cuMemcpyDtoDAsync_v2)                                     \
  DRV(REVOKE, cuMemcpyAtoD_v2, cuMemcpyAtoD_v2)                                                    \
  DRV(REVOKE, cuMemcpyAtoD_v2_ptds, cuMemcpyAtoD_v2)                                               \
  DRV(REVOKE, cuMemcpyPeer, cuMemcpyPeer)                                                          \
  DRV(REVOKE, cuMemcpyPeer_ptds, cuMemcpyPeer)                                                     \
  DRV(REVOKE, cuMemcpyPeerAsync, cuMemcpyPeerAsync)                                                \
  DRV(REVOKE, cuMemcpyPeerAsync_ptsz, cuMemcpyPeerAsync)                                           \
  DRV(REVOKE, cuMemcpy3DPeer, cuMemcpy3DPeer)                                                      \
  DRV(REVOKE, cuMemcpy3DPeer_ptds, cuMemcpy3DPeer)                                                 \
  DRV(REVOKE, cuMemcpy3DPeerAsync, cuMemcpy3DPeerAsync)                                            \
  DRV(REVOKE, cuMemcpy3DPeerAsync_ptsz, cuMemcpy3DPeerAsync)                                       \
  DRV(REVOKE, cuMemcpyAtoH_v2, cuMemcpyAtoH_v2)                                                    \
  DRV(REVOKE, cuMemcpyAtoH_v2_ptds, cuMemcpyAtoH_v2)                                               \
  DRV(REVOKE, cuMemcpyAtoHAsync_v2, cuMemcpyAtoHAsync_v2)                                          \
  DRV(REVOKE, cuMemcpyAtoHAsync_v2_ptsz, cuMemcpyAtoHAsync_v2)                                     \
  DRV(REVOKE, cuLaunchCooperativeKernel, cuLaunchCooperativeKernel)                                \
  DRV(REVOKE, cuLaunchCooperativeKernel_ptsz, cuLaunchCooperativeKernel)                           \
  /* a value written to device memory, which may be the buffer's device mapping */                 \
  DRV(REVOKE, cuStreamWriteValue32_v2, cuStreamWriteValue32_v2)                                    \
  DRV(REVOKE, cuStreamWriteValue32_v2_ptsz, cuStreamWriteValue32_v2)                               \
  DRV(REVOKE, cuStreamWriteValue32, cuStreamWriteValue32_v2)                                       \
  DRV(REVOKE, cuStreamWriteValue32_ptsz, cuStreamWriteValue32_v2)                                  \
  DRV(REVOKE, cuStreamWriteValue64_v2, cuStreamWriteValue64_v2)                                    \
  DRV(REVOKE, cuStreamWriteValue64_v2_ptsz, cuStreamWriteValue64_v2)                               \
  DRV(REVOKE, cuStreamWriteValue64, cuStreamWriteValue64_v2)                                       \
  DRV(REVOKE, cuStreamWriteValue64_ptsz, cuStreamWriteValue64_v2)

/* ---- what each kind does before the real call ---- */

/* The program may order a write of its pinned memory after a fill from the GPU's side: every
 * upload is given up, for good.  A call before init first runs it (as every hooked entry point
 * does), so that fill-ahead, once on, knows of it. */
static inline void fa_before_TAINT(const char *name) {
  /* fill-ahead is on only in stage mode: pw_enter's OFF is init recursing, or the shim's own call
   */
  if (pw_enter() != PW_MODE_OFF && PW_UNLIKELY(pw_fa_on())) pw_fa_taint(name);
}

/* The call may write the program's pinned memory: every live upload is given up (none live: one
 * relaxed load). */
static inline void fa_before_REVOKE(const char *name) {
  (void)name;
  if (PW_UNLIKELY(pw_fa_live()) && !pw_depth) pw_fa_revoke_all(PW_FA_OTHER_WRITE);
}

/* ---- the wrappers ----
 * T the status type, lookup and missing the library's; the header's declaration of base must have
 * the wrapper's type (a per-thread or older variant has its base's prototype). */
#define FA_WRAP(T, lookup, missing, how, name, base, params, args)                                 \
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
    return f_ args;                                                                                \
  }
#define FA_WRAP_(...) FA_WRAP(__VA_ARGS__) /* P_base expanded into its two arguments first */
#define FA_RT(how, name, base)                                                                     \
  FA_WRAP_(cudaError_t, pw_runtime_lookup, pw_runtime_missing, how, name, base, P_##base)
#define FA_DRV(how, name, base)                                                                    \
  FA_WRAP_(CUresult, pw_drv_lookup, pw_drv_missing, how, name, base, P_##base)

/* cudaMemcpyFromArray(Async) are deprecated, still exported, and still write host memory */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
PW_FA_HOOKS(FA_RT, FA_DRV)
#pragma GCC diagnostic pop
