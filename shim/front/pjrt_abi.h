/* pjrt_abi.h — the parts of PJRT's C API (xla/pjrt/c/pjrt_c_api.h, major version 0) that pjrt.c
 * touches, and its tests with it: the function table that GetPjrtApi returns, and the arguments of
 * PJRT_Client_Create and PJRT_Error_Destroy.  Major version 0 only appends fields, so these
 * offsets hold for every minor version; the asserts pin them to the header's. */
#ifndef PW_PJRT_ABI_H
#define PW_PJRT_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pj_version {
  size_t struct_size;
  void *priv;
  int major_version, minor_version;
} pj_version;

enum { PJ_STRING = 0, PJ_INT64 = 1, PJ_INT64_LIST = 2, PJ_FLOAT = 3, PJ_BOOL = 4 };

typedef struct pj_named_value {
  size_t struct_size;
  void *priv;
  const char *name;
  size_t name_size;
  int type; /* PJ_* */
  union {
    const char *string_value;
    int64_t int64_value;
    const int64_t *int64_array_value;
    float float_value;
    bool bool_value;
  };
  size_t value_size; /* elements of a list or string, 1 for a scalar */
} pj_named_value;

typedef struct pj_create_args {
  size_t struct_size;
  void *priv;
  pj_named_value *create_options;
  size_t num_options;
  void *kv_get_callback, *kv_get_user_arg, *kv_put_callback, *kv_put_user_arg;
  void *client; /* out */
} pj_create_args;

typedef struct pj_error_destroy_args {
  size_t struct_size;
  void *priv;
  void *error;
} pj_error_destroy_args;

typedef void *(*pj_fn)(void *args); /* every PJRT function: its args struct in, an error out */

typedef struct pj_api {
  size_t struct_size;
  void *extension_start;
  pj_version pjrt_api_version;
  pj_fn fns[]; /* PJRT_Error_Destroy, PJRT_Error_Message, ... in the header's order */
} pj_api;

enum { PJ_FN_ERROR_DESTROY = 0, PJ_FN_CLIENT_CREATE = 10 };

#if UINTPTR_MAX == UINT64_MAX
_Static_assert(offsetof(pj_api, fns) + PJ_FN_CLIENT_CREATE * sizeof(pj_fn) == 120,
               "PJRT_Api.PJRT_Client_Create");
_Static_assert(sizeof(pj_named_value) == 56, "PJRT_NamedValue");
_Static_assert(offsetof(pj_create_args, client) == 64, "PJRT_Client_Create_Args.client");
#endif

#endif
