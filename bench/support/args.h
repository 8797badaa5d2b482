/* Benchmark support: the small command-line parsers the bench programs share. */
#ifndef GP_BENCH_ARGS_H
#define GP_BENCH_ARGS_H

#include <stddef.h>

/* The whole of s as a base-10 integer in [lo, hi] into *out; -1 otherwise. */
int gp_bench_parse_long(const char *s, long lo, long hi, long *out);
/* 1 when name is one of the comma-separated entries of list. */
int gp_bench_list_has(const char *list, const char *name);
/* use[i] = 1 for each of the n names listed in the comma-separated list, 0
 * for the others; -1 (with a message naming flag on stderr) on an entry
 * that is not one of the names. */
int gp_bench_parse_names(const char *list, const char *const *names, int n, int *use,
                         const char *flag);
/* The comma-separated integers of list, each in [lo, hi], into out[0..max)
 * (their count into *n); -1 on an empty, bad or out-of-range entry or more
 * than max of them. */
int gp_bench_parse_sizes(const char *list, long lo, long hi, size_t *out, size_t max, size_t *n);

#endif
