// fork_pinned — what a forked child sees of its parent's pinned memory (cudaHostAlloc): the child
// reads a byte of it and writes another; the parent then looks for the child's write, and copies
// the buffer to the device and back to check that CUDA still sees the parent's bytes.
//   fork_pinned [MiB=64]
// Prints one line and exits with:
//   0  "shared": the child read the parent's bytes and its write reached the parent (CUDA's own
//      pinned memory: a shared mapping; pinwheel must keep it so);
//   2  "not inherited": the child was killed by a signal touching it (pinwheel's memory under
//      PINWHEEL_FILL_AHEAD, which a child does not get: README, "fill-ahead");
//   1  anything else (the child saw other bytes, its write was lost, the device's bytes differ).
#include "common.cuh"
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
  size_t n = (size_t)(argc > 1 ? atoi(argv[1]) : 64) << 20;
  unsigned char *p = NULL, *d = NULL;
  CK(cudaHostAlloc((void **)&p, n, cudaHostAllocDefault));
  CK(cudaMalloc((void **)&d, n));
  for (size_t i = 0; i < n; i++)
    p[i] = (unsigned char)(i * 131u + 7u);
  CK(cudaMemcpy(d, p, n, cudaMemcpyHostToDevice)); // CUDA is in use before the fork
  fflush(stdout);
  pid_t c = fork();
  if (c < 0) {
    perror("fork");
    return 1;
  }
  if (c == 0) { // no CUDA here: only the memory
    size_t k = n / 2 + 12345;
    int ok = p[k] == (unsigned char)(k * 131u + 7u);
    p[1] = 0xEE; // the parent's byte there is 138
    _exit(ok ? 0 : 3);
  }
  int st = 0;
  if (waitpid(c, &st, 0) != c) {
    perror("waitpid");
    return 1;
  }
  int write_shared = p[1] == 0xEE;
  p[1] = (unsigned char)(1 * 131u + 7u); // the parent's own byte again, whatever the child did
  // CUDA still copies the parent's bytes, from the first to the last
  unsigned char back[3] = {0, 0, 0};
  CK(cudaMemcpy(d, p, n, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(&back[0], d, 1, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(&back[1], d + 1, 1, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(&back[2], d + n - 1, 1, cudaMemcpyDeviceToHost));
  int dev_ok = back[0] == 7 && back[1] == 138 && back[2] == (unsigned char)((n - 1) * 131u + 7u);
  CK(cudaFree(d));
  CK(cudaFreeHost(p));
  if (WIFSIGNALED(st)) {
    printf("not inherited: the child was killed by signal %d touching the parent's pinned memory; "
           "device bytes %s\n",
           WTERMSIG(st), dev_ok ? "ok" : "WRONG");
    return dev_ok ? 2 : 1;
  }
  int read_ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
  printf("%s: the child %s the parent's bytes, its write %s the parent; device bytes %s\n",
         read_ok && write_shared && dev_ok ? "shared" : "DIFFERENT",
         read_ok ? "read" : "did NOT read", write_shared ? "reached" : "did NOT reach",
         dev_ok ? "ok" : "WRONG");
  return read_ok && write_shared && dev_ok ? 0 : 1;
}
