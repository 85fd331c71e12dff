// launch_bench — launch-bound loop for the hook overhead: N empty kernel launches, then a sync.
// Prints ns per launch (median of 5 rounds).
//   launch_bench [launches=200000]
#include "common.cuh"
#include <algorithm>

__global__ void empty(void) {}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 200000;
  double r[5];
  empty<<<1, 1>>>();
  CK(cudaDeviceSynchronize());
  for (int k = 0; k < 5; k++) {
    double t0 = now_ms();
    for (long i = 0; i < n; i++) empty<<<1, 1>>>();
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    r[k] = (now_ms() - t0) * 1e6 / n;
  }
  std::sort(r, r + 5);
  printf("launch_bench: %ld launches: %.1f ns/launch (median of 5)\n", n, r[2]);
  return 0;
}
