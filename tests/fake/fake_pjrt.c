/* fake_pjrt.c — a PJRT plugin for the tests of pjrt.c: GetPjrtApi hands out a PJRT_Api table of
 * major version 0 (FAKE_PJRT_MAJOR overrides it) with functions up to PJRT_Client_Create and a few
 * past it, whose PJRT_Client_Create writes down the options it was given and returns a client.
 * With FAKE_PJRT_REJECT set in the environment it refuses the staging option, as a plugin that
 * does not know it would ("unexpected option").  Built twice: as a CUDA plugin
 * (libxla_cuda_plugin.so) and as another platform's (libxla_other_plugin.so). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pjrt_abi.h"

/* a table with room for the functions up to PJRT_Client_Create and a few past it */
static union {
  pj_api api;
  char room[sizeof(pj_api) + 16 * sizeof(pj_fn)];
} table;

static char seen[4096];
static int client_obj, error_obj, creates, destroyed;

static void *error_destroy(void *a) {
  pj_error_destroy_args *d = a;
  if (d->error == &error_obj) destroyed++;
  return NULL;
}

static void *other(void *a) {
  (void)a;
  return NULL;
}

static void *client_create(void *argp) {
  pj_create_args *a = argp;
  creates++;
  size_t o = 0;
  seen[0] = 0;
  for (size_t i = 0; i < a->num_options && o < sizeof seen - 200; i++) {
    const pj_named_value *v = &a->create_options[i];
    if (v->struct_size != sizeof *v) return &error_obj;
    o += (size_t)snprintf(seen + o, sizeof seen - o, "%s%.*s=", i ? " " : "", (int)v->name_size,
                          v->name);
    if (getenv("FAKE_PJRT_REJECT") && v->name_size == 37 &&
        !memcmp(v->name, "should_stage_host_to_device_transfers", 37))
      return &error_obj;
    if (v->type == PJ_STRING)
      o += (size_t)snprintf(seen + o, sizeof seen - o, "%.*s", (int)v->value_size, v->string_value);
    else if (v->type == PJ_INT64)
      o += (size_t)snprintf(seen + o, sizeof seen - o, "%lld", (long long)v->int64_value);
    else if (v->type == PJ_BOOL)
      o += (size_t)snprintf(seen + o, sizeof seen - o, "%s", v->bool_value ? "true" : "false");
    else
      o += (size_t)snprintf(seen + o, sizeof seen - o, "?");
  }
  a->client = &client_obj;
  return NULL;
}

const void *GetPjrtApi(void) {
  pj_api *api = &table.api;
  const char *major = getenv("FAKE_PJRT_MAJOR");
  api->struct_size = sizeof table;
  api->pjrt_api_version.struct_size = sizeof api->pjrt_api_version;
  api->pjrt_api_version.major_version = major ? atoi(major) : 0;
  api->pjrt_api_version.minor_version = 33;
  for (int i = 0; i < 16; i++)
    api->fns[i] = other;
  api->fns[PJ_FN_ERROR_DESTROY] = error_destroy;
  api->fns[PJ_FN_CLIENT_CREATE] = client_create;
  return api;
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
