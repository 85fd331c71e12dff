/* front.c — the state the two front ends share (front.h): the mode, the engine, the per-thread
 * depth and sync-elision state.  The top file (pinwheel.c) sets them at init and resets the
 * elided stream in a forked child; the wrappers read them on every call.
 *
 * Must never: hold code (the wrappers' bodies are front.h's inline functions and macros).
 */
#include "front.h"

atomic_int pw_ready;
int pw_mode = PW_MODE_OBSERVE;
int pw_sync_mode = PW_SYNC_KEEP;
pw_engine *pw_eng;
PW_TLS int pw_depth;
PW_TLS void *pw_elide_stream;
PW_TLS int pw_elide_device;
atomic_int pw_mapped_seen;
