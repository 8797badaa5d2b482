/* gpbench table: the markdown tables of an experiment from its JSON lines.
 *
 * The experiment's "table" object says how: "row_header" (the first
 * columns' header; a run's label fills them, " | " separating columns),
 * "columns_by" (an option whose values make column groups, e.g. features;
 * a run without that option repeats its cells in every group),
 * "column_label" ("{}" is the value) and "cells" (per group: "label" and a
 * "format" with {field} or {field:%fmt} taken from the lines, info.KEY for
 * the model's diag.info). Over several splits or repeats a number is
 * written as mean ± std (ddof 0). One table per dataset, in the order of
 * the lines; the first line of the output is the command that made it. */
#ifndef GP_BENCH_TABLE_H
#define GP_BENCH_TABLE_H

#include <jansson.h>
#include <stdio.h>

/* Read the lines of results_path and write the tables of exp to out; the
 * command written at the top names exp_path and results_path. 0, or -1 with
 * the reason on stderr. */
int gpb_table(const json_t *exp, const char *exp_path, const char *results_path, FILE *out);

#endif
