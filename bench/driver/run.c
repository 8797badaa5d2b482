/* See run.h. */
#include "bench/driver/run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/driver/experiment.h"
#include "bench/driver/peers.h"
#include "bench/driver/prepare.h"
#include "bench/driver/score.h"
#include "bench/support/args.h"
#include "bench/support/clock.h"
#include "bench/support/dataset.h"
#include "bench/support/fit.h"
#include "core/base/error.h"
#include "core/methods/registry.h"

#define MAX_OPTIONS 32
/* rows of the median heuristic ("lengthscale": "median"), bench_hkd's */
#define DEFAULT_MEDIAN_ROWS 2000

/* Where one fit runs: the experiment, dataset entry, split and seeds. */
typedef struct place {
    const json_t *exp;
    json_t *done; /* the lines of this split and repeat so far ("from" options) */
    const char *experiment;
    const json_t *ds;
    const char *scheme;
    long split, repeat;
    uint64_t seed;
    int quick;
    const struct gpb_run_config *cfg; /* --smoke and --set, applied after the rules */
    const gp_dataset *train, *test;
    const gp_dataset *all; /* the prepared rows (prepare.h), or NULL */
    double y_sd;           /* y's scale when the dataset standardised it, else 1 */
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

/* An option given as {"from": LABEL, "info": KEY}: the number KEY of the
 * diag.info of the run labelled LABEL on the same split (e.g. sgpr's M as
 * the one gwi chose). Replaced in options by that number; -1 with the reason
 * in why when that run has not reported it. */
static int resolve_from(const place *p, json_t *options, char *why, size_t why_len)
{
    const char *key;
    json_t *v;
    json_object_foreach(options, key, v)
    {
        if (!json_is_object(v))
            continue;
        const char *label = json_string_value(json_object_get(v, "from"));
        const char *info = json_string_value(json_object_get(v, "info"));
        const json_t *found = NULL;
        size_t i;
        json_t *rec;
        json_array_foreach(p->done, i, rec) if (label != NULL && info != NULL &&
                                                strcmp(json_string_value(json_object_get(rec, "label")),
                                                       label) == 0)
            found = json_object_get(json_object_get(rec, "info"), info);
        if (!json_is_number(found)) {
            snprintf(why, why_len, "option '%s': %s reported no %s", key,
                     label != NULL ? label : "?", info != NULL ? info : "?");
            return -1;
        }
        json_object_set_new(options, key, json_real(json_number_value(found)));
    }
    return 0;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Single-point predict latency (a run's "latency": {calls, warmup, batch,
 * pool}): gp_model_predict with m = 1 and include_noise = 1 on the first
 * `pool` test points in turn, `warmup` untimed calls, then `calls` timed in
 * batches of `batch`; the mean per call over all calls and the p50 / p99 of
 * the batches' per-call means, in microseconds, into rec's "predict_us". */
static void measure_latency(const gp_model *model, const gp_dataset *test, const json_t *spec,
                            json_t *rec)
{
    size_t calls = (size_t)json_integer_value(json_object_get(spec, "calls"));
    size_t warmup = (size_t)json_integer_value(json_object_get(spec, "warmup"));
    size_t batch = (size_t)json_integer_value(json_object_get(spec, "batch"));
    size_t pool = (size_t)json_integer_value(json_object_get(spec, "pool"));
    size_t d = test->d, n_batches = batch > 0 ? calls / batch : 0;
    if (pool > test->n)
        pool = test->n;
    double *pts = malloc((pool * d + 1) * sizeof *pts);
    double *batch_us = malloc((n_batches + 1) * sizeof *batch_us);
    gp_error err;
    gp_error_clear(&err);
    int ok = pts != NULL && batch_us != NULL && pool > 0 && n_batches > 0;
    for (size_t i = 0; ok && i < pool; i++)
        for (size_t j = 0; j < d; j++)
            pts[i * d + j] = test->X[j * test->n + i];
    double mean = 0.0, var = 0.0, total = 0.0;
    gp_prediction pred = {.mean = &mean, .variance = &var};
    gp_predict_request pr = {.m = 1, .d = d, .include_noise = 1};
    size_t next = 0;
    for (size_t i = 0; ok && i < warmup; i++) {
        pr.X = pts + (next++ % pool) * d;
        ok = gp_model_predict(model, &pr, &pred, &err) == GP_OK;
    }
    for (size_t b = 0; ok && b < n_batches; b++) {
        double t0 = gp_bench_seconds();
        for (size_t i = 0; ok && i < batch; i++) {
            pr.X = pts + (next++ % pool) * d;
            ok = gp_model_predict(model, &pr, &pred, &err) == GP_OK;
        }
        double dt = gp_bench_seconds() - t0;
        total += dt;
        batch_us[b] = 1e6 * dt / (double)batch;
    }
    if (ok) {
        qsort(batch_us, n_batches, sizeof *batch_us, compare_double);
        json_t *lat = json_object();
        json_object_set_new(lat, "calls", json_integer((json_int_t)(n_batches * batch)));
        json_object_set_new(lat, "mean", json_real(1e6 * total / (double)(n_batches * batch)));
        json_object_set_new(lat, "p50", json_real(batch_us[n_batches / 2]));
        json_object_set_new(
            lat, "p99", json_real(batch_us[(size_t)floor(0.99 * (double)(n_batches - 1))]));
        json_object_set_new(rec, "predict_us", lat);
    } else {
        json_object_set_new(rec, "predict_error",
                            json_string(err.message[0] ? err.message : "bad latency spec"));
    }
    free(pts);
    free(batch_us);
}

/* The run's "fit" settings (the dataset's, the run's and the rules', merged
 * by gpb_apply_rules) over the protocol of bench/support/fit.h; -1 with the
 * reason in why on a value that cannot be read. */
static int fit_setup(const json_t *fit, gp_bench_fit_setup *su, char *why, size_t why_len)
{
    *su = gp_bench_fit_default();
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)fit, key, v)
    {
        int bad = 0;
        if (strcmp(key, "standardize") == 0)
            su->standardize = json_is_true(v);
        else if (strcmp(key, "noise") == 0 && json_is_number(v)) {
            su->noise_given = 1;
            su->noise_variance = json_number_value(v);
        } else if (strcmp(key, "noise_fixed") == 0)
            su->noise_fixed = json_is_true(v);
        else if (strcmp(key, "ard") == 0)
            su->ard = json_is_true(v);
        else if (strcmp(key, "noise_bounds") == 0 && json_is_array(v) &&
                 json_array_size(v) == 2) {
            su->noise_lo = json_number_value(json_array_get(v, 0));
            su->noise_hi = json_number_value(json_array_get(v, 1));
            bad = !(su->noise_lo > 0.0 && su->noise_lo < su->noise_hi);
        } else if (strcmp(key, "priors") == 0 && json_is_string(v)) {
            const char *p = json_string_value(v);
            su->default_priors = strcmp(p, "default") == 0 ? 1 : strcmp(p, "none") == 0 ? -1 : 0;
            bad = su->default_priors == 0;
        }
        else if (strcmp(key, "lengthscale") == 0 && json_is_number(v))
            su->lengthscale = json_number_value(v);
        else if (strcmp(key, "lengthscale") == 0 && json_is_string(v) &&
                 strcmp(json_string_value(v), "median") == 0) {
            json_int_t rows = json_integer_value(json_object_get(fit, "median_rows"));
            su->median_rows = rows > 0 ? (size_t)rows : DEFAULT_MEDIAN_ROWS;
        } else if (strcmp(key, "median_rows") == 0 && json_is_integer(v))
            continue; /* read with "lengthscale": "median" */
        else if (strcmp(key, "likelihood") == 0 && json_is_string(v)) {
            int l = gp_likelihood_from_name(json_string_value(v));
            bad = l < 0;
            su->likelihood = bad ? GP_LIK_GAUSSIAN : (gp_likelihood)l;
        } else if (strcmp(key, "mean") == 0 && json_is_string(v)) {
            gp_mean_type t;
            bad = gp_mean_from_name(json_string_value(v), &t) != 0;
            su->mean = bad ? GP_MEAN_ZERO : t;
        } else if (strcmp(key, "kernel") == 0 && json_is_string(v)) {
            int k = gp_kernel_type_from_name(json_string_value(v));
            bad = k < 0;
            su->kernel = bad ? GP_KERNEL_RBF : (gp_kernel_type)k;
        } else
            bad = 1;
        if (bad) {
            snprintf(why, why_len, "fit.%s: not a setting gpbench reads (bench/README.md)", key);
            return -1;
        }
    }
    return 0;
}

/* Fit and score run at p into rec ("ok", "error" and the figures). */
static void fit_one(const place *p, json_t *run, json_t *rec)
{
    const char *name = json_string_value(json_object_get(run, "method"));
    const gp_method *m = name != NULL ? gp_method_find(name) : NULL;
    gp_option_value opts[MAX_OPTIONS];
    char texts[MAX_OPTIONS][64];
    char why[320] = "";
    size_t n = 0;
    resolve_from(p, json_object_get(run, "options"), why, sizeof why);
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
    gp_bench_fit_setup su;
    if (why[0] == '\0')
        fit_setup(json_object_get(run, "fit"), &su, why, sizeof why);
    gp_model *model = NULL;
    double seconds = NAN;
    gp_error err;
    gp_error_clear(&err);
    int rc = GP_EINVAL;
    if (why[0] == '\0' && m == NULL)
        snprintf(why, sizeof why, "%s: not available in this build", name != NULL ? name : "?");
    if (why[0] == '\0') {
        rc = gp_bench_fit_timed_with(m, opts, n, p->train, p->seed, &su, &model, &seconds, &err);
        if (rc != GP_OK)
            snprintf(why, sizeof why, "fit failed: %s (%s)", gp_status_name(rc), err.message);
    }
    if (rc == GP_OK) {
        rc = gpb_score(model, p->test, json_object_get(p->exp, "scores"), p->y_sd, rec, &err);
        if (rc != GP_OK)
            snprintf(why, sizeof why, "predict failed: %s (%s)", gp_status_name(rc),
                     err.message);
    }
    int ok = rc == GP_OK;
    json_object_set_new(rec, "ok", json_boolean(ok));
    if (!ok)
        json_object_set_new(rec, "error", json_string(why));
    json_object_set_new(rec, "seconds", number(seconds));
    if (model != NULL)
        record_model(rec, model);
    const json_t *latency = json_object_get(run, "latency");
    if (ok && latency != NULL)
        measure_latency(model, p->test, latency, rec);
    gp_model_free(model);
}

/* Columns of the training set with zero deviation (the method's
 * standardisation gives them scale 1; naval has some). */
static size_t constant_columns(const gp_dataset *ds)
{
    size_t c = 0;
    for (size_t j = 0; j < ds->d; j++) {
        const double *x = ds->X + j * ds->n;
        size_t i = 1;
        while (i < ds->n && x[i] == x[0])
            i++;
        c += ds->n > 0 && i == ds->n;
    }
    return c;
}

/* A --set value as JSON: a number, true/false, or the text. */
static json_t *typed_value(const char *text)
{
    char *end = NULL;
    double v = strtod(text, &end);
    if (end != text && *end == '\0')
        return json_real(v);
    if (strcmp(text, "true") == 0 || strcmp(text, "false") == 0)
        return json_boolean(text[0] == 't');
    return json_string(text);
}

/* cfg->set's options over run's when it is of method m (e.g.
 * "gwi.epochs=100"); -1 on an entry that is not M.O=V. */
static int apply_set(json_t *run, const char *m, const gpb_run_config *cfg)
{
    for (const char *p = cfg->set; p != NULL && *p != '\0';) {
        char entry[256];
        size_t len = strcspn(p, ",");
        snprintf(entry, sizeof entry, "%.*s", (int)len, p);
        p += len + (p[len] == ',');
        char *dot = strchr(entry, '.'), *eq = strchr(entry, '=');
        if (dot == NULL || eq == NULL || eq < dot) {
            fprintf(stderr, "gpbench: --set takes METHOD.OPTION=VALUE, not '%s'\n", entry);
            return -1;
        }
        *dot = *eq = '\0';
        if (m != NULL && strcmp(entry, m) == 0)
            json_object_set_new(json_object_get(run, "options"), dot + 1, typed_value(eq + 1));
    }
    return 0;
}

void gpb_apply_method_quick(json_t *run, const char *name)
{
    const gp_method *m = name != NULL ? gp_method_find(name) : NULL;
    json_t *options = json_object_get(run, "options");
    if (m == NULL)
        return;
    if (options == NULL) {
        options = json_object();
        json_object_set_new(run, "options", options);
    }
    for (size_t i = 0; i < m->n_quick; i++) {
        double v = m->quick[i].number;
        json_object_set_new(options, m->quick[i].name,
                            v == floor(v) ? json_integer((json_int_t)v) : json_real(v));
    }
}

/* The line of one run at p, written to out and kept in p->done. */
static void run_one(const place *p, const json_t *expanded, FILE *out)
{
    /* the split, for rules that say "split_at_least" */
    json_t *at = json_deep_copy(expanded);
    json_object_set_new(at, "split", json_integer(p->split));
    json_t *run = gpb_apply_rules(p->exp, p->ds, at, p->quick, p->train->n);
    json_decref(at);
    json_object_del(run, "split");
    if (p->cfg != NULL && p->cfg->smoke) { /* the presets over the rules; --set has the last word */
        const char *m = json_string_value(json_object_get(run, "method"));
        gpb_apply_method_quick(run, m);
        apply_set(run, m, p->cfg);
    }
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
    json_object_set_new(rec, "constant_columns", json_integer((json_int_t)constant_columns(p->train)));
    json_object_set(rec, "method", json_object_get(run, "method"));
    json_object_set(rec, "label", json_object_get(run, "label"));
    /* the options as fitted: fit_one resolves "from" values in place */
    json_object_set(rec, "options", json_object_get(run, "options"));
    if (json_object_size(json_object_get(run, "fit")) > 0)
        json_object_set(rec, "fit", json_object_get(run, "fit"));
    const json_t *skip = json_object_get(run, "skip");
    if (skip != NULL) {
        json_object_set_new(rec, "ok", json_false());
        json_object_set(rec, "error", (json_t *)skip);
        json_object_set_new(rec, "skipped", json_true());
    } else {
        fit_one(p, run, rec);
    }
    fprintf(stderr, "gpbench: %s split %ld %-34s %s\n",
            json_string_value(json_object_get(p->ds, "name")), p->split,
            json_string_value(json_object_get(run, "label")),
            json_is_true(json_object_get(rec, "ok"))
                ? "ok"
                : json_string_value(json_object_get(rec, "error")));
    json_dumpf(rec, out, JSON_COMPACT | JSON_REAL_PRECISION(17));
    fputc('\n', out);
    fflush(out);
    json_array_append_new(p->done, rec);
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
    int rc = p->all != NULL
                 ? gpb_prepare_split(ds, p->all, (int)p->split, &train, &test, &err)
                 : gp_dataset_load_split(name, p->scheme, (int)p->split, (size_t)max_train,
                                         sub_seed, &train, &test, NULL, &err);
    if (rc != GP_OK) {
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
        p->done = json_array();
        json_array_foreach(runs, i, run) run_one(p, run, out);
        json_decref(p->done);
        p->done = NULL;
    }
    gp_dataset_free(&train);
    gp_dataset_free(&test);
}

/* The runs of cfg->methods only, with cfg->set's options over the file's;
 * -1 on a --set entry that is not M.O=V. */
static int select_runs(json_t *runs, const gpb_run_config *cfg)
{
    for (size_t i = json_array_size(runs); i-- > 0;) {
        json_t *run = json_array_get(runs, i);
        const char *m = json_string_value(json_object_get(run, "method"));
        if (cfg->methods != NULL && !gp_bench_list_has(cfg->methods, m)) {
            json_array_remove(runs, i);
            continue;
        }
        if (apply_set(run, m, cfg) != 0)
            return -1;
    }
    return 0;
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
    json_t *runs = NULL;
    size_t i;
    json_t *ds;
    json_array_foreach(datasets, i, ds)
    {
        const char *name = json_string_value(json_object_get(ds, "name"));
        if (!gp_dataset_exists(name)) {
            fprintf(stderr, "gpbench: %s.csv not found: skipped\n", name);
            continue;
        }
        json_decref(runs);
        runs = gpb_experiment_runs(exp, ds, cfg->quick);
        if (select_runs(runs, cfg) != 0)
            break;
        const char *scheme = json_string_value(json_object_get(ds, "scheme"));
        place p = {.exp = exp,
                   .experiment = json_string_value(json_object_get(exp, "name")),
                   .ds = ds,
                   .scheme = scheme != NULL ? scheme : "test20",
                   .quick = cfg->quick,
                   .cfg = cfg};
        gp_dataset all;
        gp_error err;
        gp_error_clear(&err);
        p.y_sd = 1.0;
        if (gpb_prepare_wanted(ds)) {
            if (gpb_prepare_all(ds, &all, &p.y_sd, &err) != GP_OK) {
                fprintf(stderr, "gpbench: %s: %s\n", name, err.message);
                gp_dataset_free(&all);
                continue;
            }
            p.all = &all;
        }
        json_t *splits = gpb_dataset_splits(exp, ds, cfg->quick);
        size_t k;
        json_t *split;
        json_array_foreach(splits, k, split)
        {
            p.split = (long)json_integer_value(split);
            run_split(&p, exp, runs, out);
        }
        json_decref(splits);
        if (p.all != NULL)
            gp_dataset_free(&all);
    }
    int bad = runs != NULL && i < json_array_size(datasets); /* select_runs broke off */
    if (!bad && !cfg->no_peers && cfg->methods == NULL)
        bad = gpb_run_peers(exp, datasets, cfg->quick, out) != 0;
    json_decref(runs);
    json_decref(datasets);
    return bad ? -1 : 0;
}
