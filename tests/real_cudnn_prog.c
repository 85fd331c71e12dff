/* real_cudnn_prog.c — the toolkit's own cuDNN 9 (when it has one) under the shim: its libcudnn.so.9
 * is a dispatcher that looks each function up in libcudnn_graph.so.9 with dlsym on a handle, which
 * the shim's dlsym sees.  Opened as argv[1] into the global scope, cudnnCreate and
 * cudnnQueryRuntimeError taken as a linked program's calls bind (the shim's first), called, their
 * statuses printed: the same with and without the shim (no GPU needed: without one cudnnCreate
 * fails, after the dispatcher's lookup).  The test (tests/CMakeLists.txt) compares the two. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv) {
  void *lib = argc > 1 ? dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL) : NULL;
  if (!lib) {
    printf("real_cudnn_prog: %s\n", dlerror());
    return 2;
  }
  int (*create)(void **);
  int (*query)(void *, int *, int, void *);
  *(void **)&create = dlsym(RTLD_DEFAULT, "cudnnCreate");
  *(void **)&query = dlsym(RTLD_DEFAULT, "cudnnQueryRuntimeError");
  if (!create || !query) return 3;
  void *handle = NULL;
  int st = -1, c = create(&handle);
  int q = query(c == 0 ? handle : NULL, &st, 0, NULL);
  printf("cudnnCreate %d, cudnnQueryRuntimeError %d\n", c, q);
  return 0;
}
