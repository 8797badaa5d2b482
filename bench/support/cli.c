/* See cli.h. */
#include "bench/support/cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/support/args.h"

void gp_bench_cli_usage(const char *prog, const char *usage, const gp_bench_cli_option *opts,
                        size_t n)
{
    printf("usage: %s %s\n", prog, usage);
    for (size_t i = 0; i < n; i++) {
        const char *arg = opts[i].kind == GP_BENCH_CLI_FLAG ? "" : " V";
        printf("  --%s%-*s %s\n", opts[i].name, (int)(22 - strlen(opts[i].name)), arg,
               opts[i].help);
    }
}

static const gp_bench_cli_option *find_option(const gp_bench_cli_option *opts, size_t n,
                                              const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(opts[i].name, name) == 0)
            return &opts[i];
    return NULL;
}

/* The value of option o from text; 0, or -1 with a message. */
static int set_value(const char *prog, const gp_bench_cli_option *o, const char *text)
{
    if (o->kind == GP_BENCH_CLI_STRING) {
        *(const char **)o->dst = text;
        return 0;
    }
    if (o->kind == GP_BENCH_CLI_DOUBLE) {
        char *end = NULL;
        double v = strtod(text, &end);
        if (end != text && *end == '\0' && isfinite(v)) {
            *(double *)o->dst = v;
            return 0;
        }
        fprintf(stderr, "%s: --%s takes a number, not '%s'\n", prog, o->name, text);
        return -1;
    }
    if (gp_bench_parse_long(text, o->lo, o->hi, (long *)o->dst) == 0)
        return 0;
    fprintf(stderr, "%s: --%s takes an integer in [%ld, %ld], not '%s'\n", prog, o->name, o->lo,
            o->hi, text);
    return -1;
}

int gp_bench_cli_parse(int argc, char **argv, const gp_bench_cli_option *opts, size_t n,
                       const char *usage, const char **positional, size_t max_positional,
                       size_t *n_positional)
{
    const char *prog = argc > 0 ? argv[0] : "bench";
    *n_positional = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0) {
            if (*n_positional >= max_positional) {
                fprintf(stderr, "%s: unexpected argument '%s' (--help lists the options)\n",
                        prog, a);
                return 2;
            }
            positional[(*n_positional)++] = a;
            continue;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            gp_bench_cli_usage(prog, usage, opts, n);
            return 1;
        }
        const gp_bench_cli_option *o = find_option(opts, n, a + 2);
        if (o == NULL) {
            fprintf(stderr, "%s: unknown option '%s' (--help lists them)\n", prog, a);
            return 2;
        }
        if (o->kind == GP_BENCH_CLI_FLAG) {
            *(int *)o->dst = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "%s: %s needs a value\n", prog, a);
            return 2;
        }
        if (set_value(prog, o, argv[++i]) != 0)
            return 2;
    }
    return 0;
}
