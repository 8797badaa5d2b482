/* bench_hkd: one fit of the benchmark's fixed start, its scores and predict
 * latency, and the hkd symmetry option built as a gp_value tree. */
#include <math.h>
#include <time.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_hkd/hkd_bench.h"
#include "bench/support/clock.h"
#include "bench/support/scores.h"
#include "core/methods/registry.h"

/* ---- the symmetry option: a gp_value tree ---- */

static char *dup_text(const char *s)
{
    size_t len = strlen(s) + 1;
    char *out = malloc(len);
    if (out != NULL)
        memcpy(out, s, len);
    return out;
}

/* v becomes an OBJECT with n members named keys (items zeroed); -1 on ENOMEM. */
static int v_object(gp_value *v, size_t n, const char *const *keys)
{
    memset(v, 0, sizeof *v);
    v->type = GP_VALUE_OBJECT;
    if (n == 0)
        return 0;
    v->items = calloc(n, sizeof *v->items);
    v->keys = calloc(n, sizeof *v->keys);
    if (v->items == NULL || v->keys == NULL)
        return -1;
    v->n = n;
    for (size_t i = 0; i < n; i++)
        if ((v->keys[i] = dup_text(keys[i])) == NULL)
            return -1;
    return 0;
}

static int v_array(gp_value *v, size_t n)
{
    memset(v, 0, sizeof *v);
    v->type = GP_VALUE_ARRAY;
    if (n == 0)
        return 0;
    if ((v->items = calloc(n, sizeof *v->items)) == NULL)
        return -1;
    v->n = n;
    return 0;
}

static int v_string(gp_value *v, const char *s)
{
    memset(v, 0, sizeof *v);
    v->type = GP_VALUE_STRING;
    return (v->string = dup_text(s)) == NULL ? -1 : 0;
}

static void v_number(gp_value *v, double x)
{
    memset(v, 0, sizeof *v);
    v->type = GP_VALUE_NUMBER;
    v->number = x;
}

/* One generator object {"type": type, "dims": [dims...], <key>: number}. */
static int v_generator(gp_value *g, const char *type, const size_t *dims, size_t n_dims,
                       const char *key, double number)
{
    const char *keys[3];
    size_t n = 0;
    keys[n++] = "type";
    if (dims != NULL)
        keys[n++] = "dims";
    if (key != NULL)
        keys[n++] = key;
    if (v_object(g, n, keys) != 0 || v_string(&g->items[0], type) != 0)
        return -1;
    size_t at = 1;
    if (dims != NULL) {
        gp_value *a = &g->items[at++];
        if (v_array(a, n_dims) != 0)
            return -1;
        for (size_t i = 0; i < n_dims; i++)
            v_number(&a->items[i], (double)dims[i]);
    }
    if (key != NULL)
        v_number(&g->items[at], number);
    return 0;
}

/* {"generators": [...]} for kind on d inputs (heap; gp_value_free), NULL on ENOMEM.
 * SYM_NEGATE_AXES: HKD_WAYS generators "negate", dims j, j + WAYS, j + 2 WAYS, ...
 * (the axis version of negate_pca's split of the PCA directions). SYM_ROTATE2D
 * also has "center": "origin" (the synthetic set's symmetry is exactly about 0);
 * SYM_ROTATE2D_PER_BLOCK is it with "share_inducing": false. */
gp_value *hkdb_make_symmetry(sym_kind kind, size_t d)
{
    static const char *const root_keys[] = {"generators", "center", "share_inducing"};
    gp_value *root = calloc(1, sizeof *root);
    if (root == NULL)
        return NULL;
    int per_block = kind == SYM_ROTATE2D_PER_BLOCK;
    if (per_block)
        kind = SYM_ROTATE2D;
    size_t n_gen = kind == SYM_NONE ? 0 : kind == SYM_NEGATE_AXES ? HKD_WAYS : 1;
    int bad = v_object(root, kind == SYM_ROTATE2D ? 2 + (size_t)per_block : 1, root_keys) != 0 ||
              v_array(&root->items[0], n_gen) != 0 ||
              (kind == SYM_ROTATE2D && v_string(&root->items[1], "origin") != 0);
    if (!bad && per_block) {
        root->items[2].type = GP_VALUE_BOOL;
        root->items[2].number = 0.0;
    }
    gp_value *gens = bad ? NULL : &root->items[0];
    if (!bad && kind == SYM_NEGATE_PCA) {
        bad = v_generator(&gens->items[0], "negate_pca", NULL, 0, "ways", HKD_WAYS) != 0;
    } else if (!bad && kind == SYM_ROTATE2D) {
        static const size_t plane[2] = {0, 1};
        bad = v_generator(&gens->items[0], "rotate2d", plane, 2, "order", 4) != 0;
    } else if (!bad && kind == SYM_NEGATE_AXES) {
        size_t dims[64];
        for (size_t j = 0; j < HKD_WAYS && !bad; j++) {
            size_t n = 0;
            for (size_t c = j; c < d && n < 64; c += HKD_WAYS)
                dims[n++] = c;
            bad = v_generator(&gens->items[j], "negate", dims, n, NULL, 0) != 0;
        }
    }
    if (bad) {
        gp_value_free(root);
        return NULL;
    }
    return root;
}

/* ---- data helpers ---- */

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* matern32 isotropic with lengthscale ell and variance 1 (working units). */
int hkdb_make_kernel(size_t d, double ell, gp_kernel **k, gp_error *err)
{
    int rc = gp_kernel_leaf(k, GP_KERNEL_MATERN32, d, 0, NULL, 0, err);
    if (rc != GP_OK)
        return rc;
    (*k)->log_variance = 0.0;
    (*k)->log_lengthscale[0] = log(ell);
    return GP_OK;
}

/* The process's CPU time (every thread's), in seconds. */
static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void hkdb_fit_model(const char *mname, const gp_option_value *opts, size_t n_opts,
                      const gp_dataset *train, double ell, uint64_t seed, gp_model **model,
                      result *r)
{
    memset(r, 0, sizeof *r);
    r->ran = 1;
    r->rmse = r->nlpd = r->predict_us = NAN;
    *model = NULL;
    const gp_method *m = gp_method_find(mname);
    if (m == NULL) {
        r->unavailable = 1;
        snprintf(r->error, sizeof r->error, "%s: not available in this build", mname);
        return;
    }
    gp_error err;
    gp_error_clear(&err);
    gp_kernel *k = NULL;
    int rc = hkdb_make_kernel(train->d, ell, &k, &err);
    if (rc == GP_OK)
        rc = gp_options_validate(m, opts, n_opts, &err);
    gp_fit_request req;
    memset(&req, 0, sizeof req);
    req.X = train->X;
    req.y = train->y;
    req.n = train->n;
    req.d = train->d;
    req.kernel = k;
    req.noise_given = 1;
    req.noise_variance = NOISE_INIT;
    req.standardize = 1;
    req.seed = seed;
    req.options = n_opts > 0 ? opts : NULL;
    req.n_options = n_opts;
    double t0 = gp_bench_seconds(), c0 = cpu_seconds();
    if (rc == GP_OK)
        rc = gp_model_fit(m, &req, model, &err);
    r->seconds = gp_bench_seconds() - t0;
    r->cpu_seconds = cpu_seconds() - c0;
    gp_kernel_free(k);
    if (rc != GP_OK) {
        *model = NULL;
        snprintf(r->error, sizeof r->error, "fit failed: %s (%s)", gp_status_name(rc),
                 err.message);
        return;
    }
    r->iterations = (*model)->diag.iterations;
    r->converged = (*model)->diag.converged;
    /* the method's facts, for the hkdb_progress log */
    const gp_diagnostics *dg = &(*model)->diag;
    int len = snprintf(r->info, sizeof r->info, "evals %d", dg->evaluations);
    for (size_t i = 0; i < dg->n_info && len > 0 && (size_t)len < sizeof r->info; i++) {
        const gp_info_item *it = &dg->info[i];
        if (it->string != NULL)
            len += snprintf(r->info + len, sizeof r->info - (size_t)len, ", %s %s", it->key,
                            it->string);
        else
            len += snprintf(r->info + len, sizeof r->info - (size_t)len, ", %s %.4g", it->key,
                            it->number);
    }
}

void hkdb_score_model(const gp_model *model, const gp_dataset *test, result *r)
{
    gp_error err;
    gp_error_clear(&err);
    gp_test_scores sc = {0, 0, 0};
    int rc = gp_test_scores_compute(model, test, &sc, &err);
    if (rc != GP_OK) {
        snprintf(r->error, sizeof r->error, "predict failed: %s (%s)", gp_status_name(rc),
                 err.message);
        return;
    }
    r->rmse = sc.rmse;
    r->nlpd = sc.nlpd;
    r->clamped = sc.clamped;
    r->ok = 1;
}

/* Median of `calls` single-point predictions (each timed alone) over the test
 * points in turn, after PREDICT_WARMUP warm-up calls; NAN on failure. */
double hkdb_predict_latency_us(const gp_model *model, const gp_dataset *test, size_t calls)
{
    size_t d = test->d, pool = test->n < PREDICT_POOL ? test->n : PREDICT_POOL;
    double *pts = malloc((pool > 0 ? pool : 1) * d * sizeof *pts);
    double *us = malloc(calls * sizeof *us);
    double med = NAN;
    if (pts == NULL || us == NULL || pool == 0)
        goto done;
    for (size_t i = 0; i < pool; i++)
        for (size_t j = 0; j < d; j++)
            pts[i * d + j] = test->X[j * test->n + i];
    double mean = 0.0, var = 0.0;
    gp_prediction out = {.mean = &mean, .variance = &var};
    gp_predict_request pr = {.m = 1, .d = d, .include_noise = 1};
    gp_error err;
    gp_error_clear(&err);
    size_t next = 0;
    for (size_t i = 0; i < PREDICT_WARMUP + calls; i++) {
        pr.X = pts + (next++ % pool) * d;
        double t0 = gp_bench_seconds();
        int rc = gp_model_predict(model, &pr, &out, &err);
        double dt = gp_bench_seconds() - t0;
        if (rc != GP_OK) {
            fprintf(stderr, "bench_hkd: predict latency: %s\n", err.message);
            goto done;
        }
        if (i >= PREDICT_WARMUP)
            us[i - PREDICT_WARMUP] = 1e6 * dt;
    }
    qsort(us, calls, sizeof *us, compare_double);
    med = calls % 2 ? us[calls / 2] : 0.5 * (us[calls / 2 - 1] + us[calls / 2]);
done:
    free(pts);
    free(us);
    return med;
}

void hkdb_progress(const char *what, const result *r)
{
    if (!r->ok) {
        fprintf(stderr, "bench_hkd: %-36s %s\n", what, r->error);
        return;
    }
    fprintf(stderr, "bench_hkd: %-36s RMSE %.4g NLPD %.3f fit %.2f s, cpu %.2f s (%d it%s)", what,
            r->rmse, r->nlpd, r->seconds, r->cpu_seconds, r->iterations,
            r->converged ? "" : ", not converged");
    if (isfinite(r->predict_us))
        fprintf(stderr, " predict %.1f us", r->predict_us);
    fprintf(stderr, "\n");
    if (r->info[0] != '\0')
        fprintf(stderr, "bench_hkd:     (%s)\n", r->info);
}

/* The options of an hkd fit: symmetry and m a block; optimize_inducing when
 * optimize is 0 or 1 (-1: hkd's default). */
size_t hkdb_hkd_options(const gp_value *sym, size_t m, int optimize, gp_option_value *o)
{
    size_t n = 0;
    o[n++] = (gp_option_value){.name = "symmetry", .object = sym};
    o[n++] = (gp_option_value){.name = "inducing", .number = (double)m};
    if (optimize >= 0)
        o[n++] = (gp_option_value){.name = "optimize_inducing", .number = optimize};
    return n;
}

/* The options of an sgpr fit with M points, greedy selection. */
size_t hkdb_sgpr_options(size_t M, int optimize_inducing, gp_option_value *o)
{
    size_t n = 0;
    o[n++] = (gp_option_value){.name = "inducing", .number = (double)M};
    o[n++] = (gp_option_value){.name = "inducing_selection", .string = "greedy"};
    o[n++] = (gp_option_value){.name = "optimize_inducing", .number = optimize_inducing};
    return n;
}
