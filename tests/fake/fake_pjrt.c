/* fake_pjrt.c — a PJRT plugin for the tests of pjrt.c: GetPjrtApi hands out a PJRT_Api table of
 * major version 0 (the layout of xla/pjrt/c/pjrt_c_api.h, functions up to PJRT_Client_Create and
 * a few past it) whose PJRT_Client_Create writes down the options it was given and returns a
 * client.  With FAKE_PJRT_REJECT set in the environment it refuses the staging option, as a plugin
 * that does not know it would ("unexpected option").  Built twice: as a CUDA plugin
 * (libxla_cuda_plugin.so) and as another platform's (libxla_other_plugin.so). */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct nv {
  size_t struct_size;
  void *priv;
  const char *name;
  size_t name_size;
  int type;
  union {
    const char *s;
    int64_t i;
    const int64_t *a;
    float f;
    bool b;
  };
  size_t value_size;
} nv;

typedef struct create_args {
  size_t struct_size;
  void *priv;
  nv *create_options;
  size_t num_options;
  void *kv_get, *kv_get_arg, *kv_put, *kv_put_arg;
  void *client; /* out */
} create_args;

typedef struct error_destroy_args {
  size_t struct_size;
  void *priv;
  void *error;
} error_destroy_args;

typedef void *(*fn)(void *);

static struct {
  size_t struct_size;
  void *extension_start;
  struct {
    size_t struct_size;
    void *priv;
    int major, minor;
  } version;
  fn fns[16];
} api;

static char seen[4096];
static int client_obj, error_obj, creates, destroyed;

static void *error_destroy(void *a) {
  error_destroy_args *d = a;
  if (d->error == &error_obj) destroyed++;
  return NULL;
}

static void *other(void *a) {
  (void)a;
  return NULL;
}

static void *client_create(void *argp) {
  create_args *a = argp;
  creates++;
  size_t o = 0;
  seen[0] = 0;
  for (size_t i = 0; i < a->num_options && o < sizeof seen - 200; i++) {
    const nv *v = &a->create_options[i];
    if (v->struct_size != sizeof *v) return &error_obj;
    o += (size_t)snprintf(seen + o, sizeof seen - o, "%s%.*s=", i ? " " : "", (int)v->name_size,
                          v->name);
    if (getenv("FAKE_PJRT_REJECT") && v->name_size == 37 &&
        !memcmp(v->name, "should_stage_host_to_device_transfers", 37))
      return &error_obj;
    switch (v->type) {
    case 0:
      o += (size_t)snprintf(seen + o, sizeof seen - o, "%.*s", (int)v->value_size, v->s);
      break;
    case 1:
      o += (size_t)snprintf(seen + o, sizeof seen - o, "%lld", (long long)v->i);
      break;
    case 4:
      o += (size_t)snprintf(seen + o, sizeof seen - o, "%s", v->b ? "true" : "false");
      break;
    default:
      o += (size_t)snprintf(seen + o, sizeof seen - o, "?");
      break;
    }
  }
  a->client = &client_obj;
  return NULL;
}

const void *GetPjrtApi(void) {
  api.struct_size = sizeof api;
  api.version.struct_size = sizeof api.version;
  api.version.major = getenv("FAKE_PJRT_MAJOR") ? atoi(getenv("FAKE_PJRT_MAJOR")) : 0;
  api.version.minor = 33;
  for (int i = 0; i < 16; i++)
    api.fns[i] = other;
  api.fns[0] = error_destroy;
  api.fns[10] = client_create;
  return &api;
}

/* For the test program: what the last PJRT_Client_Create saw, how many ran, errors destroyed,
 * and whether a client it returned is this plugin's. */
const char *fake_pjrt_seen(void) {
  return seen;
}
int fake_pjrt_creates(void) {
  return creates;
}
int fake_pjrt_destroyed(void) {
  return destroyed;
}
int fake_pjrt_is_client(void *c) {
  return c == &client_obj;
}
