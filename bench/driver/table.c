/* See table.h. */
#include "bench/driver/table.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/support/fit.h"

#define MAX_GROUP 512 /* lines of one dataset (runs x splits x repeats) */

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

/* The field of a line: "a", or a path into its objects ("info.a",
 * "predict_us.p50"). */
static const json_t *field(const json_t *rec, const char *name)
{
    char path[128];
    snprintf(path, sizeof path, "%s", name);
    const json_t *v = rec;
    for (char *p = path; p != NULL && v != NULL;) {
        char *dot = strchr(p, '.');
        if (dot != NULL)
            *dot = '\0';
        v = json_object_get(v, p);
        p = dot != NULL ? dot + 1 : NULL;
    }
    return v;
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
                      const char *fmt, const char *std_fmt)
{
    const json_t *first = field(recs[0], name);
    if (json_is_object(first)) {
        /* a whole object (e.g. {info}): as "key value, key value" */
        const char *key;
        json_t *v;
        const char *sep = "";
        json_object_foreach((json_t *)first, key, v)
        {
            if (json_is_number(v))
                fprintf(out, "%s%s %.6g", sep, key, json_number_value(v));
            else
                fprintf(out, "%s%s %s", sep, key, json_is_string(v) ? json_string_value(v) : "—");
            sep = ", ";
        }
        return;
    }
    if (json_is_string(first) || json_is_boolean(first) || first == NULL) {
        /* texts: the first line's (auto's choice is one per fit) */
        /* absent: "—", as for a number that is not finite */
        fputs(json_is_string(first) ? json_string_value(first)
              : json_is_boolean(first) ? (json_is_true(first) ? "true" : "false")
                                       : "—",
              out);
        return;
    }
    double x[MAX_GROUP], ms[2];
    int finite = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *v = field(recs[i], name);
        x[i] = json_is_number(v) ? json_number_value(v) : NAN;
        finite |= isfinite(x[i]);
    }
    if (strcmp(std_fmt, "each") == 0) {
        /* every line's value, e.g. the alpha chosen on each split */
        for (size_t i = 0; i < n && finite; i++) {
            fputs(i > 0 ? " " : "", out);
            put_number(out, fmt, x[i]);
        }
        return;
    }
    gp_bench_mean_std(x, n, ms);
    put_number(out, fmt, ms[0]);
    if (n > 1 && isfinite(ms[0]) && strcmp(std_fmt, "none") != 0) {
        fputs(" ± ", out);
        put_number(out, std_fmt, ms[1]);
    }
}

/* The cell template over the lines recs[0..n) (the lines that fitted, of
 * n_all: {n_ok} and {n_all} write the two counts). */
static void put_cell(FILE *out, const char *tmpl, json_t *const *recs, size_t n, size_t n_all)
{
    for (const char *p = tmpl; *p != '\0';) {
        const char *close = *p == '{' ? strchr(p, '}') : NULL;
        if (close == NULL) {
            fputc(*p++, out);
            continue;
        }
        char spec[128];
        snprintf(spec, sizeof spec, "%.*s", (int)(close - p - 1), p + 1);
        /* {name}, {name:fmt} or {name:fmt:fmt of the std} */
        char *colon = strchr(spec, ':');
        char *second = colon != NULL ? strchr(colon + 1, ':') : NULL;
        if (colon != NULL)
            *colon = '\0';
        if (second != NULL)
            *second = '\0';
        const char *fmt = colon != NULL ? colon + 1 : "%.6g";
        if (strcmp(spec, "n_ok") == 0 || strcmp(spec, "n_all") == 0)
            fprintf(out, "%zu", spec[2] == 'o' ? n : n_all);
        else
            put_field(out, recs, n, spec, fmt, second != NULL ? second + 1 : fmt);
        p = close + 1;
    }
}

/* The column-group value text of a line ("" when the run has none, or an
 * option taken from another run that never resolved). A number is written
 * as %.6g, so 500 and 500.0 (an option resolved from diag.info) agree. */
static void group_of(const json_t *rec, const char *by, char *buf, size_t len)
{
    const json_t *v = by != NULL ? json_object_get(json_object_get(rec, "options"), by) : NULL;
    if (json_is_number(v)) {
        snprintf(buf, len, "%.6g", json_number_value(v));
        return;
    }
    char *s = v != NULL && !json_is_object(v) ? json_dumps(v, JSON_ENCODE_ANY) : NULL;
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

/* The lines of recs[0..n) that fitted into good; their count. */
static size_t fitted(json_t *const *recs, size_t n, json_t **good)
{
    size_t g = 0;
    for (size_t i = 0; i < n; i++)
        if (json_is_true(json_object_get(recs[i], "ok")))
            good[g++] = recs[i];
    return g;
}

/* The first error of recs[0..n). */
static const char *first_error(json_t *const *recs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!json_is_true(json_object_get(recs[i], "ok")))
            return json_string_value(json_object_get(recs[i], "error"));
    return "";
}

/* The cells of one row in one column group: the figures over the lines
 * that fitted; when none did, the first error. */
static void put_group_cells(FILE *out, const json_t *cells, json_t *const *recs, size_t n)
{
    json_t *good[MAX_GROUP];
    size_t ok = fitted(recs, n, good);
    size_t ci;
    json_t *c;
    json_array_foreach(cells, ci, c)
    {
        fputc(' ', out);
        if (n == 0)
            fputs(ci == 0 ? "not run" : "", out);
        else if (ok == 0)
            fputs(ci == 0 ? first_error(recs, n) : "", out);
        else
            put_cell(out, json_string_value(json_object_get(c, "format")), good, ok, n);
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
    json_array_foreach(recs, i, rec)
    {
        /* every split once, in order of first appearance (peers' lines repeat them) */
        size_t j;
        json_t *seen;
        int dup = 0;
        json_array_foreach(splits, j, seen) dup |= json_equal(seen, json_object_get(rec, "split"));
        if (!dup)
            json_array_append(splits, json_object_get(rec, "split"));
    }
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

/* The dataset entry of exp named name (its reference figures). */
static const json_t *dataset_entry(const json_t *exp, const char *name)
{
    size_t i;
    json_t *ds;
    json_array_foreach(json_object_get(exp, "datasets"), i, ds) if (
        strcmp(json_string_value(json_object_get(ds, "name")), name) == 0) return ds;
    return NULL;
}

/* The lines of recs for which key (a string field) is value, and whose split
 * is listed in splits (when splits is not NULL), into sel[0..MAX_GROUP). */
static size_t select_lines(const json_t *recs, const char *key, const char *value,
                           const json_t *splits, json_t **sel)
{
    size_t n = 0, i, j;
    json_t *rec, *k;
    json_array_foreach(recs, i, rec)
    {
        if (n == MAX_GROUP || strcmp(json_string_value(json_object_get(rec, key)), value) != 0)
            continue;
        int listed = splits == NULL;
        json_array_foreach(splits, j, k) listed |= json_equal(k, json_object_get(rec, "split"));
        if (listed)
            sel[n++] = rec;
    }
    return n;
}

/* One cell of the datasets layout: the figure over the splits, "[i/K ok]"
 * when some failed, the reference figure in parentheses. */
static void put_dataset_cell(FILE *out, const json_t *tab, json_t *const *sel, size_t n,
                             const json_t *ref, const char *label)
{
    json_t *good[MAX_GROUP];
    size_t ok = fitted(sel, n, good);
    fputc(' ', out);
    if (n == 0)
        fputs("not run", out);
    else if (ok == 0)
        fputs(first_error(sel, n), out);
    else
        put_cell(out, json_string_value(json_object_get(tab, "cell")), good, ok, n);
    if (ok > 0 && ok < n)
        fprintf(out, " [%zu/%zu ok]", ok, n);
    const json_t *r = json_object_get(ref, label);
    if (json_is_string(r))
        fprintf(out, " (%s)", json_string_value(r));
    fputs(" |", out);
}

/* The header of the datasets layout: a column's label gets the table's
 * reference_suffix when some dataset has a reference figure for it. */
static void put_dataset_header(FILE *out, const json_t *exp, const json_t *tab,
                               const json_t *cols, const json_t *names)
{
    const char *ref_key = json_string_value(json_object_get(tab, "reference"));
    const char *suffix = json_string_value(json_object_get(tab, "reference_suffix"));
    const json_t *lead = json_object_get(tab, "lead"), *trail = json_object_get(tab, "trail");
    size_t i, j;
    json_t *c, *name;
    fprintf(out, "## %s\n\n| dataset |", json_string_value(json_object_get(tab, "title")));
    json_array_foreach(lead, i, c) fprintf(out, " %s |", json_string_value(json_object_get(c, "label")));
    json_array_foreach(cols, i, c)
    {
        int has_ref = 0;
        json_array_foreach(names, j, name)
        {
            const json_t *entry = dataset_entry(exp, json_string_value(name));
            has_ref |= ref_key != NULL && json_object_get(json_object_get(entry, ref_key),
                                                          json_string_value(c)) != NULL;
        }
        fprintf(out, " %s%s |", json_string_value(c), has_ref && suffix ? suffix : "");
    }
    json_array_foreach(trail, i, c) fprintf(out, " %s |", json_string_value(json_object_get(c, "label")));
    fputs("\n|---|", out);
    for (i = 0; i < json_array_size(lead) + json_array_size(cols) + json_array_size(trail); i++)
        fputs("---:|", out);
    fputc('\n', out);
}

/* One row of the datasets layout: the lines sel[0..n) of one dataset. */
static void put_dataset_row(FILE *out, const json_t *tab, const char *name, json_t *const *sel,
                            size_t n, const json_t *cols, const json_t *ref)
{
    json_t *rows = json_array();
    for (size_t j = 0; j < n; j++)
        json_array_append(rows, sel[j]);
    fprintf(out, "| %s |", name);
    size_t j;
    json_t *c;
    json_array_foreach(json_object_get(tab, "lead"), j, c)
    {
        fputc(' ', out);
        put_cell(out, json_string_value(json_object_get(c, "format")), sel, 1, 1);
        fputs(" |", out);
    }
    json_array_foreach(cols, j, c)
    {
        json_t *cell[MAX_GROUP];
        size_t m = select_lines(rows, "label", json_string_value(c), NULL, cell);
        put_dataset_cell(out, tab, cell, m, ref, json_string_value(c));
    }
    json_array_foreach(json_object_get(tab, "trail"), j, c)
    {
        const json_t *r = json_object_get(ref, json_string_value(json_object_get(c, "reference")));
        fprintf(out, " %s |", json_is_string(r) ? json_string_value(r) : "");
    }
    fputc('\n', out);
    json_decref(rows);
}

/* A table with a row per dataset and a column per run label ("layout":
 * "datasets"): "lead" columns from the first line of the row, the labels
 * ("columns", default every label), "trail" columns from the dataset
 * entry's reference object; "splits" restricts the lines. */
static void put_by_dataset(FILE *out, const json_t *exp, const json_t *tab, const json_t *all)
{
    const char *ref_key = json_string_value(json_object_get(tab, "reference"));
    json_t *cols = json_deep_copy(json_object_get(tab, "columns"));
    if (cols == NULL)
        cols = distinct(all, "label", NULL);
    json_t *names = distinct(all, "dataset", NULL);
    put_dataset_header(out, exp, tab, cols, names);
    size_t i;
    json_t *name;
    json_array_foreach(names, i, name)
    {
        const char *nm = json_string_value(name);
        json_t *sel[MAX_GROUP];
        size_t n = select_lines(all, "dataset", nm, json_object_get(tab, "splits"), sel);
        const json_t *ref =
            ref_key != NULL ? json_object_get(dataset_entry(exp, nm), ref_key) : NULL;
        if (n > 0)
            put_dataset_row(out, tab, nm, sel, n, cols, ref);
    }
    const char *note = json_string_value(json_object_get(tab, "note"));
    if (note != NULL)
        fprintf(out, "\n%s\n", note);
    fputc('\n', out);
    json_decref(names);
    json_decref(cols);
}

/* A table with a section per dataset (the default layout). */
static void put_by_section(FILE *out, const json_t *tab, const json_t *all)
{
    const char *title = json_string_value(json_object_get(tab, "title"));
    if (title != NULL)
        fprintf(out, "## %s\n\n", title);
    json_t *names = distinct(all, "dataset", NULL);
    const json_t *only = json_object_get(tab, "datasets");
    size_t i;
    json_t *name;
    json_array_foreach(names, i, name)
    {
        json_t *sel[MAX_GROUP];
        size_t k;
        json_t *v;
        int wanted = only == NULL;
        json_array_foreach(only, k, v) wanted |= json_equal(v, name);
        if (!wanted)
            continue;
        size_t n = select_lines(all, "dataset", json_string_value(name), NULL, sel);
        json_t *recs = json_array();
        for (size_t j = 0; j < n; j++)
            json_array_append(recs, sel[j]);
        put_dataset(out, tab, recs);
        json_decref(recs);
    }
    json_decref(names);
}

int gpb_table(const json_t *exp, const char *exp_path, const char *results_path, FILE *out)
{
    json_t *all = read_lines(results_path);
    if (all == NULL)
        return -1;
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
    json_t *tables = json_deep_copy(json_object_get(exp, "tables"));
    if (tables == NULL) {
        tables = json_array();
        json_array_append(tables, json_object_get(exp, "table"));
    }
    size_t i;
    json_t *tab;
    json_array_foreach(tables, i, tab)
    {
        const char *layout = json_string_value(json_object_get(tab, "layout"));
        if (layout != NULL && strcmp(layout, "datasets") == 0)
            put_by_dataset(out, exp, tab, all);
        else
            put_by_section(out, tab, all);
    }
    json_decref(tables);
    json_decref(all);
    return 0;
}
