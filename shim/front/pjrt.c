/* pjrt.c — JAX's CUDA plugin: ask XLA not to stage its host-to-device copies, so they reach the
 * driver from pageable memory and pinwheel's pipelined engine stages them.
 * Owns: the copy of the plugin's PJRT_Api table it hands out, and its PJRT_Client_Create.
 * Must never: change anything but that one option; touch a table or client of another platform;
 * initialise pinwheel before the client is created (the first CUDA use).
 * How it works: the comment below.
 */

/* XLA's GPU client copies every numpy array into pinned memory of its own (one memcpy, on one
 * thread), then starts the DMA and waits for it: copy-in and DMA one after the other, never
 * overlapped (see README, "JAX").  Its PJRT plugin takes a client option that turns that off,
 * `should_stage_host_to_device_transfers`; JAX never sets it (no environment variable reaches it).
 * JAX loads the plugin with dlopen and takes `GetPjrtApi` with dlsym, which the shim defines
 * (drv.c): for a library whose path names CUDA, dlsym answers with pw_pjrt_get_api below, which
 * hands out a copy of the plugin's PJRT_Api table whose PJRT_Client_Create adds the option
 * (false) — in stage mode, for a client whose platform is CUDA, when the program did not set the
 * option itself.  In any other mode dlsym hands out the plugin's own GetPjrtApi (XLA's own staging,
 * slower where measured: docs/RESULTS.md, "JAX: XLA's own staging off").  Should the plugin refuse
 * it, the client is created again with the program's options unchanged (one warning).
 *
 * The layout is PJRT's C API (pjrt_abi.h: xla/pjrt/c/pjrt_c_api.h, major version 0), whose fields
 * are only ever appended: PJRT_Client_Create is the eleventh function of PJRT_Api.  A table of any
 * other major version, or too short, is handed out untouched.
 */
#define _GNU_SOURCE
#include "front.h"
#include "pjrt_abi.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char k_option[] = "should_stage_host_to_device_transfers";

/* No locks (a forked child could inherit one held): each piece is published once, by a
 * compare-and-swap, and never changes after. */
static void *_Atomic real_get_api; /* the CUDA plugin's GetPjrtApi */
typedef struct pj_copy {
  const pj_api *from; /* the plugin's table */
  pj_fn create;       /* its PJRT_Client_Create */
  pj_api *table;      /* the copy handed out */
} pj_copy;
static pj_copy *_Atomic copied;

/* The program's option `name`, or NULL. */
static const pj_named_value *option(const pj_create_args *a, const char *name) {
  size_t n = strlen(name);
  for (size_t i = 0; i < a->num_options; i++) {
    const pj_named_value *v = &a->create_options[i];
    if (v->name && v->name_size == n && !memcmp(v->name, name, n)) return v;
  }
  return NULL;
}

/* Whether the program names a platform other than CUDA. */
static int not_cuda(const pj_create_args *a) {
  const pj_named_value *v = option(a, "platform_name");
  return v && v->type == PJ_STRING && v->string_value &&
         !(v->value_size == 4 && !strncasecmp(v->string_value, "cuda", 4));
}

static void *pjrt_client_create(void *argp) {
  pj_create_args *a = argp;
  const pj_copy *c = atomic_load_explicit(&copied, memory_order_acquire);
  pj_fn real_create = c->create; /* set before the copy that leads here was handed out */
  pw_init();                     /* the client's creation is the program's first CUDA use */
  if (pw_mode != PW_MODE_STAGE || !a ||
      a->struct_size < offsetof(pj_create_args, num_options) + sizeof a->num_options ||
      (a->num_options && !a->create_options) || a->num_options > 4096 || not_cuda(a))
    return real_create(argp);
  if (option(a, k_option)) {
    pw_log(PW_LOG_INFO, "the program sets %s itself: left as it is", k_option);
    return real_create(argp);
  }
  pj_named_value *opts = calloc(a->num_options + 1, sizeof *opts);
  if (!opts) return real_create(argp);
  if (a->num_options) memcpy(opts, a->create_options, a->num_options * sizeof *opts);
  pj_named_value *v = &opts[a->num_options];
  v->struct_size = sizeof *v;
  v->name = k_option;
  v->name_size = sizeof k_option - 1;
  v->type = PJ_BOOL;
  v->bool_value = false;
  v->value_size = 1;
  pj_named_value *saved = a->create_options;
  size_t saved_n = a->num_options;
  a->create_options = opts;
  a->num_options = saved_n + 1;
  void *err = real_create(argp);
  a->create_options = saved;
  a->num_options = saved_n;
  free(opts);
  if (!err) {
    pw_add(&pw_st.xla_unstaged_clients, 1);
    pw_log(PW_LOG_INFO, "XLA's CUDA client asked not to stage host-to-device copies");
    return NULL;
  }
  pj_error_destroy_args d = {.struct_size = sizeof d, .error = err};
  c->from->fns[PJ_FN_ERROR_DESTROY](&d);
  pw_log(PW_LOG_WARN,
         "XLA's CUDA plugin refused %s=false; it stages its copies itself "
         "(pinwheel still threads its memcpy)",
         k_option);
  return real_create(argp);
}

/* What dlsym hands out for the CUDA plugin's GetPjrtApi: a copy of its table with our
 * PJRT_Client_Create, made at the first call; the plugin's own table when it is not one this file
 * knows (another major version, too short) or when the plugin answers with another table. */
static const void *pw_pjrt_get_api(void) {
  void *(*get)(void) = NULL;
  *(void **)&get = atomic_load_explicit(&real_get_api, memory_order_acquire);
  const pj_api *api = get ? get() : NULL;
  if (!api) return api;
  const pj_copy *c = atomic_load_explicit(&copied, memory_order_acquire);
  if (c) return c->from == api ? c->table : api;
  if (api->pjrt_api_version.major_version != 0 ||
      api->struct_size < offsetof(pj_api, fns) + (PJ_FN_CLIENT_CREATE + 1) * sizeof(pj_fn) ||
      api->struct_size > 1 << 16 || !api->fns[PJ_FN_CLIENT_CREATE] ||
      !api->fns[PJ_FN_ERROR_DESTROY])
    return api;
  pj_copy *n = malloc(sizeof *n);
  pj_api *table = malloc(api->struct_size);
  if (!n || !table) {
    free(n), free(table);
    return api;
  }
  memcpy(table, api, api->struct_size);
  table->fns[PJ_FN_CLIENT_CREATE] = pjrt_client_create;
  *n = (pj_copy){.from = api, .create = api->fns[PJ_FN_CLIENT_CREATE], .table = table};
  pj_copy *none = NULL;
  if (atomic_compare_exchange_strong_explicit(&copied, &none, n, memory_order_acq_rel,
                                              memory_order_acquire))
    return table;
  free(table), free(n); /* another thread made it first */
  return none->from == api ? none->table : api;
}

/* Whether the environment leaves opt at `want` (both defaults are what the wrapper needs); read
 * without initialising pinwheel, which waits for the first CUDA use. */
static int env_is(pw_option_t opt, long long want) {
  const char *s = getenv(pw_option_name(opt));
  long long v;
  return !s || pw_option_parse(opt, s, &v) != 0 || v == want;
}

void *pw_pjrt_offer(void *p) {
  Dl_info info;
  if (!env_is(PW_OPT_MODE, PW_MODE_STAGE)) return p; /* off or observe: the plugin's own table */
  if (!p || !dladdr(p, &info) || !info.dli_fname) return p;
  const char *base = strrchr(info.dli_fname, '/');
  base = base ? base + 1 : info.dli_fname;
  if (!strstr(base, "cuda")) return p; /* JAX's xla_cuda_plugin.so; not ROCm's, TPU's, CPU's */
  void *have = NULL;
  if (!atomic_compare_exchange_strong_explicit(&real_get_api, &have, p, memory_order_acq_rel,
                                               memory_order_acquire) &&
      have != p)
    return p; /* a second CUDA plugin: left alone */
  const void *(*w)(void) = pw_pjrt_get_api;
  return *(void **)&w;
}
