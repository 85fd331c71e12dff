/* an_whatif.c — the what-if pass: from a trace of a program without pinwheel, its step time
 * under pinwheel (its defaults, which elide syncs, and with PINWHEEL_SYNC=keep), per device.
 *
 * Owns: the model below, per step (the whole trace is one step when it has no steps), and its
 * medians over the steps (an_report.whatif); its assumptions are the thresholds table's, and
 * which driver calls are queries is common/pw_driver_calls.h's list, the collector's own.
 * Must never: count the host's waiting for the GPU in syncs or in a copy it stages as host work,
 * or read another pass's output than the steps (op_step, steps) and the devices.
 */
#define _GNU_SOURCE
#include "an.h"

#include <stdlib.h>
#include <string.h>

#include "pw_driver_calls.h"

/* The model, per step:
 * - the host's part H is the host's own work in the step: its threads' busy time there when the
 *   trace has CPU operators (torch.profiler's cpu_op), else its CPU range; less the time it
 *   waited for the GPU in sync calls and in each eligible H2D copy's call before its DMA began
 *   (staged, a copy no longer waits for the stream's earlier work).  A waiting host is GPU time,
 *   which B holds: counted as host work it makes a GPU-bound step look host-bound.  A CPU range
 *   also holds time outside any operator, which varies from step to step; busy time does not.
 *   (A sync that drains the GPU makes the host's next work and the GPU's serial; max() below
 *   then misses the GPU's tail after the host's last launch: small on a launch-bound loop);
 * - the GPU's part B is the union of the step's operations on the device;
 * - each eligible pageable H2D copy (at least eligible_min_kib) stops blocking the host for the
 *   rest of its call and blocks it instead for bytes / h2d_gbps (the staging memcpy, and the DMA
 *   the program's sync then waits for; h2d_elide_gbps with elision, the default, where the sync
 *   that directly follows the copy on its thread is gone too, unless the trace shows the program
 *   allocating pinned or managed memory or launching host functions, which keep pinwheel's syncs
 *   real (DESIGN.md §2)); on the GPU its DMA leaves
 *   the step's stream and a device-to-device copy at d2d_gbps takes its place;
 * - each eligible D2H copy into pageable memory still waits for the GPU work before it (that
 *   waiting stays in H: what the host does next cannot overlap the work it waited for), then
 *   blocks the host for bytes / d2h_gbps; on the GPU its DMA runs at link_gbps;
 * - the step then takes max(H', B'): host-bound or GPU-bound.
 * Reported: the medians over steps, and the assumptions with their values (the thresholds
 * table). */

/* A call that only asks (the device, the last error, capture state, ...): pinwheel's collector
 * leaves these out (shim/collector/trace.c's quiet_runtime; of the driver's calls, every one
 * pw_driver_calls.h does not record), torch.profiler and nsys record them; between a copy and its
 * sync they are skipped, so every trace of one program gives the same answer.  A name matches
 * with or without a version suffix (_v3020, _ptsz). */
static int is_query(const an_trace *t, const an_call *c) {
  static const char *const q[] = {"cudaGetDevice",         "cudaGetDeviceCount",
                                  "cudaGetDeviceFlags",    "cudaDeviceGetAttribute",
                                  "cudaGetLastError",      "cudaPeekAtLastError",
                                  "cudaDriverGetVersion",  "cudaRuntimeGetVersion",
                                  "cudaStreamIsCapturing", "cudaStreamGetCaptureInfo",
                                  "cudaStreamGetDevice"};
  if (c->api != AN_API_OTHER) return 0;
  const char *n = an_name(t, c->name);
  if (!n) return 0;
  if (!strncmp(n, "cu", 2) && strncmp(n, "cuda", 4)) return !pw_driver_call_recorded(n);
  for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
    size_t l = strlen(q[i]);
    if (!strncmp(n, q[i], l) && (n[l] == 0 || n[l] == '_')) return 1;
  }
  return 0;
}

/* The sync on the same thread that directly follows a copy call (within 50 us, queries between
 * them skipped), if any. */
static int64_t call_start(const void *ctx, size_t i) {
  return ((const an_trace *)ctx)->calls[i].s;
}

static const an_call *sync_after(const an_trace *t, const an_call *c) {
  size_t lo = an_lower_bound(0, t->ncalls, c->e, call_start, t); /* calls are sorted by start */
  for (size_t i = lo; i < t->ncalls && t->calls[i].s - c->e <= 50000; i++)
    if (t->calls[i].tid == c->tid && !is_query(t, &t->calls[i]))
      return t->calls[i].api == AN_API_STREAM_SYNC ? &t->calls[i] : NULL;
  return NULL;
}

static int64_t rate_ns(uint64_t bytes, double gbps) { /* bytes / (GB/s) = ns */
  double v = (double)bytes / gbps;
  return v < 9e18 ? (int64_t)v : INT64_MAX / 4;
}

/* Whether pinwheel's default would keep the syncs after staged copies real: the trace shows the
 * program allocating or registering pinned or managed memory, or launching host functions (a
 * name matches with or without a version suffix).  Not the program's: pinwheel's own calls, and
 * what cudnnCreate allocates (the handle's error storage keeps no sync; the collector marks it). */
static int keeps_syncs(const an_trace *t) {
  static const char *const k[] = {
      "cudaHostAlloc",      "cudaMallocHost",        "cudaHostRegister", "cudaMallocManaged",
      "cudaLaunchHostFunc", "cudaStreamAddCallback", "cuMemHostAlloc",   "cuMemAllocHost",
      "cuMemHostRegister",  "cuMemAllocManaged",     "cuLaunchHostFunc", "cuStreamAddCallback"};
  for (size_t i = 0; i < t->ncalls; i++) {
    if (t->calls[i].pw || t->calls[i].cudnn) continue;
    const char *n = an_name(t, t->calls[i].name);
    if (!n || n[0] != 'c') continue;
    for (size_t j = 0; j < sizeof k / sizeof k[0]; j++) {
      size_t l = strlen(k[j]);
      if (!strncmp(n, k[j], l) && (n[l] == 0 || n[l] == '_')) return 1;
    }
  }
  return 0;
}

/* The part of a copy's call spent waiting for the GPU: from the call to its DMA's start. */
static int64_t copy_wait(const an_call *c, const an_op *o) {
  int64_t w = (o->s < c->e ? o->s : c->e) - c->s;
  return w > 0 ? w : 0;
}

/* H2D copies pinwheel stages (pageable to device, at least eligible_min_kib). */
static int staged_h2d(const an_op *o) {
  return o->type == AN_MEMCPY && o->ckind == AN_CK_H2D && o->srck == AN_MK_PAGEABLE &&
         o->dstk == AN_MK_DEVICE &&
         o->bytes >= (uint64_t)(an_threshold_value(AN_T_ELIGIBLE_MIN_KIB) * 1024);
}

/* When the host waited for the GPU, merged: the program's sync calls, and the calls of the
 * device's H2D copies that pinwheel stages up to their DMA (staged, a copy no longer waits for
 * the stream's earlier work: its DMA runs on pinwheel's side stream).  A step's waiting is its
 * cover of [cpu_s, cpu_e).  A D2H copy's waiting stays in H: it still waits under pinwheel, and
 * what the host does after it cannot overlap the work it waited for. */
static size_t host_waits(const an_report *r, int dev, an_iv *buf) {
  const an_trace *t = r->t;
  size_t n = 0;
  for (size_t i = 0; i < t->ncalls; i++) {
    const an_call *c = &t->calls[i];
    if (!c->pw && (c->api == AN_API_STREAM_SYNC || c->api == AN_API_DEVICE_SYNC ||
                   c->api == AN_API_EVENT_SYNC))
      buf[n++] = (an_iv){c->s, c->e};
  }
  for (size_t i = 0; i < t->nops; i++) {
    const an_op *o = &t->ops[i];
    if (o->dev != dev || !staged_h2d(o)) continue;
    const an_call *c = an_call_of(t, o->corr);
    if (!c || c->api != AN_API_MEMCPY) continue;
    int64_t w = copy_wait(c, o);
    if (w > 0) buf[n++] = (an_iv){c->s, c->s + w};
  }
  return an_union(buf, n);
}

/* Per step, the changes staging brings: host (every sync kept, syncs elided), GPU, the copies. */
typedef struct delta {
  int64_t hp, he, g, cph;
  uint64_t cc, cb, dc, db;
} delta;

static void copy_deltas(const an_report *r, int dev, delta *d, size_t ns) {
  const an_trace *t = r->t;
  uint64_t elig = (uint64_t)(an_threshold_value(AN_T_ELIGIBLE_MIN_KIB) * 1024);
  double r_h2d = an_threshold_value(AN_T_H2D_GBPS),
         r_h2de = an_threshold_value(AN_T_H2D_ELIDE_GBPS),
         r_d2h = an_threshold_value(AN_T_D2H_GBPS), r_link = an_threshold_value(AN_T_LINK_GBPS),
         r_d2d = an_threshold_value(AN_T_D2D_GBPS);
  for (size_t k = 0; k < t->nops; k++) {
    const an_op *o = &t->ops[k];
    if (o->dev != dev || o->type != AN_MEMCPY || o->bytes < elig) continue;
    long st = r->nsteps ? r->op_step[k] : 0;
    if (st < 0 || (size_t)st >= ns) continue;
    int h2d = o->ckind == AN_CK_H2D && o->srck == AN_MK_PAGEABLE && o->dstk == AN_MK_DEVICE;
    int d2h = o->ckind == AN_CK_D2H && o->srck == AN_MK_DEVICE && o->dstk == AN_MK_PAGEABLE;
    if (!h2d && !d2h) continue;
    const an_call *c = an_call_of(t, o->corr);
    if (!c) continue; /* host time unknown: not modelled */
    delta *x = &d[st];
    /* an H2D call's own work: its waiting for the GPU is out of H already (host_waits); a
     * D2H call still waits under pinwheel, so all of its time but that waiting is replaced */
    int64_t dur = c->e - c->s, own = dur - copy_wait(c, o), dma = o->e - o->s;
    an_sat_add(&x->cph, dur);
    if (h2d) {
      x->cc++, x->cb += o->bytes;
      x->hp += rate_ns(o->bytes, r_h2d) - own;
      x->he += rate_ns(o->bytes, r_h2de) - own;
      const an_call *sy = sync_after(t, c);
      if (sy) x->he -= sy->e - sy->s;
      x->g += rate_ns(o->bytes, r_d2d) - dma;
    } else {
      x->dc++, x->db += o->bytes;
      x->hp += rate_ns(o->bytes, r_d2h) - own;
      x->he += rate_ns(o->bytes, r_d2h) - own;
      x->g += rate_ns(o->bytes, r_link) - dma;
    }
  }
}

/* The host's work in [s, e): with CPU operators in the trace, the threads' busy time there,
 * summed (PyTorch's main thread waits while its autograd thread runs the backward pass: their
 * work is one chain) and at most the range; else the range. */
static int64_t busy_end(const void *ctx, size_t i) {
  return ((const an_trace *)ctx)->busy[i].e;
}

static int64_t host_work(const an_trace *t, int64_t s, int64_t e) {
  if (!t->nbusy) return e - s;
  int64_t sum = 0;
  size_t i = 0;
  while (i < t->nbusy) {
    size_t j = i;
    while (j < t->nbusy && t->busy[j].tid == t->busy[i].tid)
      j++;
    size_t lo = an_upper_bound(i, j, s, busy_end, t); /* the thread's first ending after s */
    for (size_t k = lo; k < j && t->busy[k].s < e; k++)
      sum += (t->busy[k].e < e ? t->busy[k].e : e) - (t->busy[k].s > s ? t->busy[k].s : s);
    i = j;
  }
  return sum < e - s ? sum : e - s;
}

static int64_t max0(int64_t v) {
  return v < 0 ? 0 : v;
}

static void whatif_dev(an_report *r, int i, delta *d, size_t ns, int64_t *v[7], an_iv *buf,
                       int elides) {
  an_whatif *w = &r->whatif[i];
  w->elides = elides;
  int dev = r->devs[i].dev;
  w->dev = dev;
  memset(d, 0, ns * sizeof *d);
  copy_deltas(r, dev, d, ns);
  size_t nw = host_waits(r, dev, buf);
  int64_t *base = v[0], *pred = v[1], *prede = v[2], *host = v[3], *gpu = v[4], *ch = v[5],
          *gp = v[6];
  size_t n = 0;
  for (size_t k = 0; k < ns; k++) {
    int64_t s, e, B, base_k;
    if (r->nsteps) {
      const an_stepdev *sd = &r->steps[k].devs[i];
      if (!sd->has) continue;
      s = r->steps[k].cpu_s, e = r->steps[k].cpu_e;
      base_k = sd->gpu, B = sd->busy;
    } else {
      s = r->devs[i].t0, e = r->devs[i].t1;
      base_k = r->devs[i].span, B = r->devs[i].busy;
    }
    int64_t H = max0(host_work(r->t, s, e) - an_cover(buf, nw, s, e));
    int64_t Hp = max0(H + d[k].hp), He = max0(H + d[k].he), G = max0(B + d[k].g);
    base[n] = base_k, host[n] = H, gpu[n] = B, ch[n] = d[k].cph, gp[n] = G;
    pred[n] = Hp > G ? Hp : G;  /* PINWHEEL_SYNC=keep */
    prede[n] = He > G ? He : G; /* the syncs after staged copies elided */
    w->copies += d[k].cc, w->bytes += d[k].cb, w->d2h_copies += d[k].dc, w->d2h_bytes += d[k].db;
    n++;
  }
  w->steps = (int)n;
  if (!n) return;
  w->baseline = an_median(base, n);
  w->host = an_median(host, n);
  w->gpu = an_median(gpu, n);
  w->copy_host = an_median(ch, n);
  w->predicted_keep = an_median(pred, n);
  w->predicted = elides ? an_median(prede, n) : w->predicted_keep;
  /* GPU-bound when the predicted step is (within 1 %) its predicted GPU part */
  int64_t g_med = an_median(gp, n);
  w->bound = g_med >= w->predicted - w->predicted / 100;
  w->speedup = w->predicted > 0 ? (double)w->baseline / (double)w->predicted : 0.0;
}

void an_pass_whatif(an_report *r) {
  const an_trace *t = r->t;
  r->whatif = calloc((size_t)r->ndevs + 1, sizeof *r->whatif);
  size_t ns = r->nsteps ? r->nsteps : 1;
  int64_t *v[7];
  for (int k = 0; k < 7; k++)
    v[k] = malloc(ns * sizeof *v[k]);
  delta *d = malloc(ns * sizeof *d);
  an_iv *buf = malloc((t->ncalls + t->nops + 1) * sizeof *buf);
  r->whatif_top = -1;
  int elides = !keeps_syncs(t);
  for (int i = 0; i < r->ndevs; i++) {
    whatif_dev(r, i, d, ns, v, buf, elides);
    const an_whatif *w = &r->whatif[i];
    r->whatif_any |= w->steps > 0 && (w->copies || w->d2h_copies);
    if (w->steps && (r->whatif_top < 0 || w->baseline > r->whatif[r->whatif_top].baseline))
      r->whatif_top = i;
  }
  for (int k = 0; k < 7; k++)
    free(v[k]);
  free(d), free(buf);
}
