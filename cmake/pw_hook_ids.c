/* Preprocessed (cc -E -P) by CMakeLists.txt into pw_hook_ids.def: one PW_HOOK_ID(name, class) for
 * each hook of shim/front/hooks.def (the runtime's), then of shim/front/drv_hooks.def (the
 * driver's), in their order.  Core (pw.h, stats.c) counts the hooks by these ids and names them in
 * the summary without including front's lists or any CUDA header. */
#define PW_HOOK(name, class, params, args, stream) PW_HOOK_ID(name, class)
#include "hooks.def"
#define PW_DRV_HOOK(name, class, params, args, stream, dir, base, version, pt)                     \
  PW_HOOK_ID(name, class)
#include "drv_hooks.def"
