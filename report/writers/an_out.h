/* an_out.h — what the output forms share: number formatting, the answer, the headline and the
 * steps line.
 *
 * Owns: the helpers an_out_common.c defines for the writers.  Included by the writers
 * (an_out_*.c) and nothing else: the command and the tests call the forms through an.h, where
 * their entry points and escaping (an_xml_escape, an_json_string) are declared.
 * Must never: declare a figure or compute one (the report holds them; an.h declares it).
 */
#ifndef PW_AN_OUT_H
#define PW_AN_OUT_H

#include "an.h"

#define AN_HOST_PID 1000000

/* "1.5 MiB"; buf of 32 */
const char *an_bytes_h(uint64_t v, char *buf);
/* "12.345" ms, or "unknown" when none of the copies had a runtime call */
const char *an_host_ms(int64_t ns, uint64_t copies, uint64_t unknown, char *buf);
/* The one-line headline of a report. */
void an_headline(FILE *f, const an_report *r);
/* Where the steps came from (marked, inferred, none) and the start-up and teardown left out. */
void an_steps_line(FILE *f, const an_report *r);
/* How the copies pinwheel staged were recognised in the trace (one sentence). */
const char *an_pw_how(const an_report *r);
/* The rank table of several traces (text and HTML): each column's spread over the rows
 * (an_totals.rank), the largest less the smallest. */
void an_rank_spread(an_report **r, int n, double *spread);
/* The kind of an op for people: "H2D pageable->device". */
void an_kind(char *buf, size_t n, uint8_t ck, uint8_t src, uint8_t dst);
/* A listed copy's kind: an_kind's, or "H2D staged by pinwheel" for a copy pinwheel staged (its
 * memory kinds are pinwheel's pinned buffers, not the program's pageable ones). */
void an_copy_kind(char *buf, size_t n, const an_exposed *x);
/* The answer block the text and HTML reports lead with (an_report.answer): hidden and exposed,
 * the one thing to do and its predicted effect; lines of text. */
void an_answer_lines(FILE *f, const an_report *r);

/* The what-if's assumptions, one paragraph (text and HTML). */
void an_whatif_assumptions(FILE *f, const char *indent);

#endif
