/* Preprocessed (cc -E -P) by CMakeLists.txt into pw_hook_ids.def: one PW_HOOK_ID(name, class) for
 * each entry point shim/front/hooks.def wraps (the runtime's), then each shim/front/drv_hooks.def
 * wraps (the driver's), in their order; the other entry points that enqueue work (PW_ENQUEUE,
 * PW_DRV_ENQUEUE) have the class ENQUEUE.  Core (pw.h, stats.c) counts the hooks by these ids and
 * names them in the summary without including front's lists or any CUDA header. */
#define PW_HOOK(name, class, params, args, stream) PW_HOOK_ID(name, class)
#define PW_ENQUEUE(name, how, el, proto, params, args, stream) PW_HOOK_ID(name, ENQUEUE)
#include "hooks.def"
#define PW_DRV_HOOK(name, class, params, args, stream, dir, base, version, pt)                     \
  PW_HOOK_ID(name, class)
#define PW_DRV_ENQUEUE(name, how, el, proto, params, args, stream, base, version, pt)              \
  PW_HOOK_ID(name, ENQUEUE)
#include "drv_hooks.def"
