// entry_point_copy — pageable copies through driver functions taken from the shared runtime's
// cudaGetDriverEntryPointByVersion (as libraries that call the driver without linking libcuda
// do): cuMemcpyHtoD_v2 and cuMemcpyDtoH_v2, 64 MiB each way, 5 rounds, every byte compared.
//   entry_point_copy [MiB=64]
#include "common.cuh"
#include <cuda.h>

typedef CUresult (*htod_fn)(CUdeviceptr, const void *, size_t);
typedef CUresult (*dtoh_fn)(void *, CUdeviceptr, size_t);

int main(int argc, char **argv) {
  size_t bytes = (size_t)(argc > 1 ? atol(argv[1]) : 64) << 20;
  htod_fn htod = NULL;
  dtoh_fn dtoh = NULL;
  cudaDriverEntryPointQueryResult st;
  CK(cudaGetDriverEntryPointByVersion("cuMemcpyHtoD", (void **)&htod, 12000, cudaEnableDefault,
                                      &st));
  CK(cudaGetDriverEntryPointByVersion("cuMemcpyDtoH", (void **)&dtoh, 12000, cudaEnableDefault,
                                      &st));
  if (!htod || !dtoh) {
    printf("entry_point_copy: no entry point\n");
    return 1;
  }
  char *d;
  CK(cudaMalloc(&d, bytes));
  int bad = 0;
  for (int k = 0; k < 5; k++) {
    char *h = (char *)malloc(bytes), *back = (char *)malloc(bytes);
    for (size_t i = 0; i < bytes; i++)
      h[i] = (char)(i * 131 + 7 * k);
    if (htod((CUdeviceptr)d, h, bytes) != CUDA_SUCCESS) bad++;
    memset(h, 0, bytes); // the source is the program's again once the call returned
    if (dtoh(back, (CUdeviceptr)d, bytes) != CUDA_SUCCESS) bad++;
    for (size_t i = 0; i < bytes; i++)
      if (back[i] != (char)(i * 131 + 7 * k)) {
        bad++;
        break;
      }
    free(h);
    free(back);
  }
  CK(cudaFree(d));
  printf("entry_point_copy: 10 copies of %zu MiB, bytes %s\n", bytes >> 20, bad ? "DIFFER" : "ok");
  return bad != 0;
}
