/* gpbench: an experiment's peers (bench/README.md), other libraries fitted
 * on the same rows by a script of their own.
 *
 * "peers": [{"name": N, "command": [argv...], "requires": "python module"}]:
 * each command runs from the repository root with {datasets} replaced by the
 * comma-separated names of the datasets this run covers, {splits} by the
 * split count of the first of them (the quick preset's when quick) and
 * {quick} by "--quick" or dropped; it writes one JSON object a line on
 * stdout (at least "dataset", "split", "label", "ok" and the scores), which
 * is written out with "experiment", "quick" and "peer": N added. A peer that
 * cannot run (its requirement missing, the command failing) is said on
 * stderr and leaves no line: the tables then show only our methods. */
#ifndef GP_BENCH_PEERS_H
#define GP_BENCH_PEERS_H

#include <jansson.h>
#include <stdio.h>

/* Run every peer of exp for datasets (the entries this run covers). 0, or
 * -1 when a peer failed (said on stderr). */
int gpb_run_peers(const json_t *exp, const json_t *datasets, int quick, FILE *out);

#endif
