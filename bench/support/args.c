/* Benchmark support: see args.h. */
#include "bench/support/args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gp_bench_parse_long(const char *s, long lo, long hi, long *out)
{
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int gp_bench_list_has(const char *list, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = list; p != NULL && *p != '\0';) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (n == len && strncmp(p, name, n) == 0)
            return 1;
        p = comma ? comma + 1 : NULL;
    }
    return 0;
}

int gp_bench_parse_names(const char *list, const char *const *names, int n, int *use,
                         const char *flag)
{
    for (int i = 0; i < n; i++)
        use[i] = gp_bench_list_has(list, names[i]);
    for (const char *p = list; p != NULL && *p != '\0';) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        int known = 0;
        for (int i = 0; i < n && !known; i++)
            known = strlen(names[i]) == len && strncmp(p, names[i], len) == 0;
        if (!known && len > 0) {
            fprintf(stderr, "bad %s entry '%.*s'\n", flag, (int)len, p);
            return -1;
        }
        p = comma ? comma + 1 : NULL;
    }
    return 0;
}

int gp_bench_parse_sizes(const char *list, long lo, long hi, size_t *out, size_t max, size_t *n)
{
    *n = 0;
    for (const char *p = list; *p != '\0';) {
        char buf[32];
        size_t len = strcspn(p, ",");
        long v;
        if (len == 0 || len >= sizeof buf || *n == max)
            return -1;
        memcpy(buf, p, len);
        buf[len] = '\0';
        if (gp_bench_parse_long(buf, lo, hi, &v) != 0)
            return -1;
        out[(*n)++] = (size_t)v;
        p += len + (p[len] == ',');
    }
    return *n > 0 ? 0 : -1;
}
