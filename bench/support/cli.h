/* Benchmark support: the one command-line parser of the bench programs.
 *
 * A program lists its options in a table (name, kind, where the value goes,
 * bounds, help); gp_bench_cli_parse fills them from argv, collects the
 * positional words, answers --help with a usage text built from the table,
 * and names the offending word on stderr for anything else. Values are
 * checked here (integers in [lo, hi]), so each program only reads fields. */
#ifndef GP_BENCH_CLI_H
#define GP_BENCH_CLI_H

#include <stddef.h>

typedef enum gp_bench_cli_kind {
    GP_BENCH_CLI_FLAG,   /* --name: *(int *)dst = 1 */
    GP_BENCH_CLI_STRING, /* --name VALUE: *(const char **)dst = VALUE */
    GP_BENCH_CLI_LONG,   /* --name N: *(long *)dst = N, lo <= N <= hi */
    GP_BENCH_CLI_DOUBLE  /* --name X: *(double *)dst = X, a finite number (the program checks its range) */
} gp_bench_cli_kind;

typedef struct gp_bench_cli_option {
    const char *name; /* without the leading "--" */
    gp_bench_cli_kind kind;
    void *dst;
    long lo, hi; /* GP_BENCH_CLI_LONG only */
    const char *help;
} gp_bench_cli_option;

/* Parse argv[1..argc) against opts[0..n). Words that do not start with "--"
 * go to positional[0..max_positional) (their count into *n_positional).
 * Returns 0 when the program should run, 1 after printing the usage (for
 * --help) to stdout, 2 after a message on stderr (unknown option, missing
 * or bad value, too many positional words). */
int gp_bench_cli_parse(int argc, char **argv, const gp_bench_cli_option *opts, size_t n,
                       const char *usage, const char **positional, size_t max_positional,
                       size_t *n_positional);

/* The usage line and one line per option, to stdout. */
void gp_bench_cli_usage(const char *prog, const char *usage, const gp_bench_cli_option *opts,
                        size_t n);

#endif
