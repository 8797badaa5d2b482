/* See experiment.h. */
#include "bench/driver/experiment.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/support/args.h"

json_t *gpb_experiment_load(const char *path)
{
    json_error_t jerr;
    json_t *exp = json_load_file(path, 0, &jerr);
    if (exp == NULL) {
        fprintf(stderr, "gpbench: %s:%d: %s\n", path, jerr.line, jerr.text);
        return NULL;
    }
    const char *why = NULL;
    if (!json_is_object(exp))
        why = "not a JSON object";
    else if (!json_is_string(json_object_get(exp, "name")))
        why = "\"name\" (a string) is missing";
    else if (!json_is_array(json_object_get(exp, "datasets")))
        why = "\"datasets\" (an array) is missing";
    else if (!json_is_array(json_object_get(exp, "runs")))
        why = "\"runs\" (an array) is missing";
    if (why != NULL) {
        fprintf(stderr, "gpbench: %s: %s\n", path, why);
        json_decref(exp);
        return NULL;
    }
    return exp;
}

/* 1 when the string array a holds s. */
static int array_has_string(const json_t *a, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v) if (json_is_string(v) && strcmp(json_string_value(v), s) == 0)
        return 1;
    return 0;
}

json_t *gpb_experiment_datasets(const json_t *exp, int quick, const char *only)
{
    const json_t *q = json_object_get(exp, "quick");
    const json_t *qds = quick ? json_object_get(q, "datasets") : NULL;
    json_t *out = json_array();
    size_t i;
    json_t *ds;
    json_array_foreach(json_object_get(exp, "datasets"), i, ds)
    {
        const char *name = json_string_value(json_object_get(ds, "name"));
        if (name == NULL)
            continue;
        if (qds != NULL && !array_has_string(qds, name))
            continue;
        if (only != NULL && !gp_bench_list_has(only, name))
            continue;
        json_array_append(out, ds);
    }
    return out;
}

json_t *gpb_dataset_splits(const json_t *exp, const json_t *ds, int quick)
{
    const json_t *s = json_object_get(ds, "splits");
    const json_t *qs = quick ? json_object_get(json_object_get(exp, "quick"), "splits") : NULL;
    if (json_is_array(s))
        return json_deep_copy(s);
    json_int_t count = json_is_integer(s) ? json_integer_value(s) : 1;
    if (json_is_integer(qs) && json_integer_value(qs) < count)
        count = json_integer_value(qs);
    json_t *out = json_array();
    for (json_int_t k = 0; k < count; k++)
        json_array_append_new(out, json_integer(k));
    return out;
}

/* The text of an option value in a label: strings as they are, booleans
 * as true/false, numbers as JSON writes them. */
static void value_text(const json_t *v, char *buf, size_t len)
{
    if (json_is_string(v)) {
        snprintf(buf, len, "%s", json_string_value(v));
        return;
    }
    char *s = json_dumps(v, JSON_ENCODE_ANY);
    snprintf(buf, len, "%s", s != NULL ? s : "?");
    free(s);
}

/* The label template with {key} replaced by the option's value text and
 * {key|a|b} by a when the value is false, b when true. */
static json_t *fill_label(const char *tmpl, const json_t *options)
{
    char out[512];
    size_t used = 0;
    for (const char *p = tmpl; *p != '\0' && used + 1 < sizeof out;) {
        const char *close = *p == '{' ? strchr(p, '}') : NULL;
        if (close == NULL) {
            out[used++] = *p++;
            continue;
        }
        char key[128], text[256];
        snprintf(key, sizeof key, "%.*s", (int)(close - p - 1), p + 1);
        char *bar = strchr(key, '|');
        if (bar != NULL)
            *bar = '\0';
        const json_t *v = json_object_get(options, key);
        if (bar != NULL && json_is_boolean(v)) {
            char *second = strchr(bar + 1, '|');
            if (second != NULL)
                *second = '\0';
            snprintf(text, sizeof text, "%s", json_is_true(v) && second ? second + 1 : bar + 1);
        } else {
            value_text(v, text, sizeof text);
        }
        used += (size_t)snprintf(out + used, sizeof out - used, "%s", text);
        if (used >= sizeof out)
            used = sizeof out - 1;
        p = close + 1;
    }
    out[used] = '\0';
    return json_string(out);
}

/* Append to out every combination of the grid's keys keys[k..n) on top of
 * options (first key slowest). */
static void expand(const json_t *run, const json_t *grid, const char **keys, size_t n, size_t k,
                   json_t *options, json_t *out)
{
    if (k == n) {
        json_t *r = json_object();
        json_object_set(r, "method", json_object_get(run, "method"));
        const char *tmpl = json_string_value(json_object_get(run, "label"));
        json_object_set_new(r, "label", fill_label(tmpl != NULL ? tmpl : "{method}", options));
        json_object_set_new(r, "options", json_deep_copy(options));
        if (json_object_get(run, "latency") != NULL)
            json_object_set(r, "latency", json_object_get(run, "latency"));
        json_object_set_new(r, "fit", json_object());
        json_object_update(json_object_get(r, "fit"), json_object_get(run, "fit"));
        json_array_append_new(out, r);
        return;
    }
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(grid, keys[k]), i, v)
    {
        json_object_set(options, keys[k], v);
        expand(run, grid, keys, n, k + 1, options, out);
    }
    json_object_del(options, keys[k]);
}

/* The run's grid with the values of over for the keys both name. */
static void override_grid(json_t *grid, const json_t *over)
{
    const char *key;
    json_t *v;
    json_object_foreach(grid, key, v) if (json_object_get(over, key) != NULL)
        json_object_set(grid, key, json_object_get(over, key));
}

/* The run's grid, then the dataset's "grid", then the quick preset's. */
static json_t *effective_grid(const json_t *run, const json_t *dsgrid, const json_t *qgrid)
{
    json_t *grid = json_deep_copy(json_object_get(run, "grid"));
    if (grid == NULL)
        grid = json_object();
    override_grid(grid, dsgrid);
    override_grid(grid, qgrid);
    return grid;
}

json_t *gpb_experiment_runs(const json_t *exp, const json_t *ds, int quick)
{
    const json_t *qgrid =
        quick ? json_object_get(json_object_get(exp, "quick"), "grid") : NULL;
    const json_t *dsgrid = ds != NULL ? json_object_get(ds, "grid") : NULL;
    json_t *out = json_array();
    size_t i;
    json_t *run;
    json_array_foreach(json_object_get(exp, "runs"), i, run)
    {
        json_t *grid = effective_grid(run, dsgrid, qgrid);
        const char *keys[16];
        size_t n = 0;
        const char *key;
        json_t *v;
        json_object_foreach(grid, key, v) if (n < 16) keys[n++] = key;
        json_t *options = json_deep_copy(json_object_get(run, "options"));
        if (options == NULL)
            options = json_object();
        /* {method} in a label is the method's name */
        json_object_set(options, "method", json_object_get(run, "method"));
        expand(run, grid, keys, n, 0, options, out);
        json_decref(options);
        json_decref(grid);
    }
    /* the method's name was only there for the label */
    json_array_foreach(out, i, run) json_object_del(json_object_get(run, "options"), "method");
    /* the quick preset's "runs": the labels it keeps */
    const json_t *keep = quick ? json_object_get(json_object_get(exp, "quick"), "runs") : NULL;
    for (i = json_array_size(out); keep != NULL && i-- > 0;)
        if (!array_has_string(keep,
                              json_string_value(json_object_get(json_array_get(out, i), "label"))))
            json_array_remove(out, i);
    return out;
}

/* 1 when every key of when equals the run's method ("method"), label
 * ("label") or option, the training set is larger than "n_train_above" and
 * the split number at least "split_at_least" (the run's "split", set by the
 * caller) when it says so. */
static int rule_matches(const json_t *when, const json_t *run, size_t n_train)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)when, key, v)
    {
        if (strcmp(key, "n_train_above") == 0) {
            if (!json_is_number(v) || (double)n_train <= json_number_value(v))
                return 0;
            continue;
        }
        if (strcmp(key, "split_at_least") == 0) {
            const json_t *split = json_object_get(run, "split");
            if (!json_is_number(v) || !json_is_number(split) ||
                json_number_value(split) < json_number_value(v))
                return 0;
            continue;
        }
        const json_t *have = strcmp(key, "method") == 0 || strcmp(key, "label") == 0
                                 ? json_object_get(run, key)
                                 : json_object_get(json_object_get(run, "options"), key);
        if (have == NULL || !json_equal((json_t *)have, v))
            return 0;
    }
    return 1;
}

static void apply(const json_t *rules, const json_t *run, size_t n_train, json_t *r)
{
    json_t *options = json_object_get(r, "options");
    size_t i;
    json_t *rule;
    json_array_foreach(rules, i, rule)
    {
        if (!rule_matches(json_object_get(rule, "when"), run, n_train))
            continue;
        const json_t *set = json_object_get(rule, "set");
        if (json_is_object(set))
            json_object_update(options, (json_t *)set);
        const json_t *fit = json_object_get(rule, "fit");
        if (json_is_object(fit)) {
            if (!json_is_object(json_object_get(r, "fit")))
                json_object_set_new(r, "fit", json_object());
            json_object_update(json_object_get(r, "fit"), (json_t *)fit);
        }
        const json_t *skip = json_object_get(rule, "skip");
        if (json_is_string(skip))
            json_object_set(r, "skip", (json_t *)skip);
    }
}

json_t *gpb_apply_rules(const json_t *exp, const json_t *ds, const json_t *run, int quick,
                        size_t n_train)
{
    json_t *r = json_deep_copy(run);
    /* the dataset's "fit" first: the run's and the rules' go over it */
    const json_t *dsfit = json_object_get(ds, "fit");
    if (json_is_object(dsfit)) {
        json_t *fit = json_deep_copy(dsfit);
        json_object_update(fit, json_object_get(r, "fit"));
        json_object_set_new(r, "fit", fit);
    }
    apply(json_object_get(ds, "rules"), run, n_train, r);
    if (quick)
        apply(json_object_get(json_object_get(exp, "quick"), "rules"), run, n_train, r);
    return r;
}
