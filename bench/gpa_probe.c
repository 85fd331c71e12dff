/* gpa_probe.c — does the driver's cuGetProcAddress hand out the exported symbols' addresses?  For
 * the copies, launches and syncs of shim/front/drv_hooks.def (each ABI asked for as the static
 * runtime asks: name, version, per-thread flag) and CUDA 3.0's 32-bit cuMemcpyHtoD, it prints
 * dlsym's and cuGetProcAddress's answers.  On a GPU machine (docs/RESULTS.md, "The static runtime
 * and JAX"): gcc -O2 bench/gpa_probe.c -o gpa_probe -ldl && ./gpa_probe */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
typedef int (*gpa_t)(const char *, void **, int, unsigned long long, int *);
int main(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW);
  if (!h) {
    printf("probe: no libcuda: %s\n", dlerror());
    return 0;
  }
  gpa_t gpa = (gpa_t)dlsym(h, "cuGetProcAddress_v2");
  struct {
    const char *sym, *base;
    int ver, fl;
  } t[] = {{"cuMemcpyHtoD_v2", "cuMemcpyHtoD", 13000, 0},
           {"cuMemcpyHtoD_v2_ptds", "cuMemcpyHtoD", 13000, 2},
           {"cuMemcpyHtoDAsync_v2", "cuMemcpyHtoDAsync", 13000, 0},
           {"cuMemcpyHtoDAsync_v2_ptsz", "cuMemcpyHtoDAsync", 13000, 2},
           {"cuMemcpyDtoH_v2", "cuMemcpyDtoH", 3020, 0},
           {"cuMemcpy", "cuMemcpy", 4000, 0},
           {"cuMemcpyAsync", "cuMemcpyAsync", 4000, 0},
           {"cuLaunchKernel", "cuLaunchKernel", 4000, 0},
           {"cuLaunchKernelEx", "cuLaunchKernelEx", 11060, 0},
           {"cuStreamSynchronize", "cuStreamSynchronize", 2000, 0},
           {"cuCtxSynchronize", "cuCtxSynchronize", 2000, 0},
           {"cuCtxSynchronize_v2", "cuCtxSynchronize", 13000, 0},
           {"cuGetProcAddress_v2", "cuGetProcAddress", 12000, 0},
           {"cuGetProcAddress", "cuGetProcAddress", 11030, 0},
           {"cuMemcpyHtoD", "cuMemcpyHtoD", 3000, 0}};
  for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
    void *a = dlsym(h, t[i].sym), *b = NULL;
    int st = -1;
    int r = gpa(t[i].base, &b, t[i].ver, t[i].fl, &st);
    printf("probe %-28s dlsym %p gpa(%s,%d,%d) %p r=%d st=%d %s\n", t[i].sym, a, t[i].base,
           t[i].ver, t[i].fl, b, r, st, a == b ? "SAME" : "DIFFERENT");
  }
  return 0;
}
