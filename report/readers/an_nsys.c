/* an_nsys.c — reader of Nsight Systems SQLite exports (`nsys export --type sqlite`).
 *
 * Owns: the queries of the export and the mapping of nsys's enums.  nsys numbers memory kinds
 * ENUM_CUDA_MEM_KIND 0 Pageable, 1 Pinned, 2 Device, 3 Array, 4 Managed, 5 Device Static,
 * 6 Managed Static, 7 Unknown — not CUPTI's raw numbering (0 Unknown, 1 Pageable, ...): this file
 * has its own table (DESIGN.md §5).  copyKind is ENUM_CUDA_MEMCPY_OPER: 1 HtoD, 2 DtoH, 8 DtoD,
 * 9 HtoH, 10 PtoP.
 * Must never: trust the input (a table may be missing or hold anything: every row is checked, and
 * bad input is an error message that names the file), or write to the database.
 */
#define _GNU_SOURCE
#include "an.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

static uint8_t nsys_mem_kind(int k) {
  switch (k) {
  case 0:
    return AN_MK_PAGEABLE;
  case 1:
    return AN_MK_PINNED;
  case 2:
  case 5:
    return AN_MK_DEVICE;
  case 3:
    return AN_MK_ARRAY;
  case 4:
  case 6:
    return AN_MK_MANAGED;
  default:
    return AN_MK_UNKNOWN;
  }
}

static uint8_t nsys_copy_kind(int k) {
  switch (k) {
  case 1:
    return AN_CK_H2D;
  case 2:
    return AN_CK_D2H;
  case 8:
    return AN_CK_D2D;
  case 9:
    return AN_CK_H2H;
  case 10:
    return AN_CK_P2P;
  default:
    return AN_CK_OTHER;
  }
}

/* A byte or count column: an integer in [0, 2^63).  -1 for anything else (a real beyond that,
 * a negative or fractional number, text): the README promises exit 2 for out-of-range numbers. */
static int col_count(sqlite3_stmt *q, int col, uint64_t *out) {
  switch (sqlite3_column_type(q, col)) {
  case SQLITE_NULL:
    *out = 0;
    return 0;
  case SQLITE_INTEGER: {
    sqlite3_int64 v = sqlite3_column_int64(q, col);
    if (v < 0) return -1;
    *out = (uint64_t)v;
    return 0;
  }
  case SQLITE_FLOAT: {
    double d = sqlite3_column_double(q, col);
    if (!(d >= 0 && d < 9.2e18) || d != (double)(uint64_t)d) return -1;
    *out = (uint64_t)d;
    return 0;
  }
  default:
    return -1;
  }
}

static int has_table(sqlite3 *db, const char *name) {
  sqlite3_stmt *q;
  int found = 0;
  if (sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", -1, &q,
                         NULL) == SQLITE_OK) {
    sqlite3_bind_text(q, 1, name, -1, SQLITE_STATIC);
    found = sqlite3_step(q) == SQLITE_ROW;
  }
  sqlite3_finalize(q);
  return found;
}

/* an add function's refusal, as this reader says it */
static int add_failed(an_trace *t, int rc, const char *table, char *err, size_t errn) {
  snprintf(err, errn, "%s: table %s has a row with %s", t->path, table, an_add_error(rc));
  return -1;
}

/* The file opened as SQLite and readable; -1 (err says why) if not. */
static int open_export(an_trace *t, sqlite3 **dbp, char *err, size_t errn) {
  sqlite3 *db = NULL;
  if (sqlite3_open_v2(t->path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
    snprintf(err, errn, "%s: cannot open as SQLite: %s", t->path, db ? sqlite3_errmsg(db) : "?");
    sqlite3_close(db);
    return -1;
  }
  /* a damaged file says so here, before "no such table" could be mistaken for the reason */
  char *emsg = NULL;
  int prc = sqlite3_exec(db, "SELECT count(*) FROM sqlite_master", NULL, NULL, &emsg);
  if (prc != SQLITE_OK) {
    snprintf(err, errn, "%s: a damaged SQLite file (%s): not readable as an nsys export", t->path,
             emsg ? emsg : sqlite3_errstr(prc));
    sqlite3_free(emsg);
    sqlite3_close(db);
    return -1;
  }
  *dbp = db;
  return 0;
}

/* One query over an activity table: the operations of one type. */
typedef struct op_query {
  const char *sql, *table;
  int type, enabled;
} op_query;

/* The type's own columns of one row (from column 5 on): its name, copy kinds and bytes. */
static int op_columns(an_trace *t, sqlite3_stmt *q, const op_query *qs, an_op *op, char *err,
                      size_t errn) {
  static const char *const ck_names[] = {"Memcpy",      "Memcpy HtoD", "Memcpy DtoH",
                                         "Memcpy DtoD", "Memcpy HtoH", "Memcpy PtoP"};
  if (qs->type == AN_KERNEL) {
    const unsigned char *nm = sqlite3_column_text(q, 5);
    op->name =
        nm ? an_intern(t, (const char *)nm, strlen((const char *)nm)) : an_intern(t, "kernel", 6);
    return 0;
  }
  if (qs->type == AN_MEMCPY) {
    op->ckind = nsys_copy_kind(sqlite3_column_int(q, 5));
    op->srck = nsys_mem_kind(sqlite3_column_int(q, 6));
    op->dstk = nsys_mem_kind(sqlite3_column_int(q, 7));
  }
  if (col_count(q, qs->type == AN_MEMCPY ? 8 : 5, &op->bytes)) {
    snprintf(err, errn, "%s: table %s has a byte count out of range", t->path, qs->table);
    return -1;
  }
  const char *nm = qs->type == AN_MEMCPY ? ck_names[op->ckind] : "Memset";
  op->name = an_intern(t, nm, strlen(nm));
  return 0;
}

static int read_op_table(an_trace *t, sqlite3 *db, const op_query *qs, char *err, size_t errn) {
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(db, qs->sql, -1, &q, NULL) != SQLITE_OK) {
    snprintf(err, errn, "%s: table %s lacks the columns of the nsys schema: %s", t->path, qs->table,
             sqlite3_errmsg(db));
    return -1;
  }
  int s;
  while ((s = sqlite3_step(q)) == SQLITE_ROW) {
    an_op op = {.s = sqlite3_column_int64(q, 0),
                .e = sqlite3_column_int64(q, 1),
                .dev = sqlite3_column_int(q, 2),
                .stream = sqlite3_column_int(q, 3),
                .corr = sqlite3_column_int64(q, 4),
                .type = (uint8_t)qs->type};
    sqlite3_int64 dev = sqlite3_column_int64(q, 2);
    if (dev != op.dev) op.dev = -1; /* did not fit: refused below */
    int arc = 0;
    if (op_columns(t, q, qs, &op, err, errn) || (arc = an_add_op(t, &op))) {
      if (arc) add_failed(t, arc, qs->table, err, errn);
      sqlite3_finalize(q);
      return -1;
    }
  }
  sqlite3_finalize(q);
  if (s != SQLITE_DONE) {
    snprintf(err, errn, "%s: reading %s failed: %s", t->path, qs->table, sqlite3_errmsg(db));
    return -1;
  }
  return 0;
}

/* The GPU operations: kernels, memcpys and memsets. */
static int read_ops(an_trace *t, sqlite3 *db, int strings, char *err, size_t errn) {
  int kernels = has_table(db, "CUPTI_ACTIVITY_KIND_KERNEL"),
      memcpys = has_table(db, "CUPTI_ACTIVITY_KIND_MEMCPY");
  if (!kernels && !memcpys) {
    snprintf(err, errn,
             "%s: SQLite, but not an nsys export with CUDA activity (no CUPTI_ACTIVITY_KIND_KERNEL "
             "or _MEMCPY table)",
             t->path);
    return -1;
  }
  op_query qs[] = {
      {strings ? "SELECT k.start, k.end, k.deviceId, k.streamId, k.correlationId, s.value FROM "
                 "CUPTI_ACTIVITY_KIND_KERNEL k LEFT JOIN StringIds s ON s.id = k.shortName"
               : "SELECT start, end, deviceId, streamId, correlationId, NULL FROM "
                 "CUPTI_ACTIVITY_KIND_KERNEL",
       "CUPTI_ACTIVITY_KIND_KERNEL", AN_KERNEL, kernels},
      {"SELECT start, end, deviceId, streamId, correlationId, copyKind, srcKind, dstKind, bytes "
       "FROM "
       "CUPTI_ACTIVITY_KIND_MEMCPY",
       "CUPTI_ACTIVITY_KIND_MEMCPY", AN_MEMCPY, memcpys},
      {"SELECT start, end, deviceId, streamId, correlationId, bytes FROM "
       "CUPTI_ACTIVITY_KIND_MEMSET",
       "CUPTI_ACTIVITY_KIND_MEMSET", AN_MEMSET, has_table(db, "CUPTI_ACTIVITY_KIND_MEMSET")},
  };
  for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++)
    if (qs[i].enabled && read_op_table(t, db, &qs[i], err, errn)) return -1;
  return 0;
}

/* The runtime calls, when the export has them and the strings that name them. */
static int read_calls(an_trace *t, sqlite3 *db, char *err, size_t errn) {
  sqlite3_stmt *q;
  /* globalTid (the host thread) is in every nsys schema that has this table; an export
   * without it still reads, with every call on one thread */
  if (sqlite3_prepare_v2(db,
                         "SELECT r.start, r.end, r.correlationId, s.value, r.globalTid FROM "
                         "CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId",
                         -1, &q, NULL) != SQLITE_OK &&
      sqlite3_prepare_v2(db,
                         "SELECT r.start, r.end, r.correlationId, s.value, 0 FROM "
                         "CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId",
                         -1, &q, NULL) != SQLITE_OK) {
    snprintf(err, errn,
             "%s: table CUPTI_ACTIVITY_KIND_RUNTIME lacks the columns of the nsys schema: %s",
             t->path, sqlite3_errmsg(db));
    return -1;
  }
  while (sqlite3_step(q) == SQLITE_ROW) {
    const unsigned char *nm = sqlite3_column_text(q, 3);
    if (!nm) continue;
    int64_t tid = sqlite3_column_int64(q, 4);
    an_call c = {.s = sqlite3_column_int64(q, 0),
                 .e = sqlite3_column_int64(q, 1),
                 .corr = sqlite3_column_int64(q, 2),
                 .tid = (int32_t)(tid & 0xffffff), /* nsys: pid << 24 | tid */
                 .name = an_intern(t, (const char *)nm, strlen((const char *)nm)),
                 .api = an_api_of((const char *)nm, strlen((const char *)nm))};
    int arc = an_add_call(t, &c);
    if (arc) {
      add_failed(t, arc, "CUPTI_ACTIVITY_KIND_RUNTIME", err, errn);
      sqlite3_finalize(q);
      return -1;
    }
  }
  sqlite3_finalize(q);
  return 0;
}

/* The steps: NVTX ranges named by --step-range, or ProfilerStep#. */
static int read_steps(an_trace *t, sqlite3 *db, int strings, char *err, size_t errn) {
  sqlite3_stmt *q;
  int ok = (strings && sqlite3_prepare_v2(db,
                                          "SELECT n.start, n.end, COALESCE(n.text, s.value) "
                                          "FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = "
                                          "n.textId WHERE n.end IS NOT NULL",
                                          -1, &q, NULL) == SQLITE_OK) ||
           sqlite3_prepare_v2(db, "SELECT start, end, text FROM NVTX_EVENTS WHERE end IS NOT NULL",
                              -1, &q, NULL) == SQLITE_OK;
  if (ok) {
    while (sqlite3_step(q) == SQLITE_ROW) {
      const char *txt = (const char *)sqlite3_column_text(q, 2);
      int num;
      if (!txt || !an_step_match(t, txt, strlen(txt), &num)) continue;
      an_step st = {.s = sqlite3_column_int64(q, 0), .e = sqlite3_column_int64(q, 1), .num = num};
      if (st.e < st.s) continue; /* an open range: not a step */
      int arc = an_add_step(t, &st);
      if (arc) {
        add_failed(t, arc, "NVTX_EVENTS", err, errn);
        sqlite3_finalize(q);
        return -1;
      }
    }
  }
  sqlite3_finalize(q);
  return 0;
}

int an_read_nsys(an_trace *t, char *err, size_t errn) {
  sqlite3 *db;
  if (open_export(t, &db, err, errn)) return -1;
  int strings = has_table(db, "StringIds");
  int rc = read_ops(t, db, strings, err, errn);
  if (!rc && strings && has_table(db, "CUPTI_ACTIVITY_KIND_RUNTIME"))
    rc = read_calls(t, db, err, errn);
  if (!rc && has_table(db, "NVTX_EVENTS")) rc = read_steps(t, db, strings, err, errn);
  sqlite3_close(db);
  return rc;
}
