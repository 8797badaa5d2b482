/* See table.h. */
#include "bench/driver/table.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/support/fit.h"

#define MAX_GROUP 64

/* Every line of path as a JSON array; NULL with the reason on stderr. */
static json_t *read_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "gpbench: cannot open %s\n", path);
        return NULL;
    }
    json_t *all = json_array();
    char *line = NULL;
    size_t cap = 0;
    long no = 0;
    while (getline(&line, &cap, f) > 0) {
        no++;
        if (line[0] == '\n')
            continue;
        json_error_t jerr;
        json_t *rec = json_loads(line, 0, &jerr);
        if (rec == NULL) {
            fprintf(stderr, "gpbench: %s:%ld: %s\n", path, no, jerr.text);
            json_decref(all);
            all = NULL;
            break;
        }
        json_array_append_new(all, rec);
    }
    free(line);
    fclose(f);
    return all;
}

/* The field of a line: "a" or "info.a". */
static const json_t *field(const json_t *rec, const char *name)
{
    if (strncmp(name, "info.", 5) == 0)
        return json_object_get(json_object_get(rec, "info"), name + 5);
    return json_object_get(rec, name);
}

/* One number in fmt (a %d format rounds it). */
static void put_number(FILE *out, const char *fmt, double v)
{
    if (!isfinite(v))
        fputs("—", out);
    else if (strchr(fmt, 'd') != NULL)
        fprintf(out, fmt, (int)lround(v));
    else
        fprintf(out, fmt, v);
}

/* {name:fmt} over the lines recs[0..n): one value, or mean ± std. */
static void put_field(FILE *out, json_t *const *recs, size_t n, const char *name,
                      const char *fmt)
{
    const json_t *first = field(recs[0], name);
    if (json_is_string(first) || json_is_boolean(first) || first == NULL) {
        /* texts: the first line's (auto's choice is one per fit) */
        fputs(json_is_string(first) ? json_string_value(first)
              : json_is_boolean(first) ? (json_is_true(first) ? "true" : "false")
                                       : "",
              out);
        return;
    }
    double x[MAX_GROUP], ms[2];
    for (size_t i = 0; i < n; i++) {
        const json_t *v = field(recs[i], name);
        x[i] = json_is_number(v) ? json_number_value(v) : NAN;
    }
    gp_bench_mean_std(x, n, ms);
    put_number(out, fmt, ms[0]);
    if (n > 1) {
        fputs(" ± ", out);
        put_number(out, fmt, ms[1]);
    }
}

/* The cell template over the lines recs[0..n). */
static void put_cell(FILE *out, const char *tmpl, json_t *const *recs, size_t n)
{
    for (const char *p = tmpl; *p != '\0';) {
        const char *close = *p == '{' ? strchr(p, '}') : NULL;
        if (close == NULL) {
            fputc(*p++, out);
            continue;
        }
        char spec[128];
        snprintf(spec, sizeof spec, "%.*s", (int)(close - p - 1), p + 1);
        char *colon = strchr(spec, ':');
        if (colon != NULL)
            *colon = '\0';
        put_field(out, recs, n, spec, colon != NULL ? colon + 1 : "%.6g");
        p = close + 1;
    }
}

/* The column-group value text of a line ("" when the run has none). */
static void group_of(const json_t *rec, const char *by, char *buf, size_t len)
{
    const json_t *v = by != NULL ? json_object_get(json_object_get(rec, "options"), by) : NULL;
    char *s = v != NULL ? json_dumps(v, JSON_ENCODE_ANY) : NULL;
    snprintf(buf, len, "%s", s != NULL ? s : "");
    free(s);
}

/* Distinct values of key (a string of each line, or its group) in order. */
static json_t *distinct(const json_t *recs, const char *key, const char *by)
{
    json_t *seen = json_array();
    size_t i;
    json_t *rec;
    json_array_foreach(recs, i, rec)
    {
        char g[256];
        if (key != NULL)
            snprintf(g, sizeof g, "%s", json_string_value(json_object_get(rec, key)));
        else
            group_of(rec, by, g, sizeof g);
        if (key == NULL && g[0] == '\0')
            continue;
        int have = 0;
        size_t j;
        json_t *s;
        json_array_foreach(seen, j, s) have |= strcmp(json_string_value(s), g) == 0;
        if (!have)
            json_array_append_new(seen, json_string(g));
    }
    if (key == NULL && json_array_size(seen) == 0)
        json_array_append_new(seen, json_string(""));
    return seen;
}

/* The header lines of one table. */
static void put_header(FILE *out, const json_t *tab, const json_t *groups)
{
    const char *rh = json_string_value(json_object_get(tab, "row_header"));
    const char *cl = json_string_value(json_object_get(tab, "column_label"));
    const json_t *cells = json_object_get(tab, "cells");
    fprintf(out, "| %s |", rh != NULL ? rh : "run");
    size_t gi, ci;
    json_t *g, *c;
    json_array_foreach(groups, gi, g) json_array_foreach(cells, ci, c)
    {
        const char *label = json_string_value(json_object_get(c, "label"));
        const char *gv = json_string_value(g);
        if (ci == 0 && gv[0] != '\0' && cl != NULL) {
            const char *brace = strstr(cl, "{}");
            if (brace != NULL)
                fprintf(out, " %.*s%s%s %s |", (int)(brace - cl), cl, gv, brace + 2, label);
            else
                fprintf(out, " %s %s |", cl, label);
        } else {
            fprintf(out, " %s |", label);
        }
    }
    fputs("\n|", out);
    for (const char *p = rh != NULL ? rh : "run"; p != NULL; p = strstr(p + 1, " | "))
        fputs("---|", out);
    for (size_t i = 0; i < json_array_size(groups) * json_array_size(cells); i++)
        fputs("---:|", out);
    fputc('\n', out);
}

/* The cells of one row in one column group. */
static void put_group_cells(FILE *out, const json_t *cells, json_t *const *recs, size_t n)
{
    size_t ok = 0;
    for (size_t i = 0; i < n; i++)
        ok += json_is_true(json_object_get(recs[i], "ok"));
    size_t ci;
    json_t *c;
    json_array_foreach(cells, ci, c)
    {
        fputc(' ', out);
        if (n == 0)
            fputs(ci == 0 ? "not run" : "", out);
        else if (ok < n)
            fputs(ci == 0 ? json_string_value(json_object_get(recs[0], "error")) : "", out);
        else
            put_cell(out, json_string_value(json_object_get(c, "format")), recs, n);
        fputs(" |", out);
    }
}

/* The table of one dataset's lines. */
static void put_dataset(FILE *out, const json_t *tab, const json_t *recs)
{
    const json_t *r0 = json_array_get(recs, 0);
    const char *by = json_string_value(json_object_get(tab, "columns_by"));
    json_t *groups = distinct(recs, NULL, by), *labels = distinct(recs, "label", NULL);
    json_t *splits = json_array();
    size_t i;
    json_t *rec;
    json_array_foreach(recs, i, rec) if (json_array_size(splits) == 0 ||
                                         !json_equal(json_array_get(splits, json_array_size(splits) - 1),
                                                     json_object_get(rec, "split")))
        json_array_append(splits, json_object_get(rec, "split"));
    fprintf(out, "## %s\n\n%s split%s", json_string_value(json_object_get(r0, "dataset")),
            json_string_value(json_object_get(r0, "scheme")), json_array_size(splits) > 1 ? "s" : "");
    json_t *k;
    json_array_foreach(splits, i, k) fprintf(out, "%s%lld", i > 0 ? ", " : " ",
                                             (long long)json_integer_value(k));
    fprintf(out, ": N train %lld, N test %lld, d %lld.\n\n",
            (long long)json_integer_value(json_object_get(r0, "n_train")),
            (long long)json_integer_value(json_object_get(r0, "n_test")),
            (long long)json_integer_value(json_object_get(r0, "d")));
    put_header(out, tab, groups);
    size_t li, gi;
    json_t *label, *g;
    json_array_foreach(labels, li, label)
    {
        fprintf(out, "| %s |", json_string_value(label));
        json_array_foreach(groups, gi, g)
        {
            json_t *sel[MAX_GROUP];
            size_t n = 0;
            json_array_foreach(recs, i, rec)
            {
                char rg[256];
                group_of(rec, by, rg, sizeof rg);
                if (n < MAX_GROUP &&
                    strcmp(json_string_value(json_object_get(rec, "label")),
                           json_string_value(label)) == 0 &&
                    (rg[0] == '\0' || strcmp(rg, json_string_value(g)) == 0))
                    sel[n++] = rec;
            }
            put_group_cells(out, json_object_get(tab, "cells"), sel, n);
        }
        fputc('\n', out);
    }
    fputc('\n', out);
    json_decref(splits);
    json_decref(groups);
    json_decref(labels);
}

int gpb_table(const json_t *exp, const char *exp_path, const char *results_path, FILE *out)
{
    json_t *all = read_lines(results_path);
    if (all == NULL)
        return -1;
    const json_t *tab = json_object_get(exp, "table");
    int quick = json_is_true(json_object_get(json_array_get(all, 0), "quick"));
    fprintf(out,
            "<!-- generated: build/bench/gpbench run %s%s --out %s && build/bench/gpbench table "
            "%s %s -->\n\n",
            exp_path, quick ? " --quick" : "", results_path, exp_path, results_path);
    const char *title = json_string_value(json_object_get(exp, "title"));
    fprintf(out, "# %s\n\n", title != NULL ? title : json_string_value(json_object_get(exp, "name")));
    const char *about = json_string_value(json_object_get(exp, "description"));
    if (about != NULL)
        fprintf(out, "%s\n\n", about);
    json_t *names = distinct(all, "dataset", NULL);
    size_t i, j;
    json_t *name, *rec;
    json_array_foreach(names, i, name)
    {
        json_t *recs = json_array();
        json_array_foreach(all, j, rec) if (strcmp(json_string_value(json_object_get(rec, "dataset")),
                                                   json_string_value(name)) == 0)
            json_array_append(recs, rec);
        put_dataset(out, tab, recs);
        json_decref(recs);
    }
    json_decref(names);
    json_decref(all);
    return 0;
}
