// reset_copy — pageable host-to-device copies, cudaDeviceReset in the middle of the run, copies
// again: a program that resets its device must find its copies right after the reset, and under
// pinwheel staged again (pinwheel forgets the device's state at the reset and sets it up anew).
//   reset_copy [MiB=64] [copies=8]
// Each copy's bytes are read back and compared; prints "reset_copy: N copies before and N after
// the reset, bytes ok".
#include "common.cuh"

static int round_of_copies(size_t bytes, int copies, int seed) {
  unsigned char *dev, *h = (unsigned char *)malloc(bytes), *back = (unsigned char *)malloc(bytes);
  CK(cudaMalloc(&dev, bytes));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  int bad = 0;
  for (int k = 0; k < copies; k++) {
    for (size_t i = 0; i < bytes; i++)
      h[i] = (unsigned char)(i * 29 + k * 7 + seed);
    CK(cudaMemcpyAsync(dev, h, bytes, cudaMemcpyHostToDevice, s));
    memset(h, 0xee, bytes); // the source is the program's again once the call returned
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(back, dev, bytes, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < bytes; i++)
      if (back[i] != (unsigned char)(i * 29 + k * 7 + seed)) {
        bad++;
        break;
      }
  }
  CK(cudaStreamDestroy(s));
  CK(cudaFree(dev));
  free(h);
  free(back);
  return bad;
}

int main(int argc, char **argv) {
  size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 64;
  int copies = argc > 2 ? atoi(argv[2]) : 8;
  int bad = round_of_copies(mib << 20, copies, 1);
  CK(cudaDeviceReset());
  bad += round_of_copies(mib << 20, copies, 2);
  printf("reset_copy: %d copies before and %d after the reset, bytes %s\n", copies, copies,
         bad ? "WRONG" : "ok");
  return bad ? 1 : 0;
}
