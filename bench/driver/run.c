/* See run.h. */
#include "bench/driver/run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/driver/experiment.h"
#include "bench/support/dataset.h"
#include "bench/support/fit.h"
#include "core/methods/registry.h"

#define MAX_OPTIONS 32

/* Where one fit runs: the experiment, dataset entry, split and seeds. */
typedef struct place {
    const char *experiment;
    const json_t *ds;
    const char *scheme;
    long split, repeat;
    uint64_t seed;
    int quick;
    const gp_dataset *train, *test;
} place;

/* The JSON value v as the text gp_bench_option_from_text reads. */
static void option_text(const json_t *v, char *buf, size_t len)
{
    if (json_is_string(v))
        snprintf(buf, len, "%s", json_string_value(v));
    else if (json_is_boolean(v))
        snprintf(buf, len, "%s", json_is_true(v) ? "true" : "false");
    else if (json_is_integer(v))
        snprintf(buf, len, "%lld", (long long)json_integer_value(v));
    else
        snprintf(buf, len, "%.17g", json_number_value(v));
}

/* A JSON number, or null for NAN and the infinities (JSON has neither). */
static json_t *number(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

static json_t *info_object(const gp_model *model)
{
    json_t *info = json_object();
    for (size_t i = 0; i < model->diag.n_info; i++) {
        const gp_info_item *it = &model->diag.info[i];
        json_object_set_new(info, it->key,
                            it->string != NULL ? json_string(it->string) : number(it->number));
    }
    return info;
}

/* The model's figures into rec. */
static void record_model(json_t *rec, const gp_model *model)
{
    json_object_set_new(rec, "lml", number(model->diag.objective));
    json_object_set_new(rec, "iterations", json_integer(model->diag.iterations));
    json_object_set_new(rec, "evaluations", json_integer(model->diag.evaluations));
    json_object_set_new(rec, "converged", json_boolean(model->diag.converged));
    /* the table's mark of a fit stopped by its iteration limit */
    json_object_set_new(rec, "stop_mark", json_string(model->diag.converged ? "" : "*"));
    json_object_set_new(rec, "noise", number(model->noise_variance));
    json_object_set_new(rec, "jitter", number(model->diag.jitter));
    json_object_set_new(rec, "info", info_object(model));
}

/* Fit and score run at p into rec ("ok", "error" and the figures). */
static void fit_one(const place *p, const json_t *run, json_t *rec)
{
    const char *name = json_string_value(json_object_get(run, "method"));
    const gp_method *m = name != NULL ? gp_method_find(name) : NULL;
    gp_option_value opts[MAX_OPTIONS];
    char texts[MAX_OPTIONS][64];
    char why[320] = "";
    size_t n = 0;
    const char *key;
    json_t *v;
    json_object_foreach(json_object_get(run, "options"), key, v)
    {
        if (m == NULL || n == MAX_OPTIONS || why[0] != '\0')
            break;
        option_text(v, texts[n], sizeof texts[n]);
        if (gp_bench_option_from_text(m, key, texts[n], &opts[n], why, sizeof why) == 0)
            n++;
    }
    gp_bench_run r;
    memset(&r, 0, sizeof r);
    gp_model *model = NULL;
    if (why[0] == '\0')
        gp_bench_fit_score(name != NULL ? name : "?", opts, n, p->train, p->test, p->seed,
                           &model, &r);
    else
        snprintf(r.error, sizeof r.error, "%s", why);
    json_object_set_new(rec, "ok", json_boolean(r.ok));
    if (!r.ok)
        json_object_set_new(rec, "error", json_string(r.error));
    json_object_set_new(rec, "seconds", number(r.seconds));
    if (r.ok) {
        json_object_set_new(rec, "rmse", number(r.scores.rmse));
        json_object_set_new(rec, "nlpd", number(r.scores.nlpd));
        json_object_set_new(rec, "clamped", json_integer((json_int_t)r.scores.clamped));
    }
    if (model != NULL)
        record_model(rec, model);
    gp_model_free(model);
}

/* The line of one run at p, written to out. */
static void run_one(const place *p, const json_t *expanded, FILE *out)
{
    json_t *run = gpb_apply_rules(p->ds, expanded);
    json_t *rec = json_object();
    json_object_set_new(rec, "experiment", json_string(p->experiment));
    json_object_set(rec, "dataset", json_object_get(p->ds, "name"));
    json_object_set_new(rec, "scheme", json_string(p->scheme));
    json_object_set_new(rec, "split", json_integer(p->split));
    json_object_set_new(rec, "repeat", json_integer(p->repeat));
    json_object_set_new(rec, "seed", json_integer((json_int_t)p->seed));
    json_object_set_new(rec, "quick", json_boolean(p->quick));
    json_object_set_new(rec, "n_train", json_integer((json_int_t)p->train->n));
    json_object_set_new(rec, "n_test", json_integer((json_int_t)p->test->n));
    json_object_set_new(rec, "d", json_integer((json_int_t)p->train->d));
    json_object_set(rec, "method", json_object_get(run, "method"));
    json_object_set(rec, "label", json_object_get(run, "label"));
    json_object_set(rec, "options", json_object_get(run, "options"));
    const json_t *skip = json_object_get(run, "skip");
    if (skip != NULL) {
        json_object_set_new(rec, "ok", json_false());
        json_object_set(rec, "error", (json_t *)skip);
        json_object_set_new(rec, "skipped", json_true());
    } else {
        fit_one(p, run, rec);
    }
    fprintf(stderr, "gpbench: %s split %ld %-34s %s\n", json_string_value(json_object_get(p->ds, "name")),
            p->split, json_string_value(json_object_get(run, "label")),
            json_is_true(json_object_get(rec, "ok")) ? "ok"
                                                     : json_string_value(json_object_get(rec, "error")));
    json_dumpf(rec, out, JSON_COMPACT | JSON_REAL_PRECISION(17));
    fputc('\n', out);
    fflush(out);
    json_decref(rec);
    json_decref(run);
}

/* A seed field of the experiment or a dataset: a number, or "split" for the
 * split number (plus the repeat). */
static uint64_t seed_of(const json_t *v, long split, long repeat, uint64_t fallback)
{
    if (json_is_integer(v))
        return (uint64_t)json_integer_value(v) + (uint64_t)repeat;
    if (json_is_string(v) && strcmp(json_string_value(v), "split") == 0)
        return (uint64_t)split + (uint64_t)repeat;
    return fallback + (uint64_t)repeat;
}

/* Every run of one dataset split (all repeats). */
static void run_split(place *p, const json_t *exp, const json_t *runs, FILE *out)
{
    const json_t *ds = p->ds;
    const char *name = json_string_value(json_object_get(ds, "name"));
    json_int_t max_train = json_integer_value(json_object_get(ds, "max_train"));
    uint64_t sub_seed = seed_of(json_object_get(ds, "subsample_seed"), p->split, 0, 0);
    gp_dataset train, test;
    gp_error err;
    gp_error_clear(&err);
    if (gp_dataset_load_split(name, p->scheme, (int)p->split, (size_t)max_train, sub_seed, &train,
                              &test, NULL, &err) != GP_OK) {
        fprintf(stderr, "gpbench: %s split %ld: %s\n", name, p->split, err.message);
        return;
    }
    p->train = &train;
    p->test = &test;
    json_int_t repeats = json_integer_value(json_object_get(exp, "repeats"));
    for (p->repeat = 0; p->repeat < (repeats > 0 ? repeats : 1); p->repeat++) {
        const json_t *seed = json_object_get(ds, "seed");
        p->seed = seed_of(seed != NULL ? seed : json_object_get(exp, "seed"), p->split,
                          p->repeat, 0);
        size_t i;
        json_t *run;
        json_array_foreach(runs, i, run) run_one(p, run, out);
    }
    gp_dataset_free(&train);
    gp_dataset_free(&test);
}

int gpb_run(const json_t *exp, const gpb_run_config *cfg, FILE *out)
{
    char why[512];
    if (!gp_datasets_present(why, sizeof why)) {
        fprintf(stderr, "gpbench: datasets not available: %s (set GPSERVE_DATASETS to the "
                        "shared datasets folder)\n", why);
        return -1;
    }
    json_t *datasets = gpb_experiment_datasets(exp, cfg->quick, cfg->only);
    json_t *runs = gpb_experiment_runs(exp, cfg->quick);
    size_t i;
    json_t *ds;
    json_array_foreach(datasets, i, ds)
    {
        const char *name = json_string_value(json_object_get(ds, "name"));
        if (!gp_dataset_exists(name)) {
            fprintf(stderr, "gpbench: %s.csv not found: skipped\n", name);
            continue;
        }
        const char *scheme = json_string_value(json_object_get(ds, "scheme"));
        place p = {.experiment = json_string_value(json_object_get(exp, "name")),
                   .ds = ds,
                   .scheme = scheme != NULL ? scheme : "test20",
                   .quick = cfg->quick};
        json_t *splits = gpb_dataset_splits(exp, ds, cfg->quick);
        size_t k;
        json_t *split;
        json_array_foreach(splits, k, split)
        {
            p.split = (long)json_integer_value(split);
            run_split(&p, exp, runs, out);
        }
        json_decref(splits);
    }
    json_decref(runs);
    json_decref(datasets);
    return 0;
}
