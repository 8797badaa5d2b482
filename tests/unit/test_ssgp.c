/* Method "ssgp" (core/methods/ssgp/ssgp.h): registration and options, kernel restriction,
 * fits with every frequency sampler, determinism, convergence to the exact GP
 * as R grows, full covariance, joint samples, export/import, Matern kernels,
 * active_dims, shared lengthscale, a large N without an N x N matrix, bad
 * input, and a real dataset against the exact GP. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <lapacke.h>

#include "bench/support/dataset.h"
#include "core/base/rng.h"
#include "core/base/state.h"
#include "core/features/sample.h"
#include "core/methods/exact.h"
#include "core/methods/registry.h"
#include "core/model/model.h"
#include "tests/unit/method_testutil.h"

/* ---- helpers ---- */

static const gp_method *ssgp(void)
{
    const gp_method *m = gp_method_find("ssgp");
    if (m == NULL)
        fail_msg("method 'ssgp' is not registered");
    return m;
}

static double *dalloc(size_t count)
{
    double *p = malloc((count ? count : 1) * sizeof *p);
    assert_non_null(p);
    return p;
}

static gp_kernel *leaf(gp_kernel_type t, size_t d, int ard, const size_t *dims, size_t n_dims)
{
    gp_kernel *k = NULL;
    gp_error err;
    if (gp_kernel_leaf(&k, t, d, ard, dims, n_dims, &err) != GP_OK)
        fail_msg("kernel: %s", err.message);
    return k;
}

static const gp_option_spec *find_spec(const gp_method *m, const char *name)
{
    for (size_t i = 0; i < m->n_options; i++)
        if (strcmp(m->options[i].name, name) == 0)
            return &m->options[i];
    return NULL;
}

/* 1-D problem: x uniform on [-2, 2], y = sin(3x) + 0.1 noise. */
static void sine_data(size_t n, uint64_t seed, double *X, double *y)
{
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    for (size_t i = 0; i < n; i++) {
        X[i] = -2.0 + 4.0 * gp_rng_uniform(&rng);
        y[i] = sin(3.0 * X[i]) + 0.1 * gp_rng_normal(&rng);
    }
}

/* d-D problem, column-major X on [-2, 2]^d; the target f is returned in f (may be NULL). */
static double smooth_f(const double *x, size_t d)
{
    double s = 0.0;
    for (size_t k = 0; k < d; k++)
        s += sin(1.3 * x[k] + 0.4 * (double)k) * (k == 1 ? 0.5 : 1.0);
    return s;
}

static void toy_data(size_t n, size_t d, uint64_t seed, double noise_sd, double *X, double *y,
                     double *f)
{
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    for (size_t i = 0; i < n * d; i++)
        X[i] = -2.0 + 4.0 * gp_rng_uniform(&rng);
    double x[16];
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < d; k++)
            x[k] = X[k * n + i];
        double fi = smooth_f(x, d);
        if (f)
            f[i] = fi;
        y[i] = fi + noise_sd * gp_rng_normal(&rng);
    }
}

static double rmse(const double *a, const double *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (a[i] - b[i]) * (a[i] - b[i]);
    return sqrt(s / (double)n);
}

static double stddev(const double *a, size_t n)
{
    double m = 0.0, s = 0.0;
    for (size_t i = 0; i < n; i++)
        m += a[i];
    m /= (double)n;
    for (size_t i = 0; i < n; i++)
        s += (a[i] - m) * (a[i] - m);
    return sqrt(s / (double)n);
}

/* ---- registration, options, kernels ---- */

/* The default core/methods/ssgp/ssgp.h documents for option `name` ("(default X" on the
 * option's line or the next ones), or `fallback` when the header cannot be read
 * (tests run from the repository root). Keeps the spec and its documentation
 * in step. */
static void doc_default(const char *name, const char *fallback, char *out, size_t len)
{
    snprintf(out, len, "%s", fallback);
    FILE *f = fopen("core/methods/ssgp/ssgp.h", "r");
    if (f == NULL) /* a moved header must not turn the check off */
        fail_msg("cannot read core/methods/ssgp/ssgp.h (tests run from the repository root)");
    char line[512];
    int in = 0;
    while (fgets(line, sizeof line, f)) {
        char *p = strstr(line, " *   ");
        if (p && strncmp(p + 5, name, strlen(name)) == 0 && p[5 + strlen(name)] == ' ')
            in = 1;
        else if (p && p[5] != ' ')
            in = 0;
        char *d = in ? strstr(line, "(default ") : NULL;
        if (d) {
            d += strlen("(default ");
            size_t k = strcspn(d, ":;,)\n");
            snprintf(out, len, "%.*s", (int)k, d);
            break;
        }
    }
    fclose(f);
}

static void check_number_default(const gp_method *m, const char *name, const char *fallback)
{
    char doc[64];
    doc_default(name, fallback, doc, sizeof doc);
    const gp_option_spec *s = find_spec(m, name);
    if (s == NULL)
        fail_msg("ssgp has no option '%s'", name);
    printf("option %s: default %.17g, documented %s\n", name, s->default_number, doc);
    if (s->default_number != strtod(doc, NULL))
        fail_msg("option %s: default %.17g, core/methods/ssgp/ssgp.h documents %s", name, s->default_number,
                 doc);
}

static void test_registered_options(void **state)
{
    (void)state;
    const gp_method *m = ssgp();
    assert_string_equal(m->name, "ssgp");
    const gp_option_spec *s;

    assert_non_null(s = find_spec(m, "features"));
    assert_int_equal(s->type, GP_OPTION_INT);
    check_number_default(m, "features", "100");
    assert_true(s->min >= 1.0); /* 0 features is no model */

    assert_non_null(s = find_spec(m, "frequencies"));
    assert_int_equal(s->type, GP_OPTION_ENUM);
    assert_non_null(s->default_string);
    char doc[64];
    doc_default("frequencies", "auto", doc, sizeof doc);
    assert_string_equal(doc, "auto");
    assert_string_equal(s->default_string, "auto");
    assert_non_null(s->choices);
    const char *names[] = {"mc", "qmc", "orf", "stein", "auto"};
    for (size_t i = 0; i < 5; i++) {
        gp_option_value v = {.name = "frequencies", .string = names[i]};
        gp_error err;
        if (gp_options_validate(m, &v, 1, &err) != GP_OK)
            fail_msg("frequencies '%s' refused: %s", names[i], err.message);
    }
    gp_option_value bad = {.name = "frequencies", .string = "sobol"};
    gp_error err;
    assert_int_equal(gp_options_validate(m, &bad, 1, &err), GP_EINVAL);

    assert_non_null(s = find_spec(m, "stein_iterations"));
    assert_int_equal(s->type, GP_OPTION_INT);
    check_number_default(m, "stein_iterations", "2000");
    assert_non_null(s = find_spec(m, "stein_step"));
    assert_int_equal(s->type, GP_OPTION_NUMBER);
    check_number_default(m, "stein_step", "0.1");

    assert_non_null(s = find_spec(m, "bandwidth"));
    assert_int_equal(s->type, GP_OPTION_ENUM);
    doc_default("bandwidth", "total", doc, sizeof doc);
    assert_string_equal(s->default_string, doc);
    gp_option_value bw[2] = {{.name = "bandwidth", .string = "total"},
                             {.name = "bandwidth", .string = "per_dim"}};
    assert_int_equal(gp_options_validate(m, &bw[0], 1, &err), GP_OK);
    assert_int_equal(gp_options_validate(m, &bw[1], 1, &err), GP_OK);

    assert_non_null(s = find_spec(m, "learn_frequencies"));
    assert_int_equal(s->type, GP_OPTION_BOOL);
    assert_true(s->default_number == 0.0);

    /* The L-BFGS limits, as for exact. */
    const gp_method *ex = gp_method_find("exact");
    assert_non_null(ex);
    const char *lim[] = {"max_iterations", "tolerance"};
    for (size_t i = 0; i < 2; i++) {
        const gp_option_spec *a = find_spec(m, lim[i]), *b = find_spec(ex, lim[i]);
        if (a == NULL)
            fail_msg("ssgp has no option '%s'", lim[i]);
        assert_non_null(b);
        assert_int_equal(a->type, b->type);
        if (a->default_number != b->default_number)
            fail_msg("%s default %g, exact's %g", lim[i], a->default_number,
                     b->default_number);
    }
    /* Every option in the spec has a default within its bounds. */
    for (size_t i = 0; i < m->n_options; i++) {
        s = &m->options[i];
        if (s->type == GP_OPTION_INT || s->type == GP_OPTION_NUMBER)
            assert_true(s->default_number >= s->min && s->default_number <= s->max);
    }
}

static void test_kernel_restriction(void **state)
{
    (void)state;
    const gp_method *m = ssgp();
    assert_int_equal(m->composite_kernels, 0);
    assert_non_null(m->kernels);
    assert_int_equal(m->n_kernels, 4);
    int seen[GP_KERNEL_TYPE_COUNT] = {0};
    for (size_t i = 0; i < m->n_kernels; i++) {
        assert_true((int)m->kernels[i] >= 0 && m->kernels[i] < GP_KERNEL_TYPE_COUNT);
        seen[m->kernels[i]]++;
    }
    assert_int_equal(seen[GP_KERNEL_RBF], 1);
    assert_int_equal(seen[GP_KERNEL_MATERN12], 1);
    assert_int_equal(seen[GP_KERNEL_MATERN32], 1);
    assert_int_equal(seen[GP_KERNEL_MATERN52], 1);

    /* A kernel outside the list reaching the method directly is refused, not crashed on. */
    double X[40], y[40];
    sine_data(40, 3, X, y);
    gp_kernel *k = leaf(GP_KERNEL_RQ, 1, 1, NULL, 0);
    gp_fit_request req;
    fit_request(&req, X, y, 40, 1, k, NULL, 0);
    gp_model *model = NULL;
    gp_error err;
    int rc = gp_model_fit(m, &req, &model, &err);
    printf("rq kernel: rc %d (%s) %s\n", rc, gp_status_name(rc), err.message);
    assert_true(rc < 0);
    assert_null(model);
    gp_kernel_free(k);
}

/* ---- fits with every sampler ---- */

static void test_fit_samplers(void **state)
{
    (void)state;
    const size_t n = 200, m = 97;
    double X[200], y[200], Xs[97], fs[97], mu[97], vo[97], vl[97];
    sine_data(n, 11, X, y);
    for (size_t i = 0; i < m; i++) {
        Xs[i] = -1.9 + 3.8 * (double)i / (double)(m - 1);
        fs[i] = sin(3.0 * Xs[i]);
    }
    const char *samplers[] = {"mc", "qmc", "orf", "stein", "auto"};
    gp_kernel *k = leaf(GP_KERNEL_RBF, 1, 1, NULL, 0);
    /* The exact GP on the same data is the yardstick. */
    gp_fit_request ereq;
    fit_request(&ereq, X, y, n, 1, k, NULL, 0);
    gp_model *ex = fit_ok(&gp_method_exact, &ereq, "exact");
    predict_ok(ex, Xs, m, 1, 1, mu, vo, NULL);
    double e_exact = rmse(mu, fs, m);
    printf("exact GP: RMSE vs sin(3x) %.4f, lengthscale %.4g\n", e_exact,
           exp(ex->kernel->log_lengthscale[0]));
    gp_model_free(ex);
    int bad_rmse = 0;
    for (size_t s = 0; s < 5; s++)
        for (int learn = 0; learn <= 1; learn++) {
            gp_option_value opts[3] = {
                {.name = "frequencies", .string = samplers[s]},
                {.name = "learn_frequencies", .number = learn},
                {.name = "stein_iterations", .number = 60},
            };
            gp_fit_request req;
            fit_request(&req, X, y, n, 1, k, opts, 3);
            char what[64];
            snprintf(what, sizeof what, "%s, learn_frequencies %d", samplers[s], learn);
            gp_model *model = fit_ok(ssgp(), &req, what);
            predict_ok(model, Xs, m, 1, 1, mu, vo, NULL);
            predict_ok(model, Xs, m, 1, 0, mu, vl, NULL);
            double e = rmse(mu, fs, m), noise = model->noise_variance * model->y_scale *
                                                model->y_scale;
            const gp_info_item *it = find_info(model, "frequencies");
            printf("%-5s learn %d: RMSE vs sin(3x) %.4f, lengthscale %.4g, noise %.4g (orig "
                   "units), LML %.4f, %d iterations, info.frequencies %s\n",
                   samplers[s], learn, e, exp(model->kernel->log_lengthscale[0]), noise,
                   model->diag.objective, model->diag.iterations,
                   it && it->string ? it->string : "(missing)");
            /* Fixed frequencies: within 3x the exact GP's error (R = 100 on a 1-D sine is
             * plenty). Learned frequencies (2R + 3 parameters on 200 points) may overfit:
             * below the noise sd. */
            double bound = learn ? 0.1 : 3.0 * e_exact;
            if (!(e < bound)) { /* reported at the end, so every sampler is exercised */
                printf("FAIL %s: test RMSE %.4f against sin(3x) above %.4f (exact GP %.4f; "
                       "noise sd 0.1); fitted lengthscale %.4g, LML %.4f\n",
                       what, e, bound, e_exact, exp(model->kernel->log_lengthscale[0]),
                       model->diag.objective);
                bad_rmse++;
            }
            assert_true(isfinite(model->diag.objective));
            for (size_t i = 0; i < m; i++) {
                if (!(isfinite(vl[i]) && vl[i] > 0.0 && isfinite(vo[i]) && vo[i] > 0.0))
                    fail_msg("%s: variance at %zu: latent %g, observation %g", what, i, vl[i],
                             vo[i]);
                if (fabs(vo[i] - (vl[i] + noise)) > 1e-10 * vo[i])
                    fail_msg("%s: point %zu: observation variance %.15g != latent %.15g + "
                             "noise %.15g",
                             what, i, vo[i], vl[i], noise);
            }
            /* The noise is in the right ballpark (0.01 true). */
            assert_true(noise > 0.002 && noise < 0.05);
            if (it == NULL || it->string == NULL)
                fail_msg("%s: model info has no string 'frequencies'", what);
            if (s < 4)
                assert_string_equal(it->string, samplers[s]);
            else if (strcmp(it->string, "mc") && strcmp(it->string, "qmc") &&
                     strcmp(it->string, "orf") && strcmp(it->string, "stein"))
                fail_msg("auto reported frequencies '%s', not a concrete sampler", it->string);
            gp_model_free(model);
        }
    gp_kernel_free(k);
    if (bad_rmse)
        fail_msg("%d of the 10 fits have a poor test RMSE (lines FAIL above)", bad_rmse);
}

static void test_seed_determinism(void **state)
{
    (void)state;
    const size_t n = 120, m = 31;
    double X[240], y[120], Xs[62];
    toy_data(n, 2, 5, 0.1, X, y, NULL);
    for (size_t i = 0; i < 2 * m; i++)
        Xs[i] = 2.0 * sin(0.9 * (double)i);
    gp_kernel *k = leaf(GP_KERNEL_MATERN52, 2, 1, NULL, 0);
    const char *samplers[] = {"mc", "stein"};
    for (size_t s = 0; s < 2; s++) {
        gp_option_value opts[3] = {{.name = "frequencies", .string = samplers[s]},
                                   {.name = "features", .number = 40},
                                   {.name = "stein_iterations", .number = 30}};
        gp_fit_request req;
        fit_request(&req, X, y, n, 2, k, opts, 3);
        req.seed = 77;
        gp_model *a = fit_ok(ssgp(), &req, "seed 77"), *b = fit_ok(ssgp(), &req, "seed 77");
        req.seed = 78;
        gp_model *c = fit_ok(ssgp(), &req, "seed 78");
        double ma[31], va[31], mb[31], vb[31], mc[31], vc[31];
        predict_ok(a, Xs, m, 2, 1, ma, va, NULL);
        predict_ok(b, Xs, m, 2, 1, mb, vb, NULL);
        predict_ok(c, Xs, m, 2, 1, mc, vc, NULL);
        assert_memory_equal(ma, mb, sizeof ma);
        assert_memory_equal(va, vb, sizeof va);
        assert_true(a->diag.objective == b->diag.objective);
        if (memcmp(ma, mc, sizeof ma) == 0)
            fail_msg("%s: seeds 77 and 78 gave identical predictions", samplers[s]);
        gp_model_free(a);
        gp_model_free(b);
        gp_model_free(c);
    }
    gp_kernel_free(k);
}

/* ---- convergence to the exact GP with the kernel and noise fixed ---- */

static void conv_errors(const double *X, const double *y, size_t n, const gp_kernel *k,
                        double noise, const double *Xs, size_t m, const double *mu_ex,
                        const double *v_ex, size_t R, uint64_t seed, double *err_mu,
                        double *err_v)
{
    gp_option_value opts[2] = {{.name = "features", .number = (double)R},
                               {.name = "frequencies", .string = "mc"}};
    gp_fit_request req;
    fit_request(&req, X, y, n, 2, k, opts, 2);
    req.standardize = 0;
    req.noise_given = 1;
    req.noise_fixed = 1;
    req.noise_variance = noise;
    req.seed = seed;
    gp_model *model = fit_ok(ssgp(), &req, "fixed-kernel ssgp");
    /* Nothing was learned: the kernel and noise are the given ones (to rounding: the
     * noise may go through log and exp). */
    if (fabs(model->noise_variance - noise) > 4e-16 * noise)
        fail_msg("fixed noise %.17g came back as %.17g", noise, model->noise_variance);
    for (size_t q = 0; q < k->n_lengthscale; q++)
        assert_true(model->kernel->log_lengthscale[q] == k->log_lengthscale[q]);
    assert_true(model->kernel->log_variance == k->log_variance);
    double *mu = dalloc(m), *v = dalloc(m);
    predict_ok(model, Xs, m, 2, 0, mu, v, NULL);
    double em = 0.0, ev = 0.0;
    for (size_t i = 0; i < m; i++) {
        em = fmax(em, fabs(mu[i] - mu_ex[i]));
        ev = fmax(ev, fabs(v[i] - v_ex[i]));
    }
    *err_mu = em;
    *err_v = ev;
    free(mu);
    free(v);
    gp_model_free(model);
}

static void test_converges_to_exact(void **state)
{
    (void)state;
    /* Small N and moderate noise keep the GP in the regime where its error is
     * linear in the kernel's MC error (which is O(1/sqrt(R))). */
    const size_t n = 40, m = 40;
    double X[80], y[40], Xs[80];
    toy_data(n, 2, 21, 0.1, X, y, NULL);
    gp_rng rng;
    gp_rng_seed(&rng, 22);
    for (size_t i = 0; i < 2 * m; i++)
        Xs[i] = -2.2 + 4.4 * gp_rng_uniform(&rng);
    gp_kernel *k = leaf(GP_KERNEL_RBF, 2, 1, NULL, 0);
    k->log_variance = log(1.3);
    k->log_lengthscale[0] = log(0.9);
    k->log_lengthscale[1] = log(1.4);
    k->fixed = GP_FIX_ALL;
    const double noise = 0.1;

    gp_fit_request req;
    fit_request(&req, X, y, n, 2, k, NULL, 0);
    req.standardize = 0;
    req.noise_given = 1;
    req.noise_fixed = 1;
    req.noise_variance = noise;
    gp_model *ex = fit_ok(&gp_method_exact, &req, "exact");
    double mu_ex[40], v_ex[40];
    predict_ok(ex, Xs, m, 2, 0, mu_ex, v_ex, NULL);

    const size_t R_small = 150, R_big = 1500, seeds = 3;
    double em_s = 0, ev_s = 0, em_b = 0, ev_b = 0;
    for (uint64_t s = 0; s < seeds; s++) {
        double em, ev;
        conv_errors(X, y, n, k, noise, Xs, m, mu_ex, v_ex, R_small, 300 + s, &em, &ev);
        em_s += em / (double)seeds;
        ev_s += ev / (double)seeds;
        conv_errors(X, y, n, k, noise, Xs, m, mu_ex, v_ex, R_big, 400 + s, &em, &ev);
        printf("seed %d, R=%zu: max |mean - exact| %.4g, max |latent var - exact| %.4g\n",
               (int)s, R_big, em, ev);
        /* The kernel's own MC error is a2 / sqrt(2R) ~ 0.024 per entry at R = 1500. */
        if (em > 0.1 || ev > 0.05)
            fail_msg("R=%zu seed %d: max |mean - exact| %.4g (bound 0.1), max |latent var - "
                     "exact| %.4g (bound 0.05)",
                     R_big, (int)s, em, ev);
        em_b += em / (double)seeds;
        ev_b += ev / (double)seeds;
    }
    printf("mean over seeds of max errors: R=%zu mean %.4g var %.4g; R=%zu mean %.4g var %.4g "
           "(expected ratio ~%.1f)\n",
           R_small, em_s, ev_s, R_big, em_b, ev_b, sqrt((double)R_big / (double)R_small));
    if (!(em_b < em_s / 1.8 && ev_b < ev_s / 1.8))
        fail_msg("errors do not shrink with R: mean %.4g -> %.4g, variance %.4g -> %.4g (R %zu "
                 "-> %zu)",
                 em_s, em_b, ev_s, ev_b, R_small, R_big);
    gp_model_free(ex);
    gp_kernel_free(k);
}

/* ---- predictions are those of the exact GP of the feature kernel ---- */

/* With the model's own frequencies (exported omega), working-unit kernel and
 * noise, the SSGP predictive mean and latent covariance must equal the dense
 * GP with kernel k^(x, x') = a2/R sum_r cos(omega_r^T (x~ - x~')), x~ = x / l,
 * computed here with N x N matrices and LAPACKE. */
static void check_feature_kernel_gp(gp_kernel_type type, int learn, int standardize)
{
    const size_t n = 60, d = 2, R = 30, m = 15;
    double X[120], y[60], Xs[30];
    toy_data(n, d, 111, 0.1, X, y, NULL);
    for (size_t i = 0; i < n; i++)
        y[i] = 3.0 * y[i] + 5.0; /* so that standardisation matters */
    for (size_t i = 0; i < m * d; i++)
        Xs[i] = 2.2 * sin(0.9 * (double)i + 0.3);
    gp_kernel *k = leaf(type, d, 1, NULL, 0);
    gp_option_value opts[3] = {{.name = "features", .number = (double)R},
                               {.name = "learn_frequencies", .number = learn},
                               {.name = "frequencies", .string = "mc"}};
    gp_fit_request req;
    fit_request(&req, X, y, n, d, k, opts, 3);
    req.standardize = standardize;
    gp_model *model = fit_ok(ssgp(), &req, "feature-kernel model");
    gp_state st;
    gp_state_init(&st);
    gp_error err;
    assert_int_equal(gp_model_export(model, &st, &err), GP_OK);
    const double *omega = NULL;
    if (gp_state_get(&st, "omega", R, d, &omega, &err) != GP_OK)
        fail_msg("omega: %s", err.message);

    /* Working units. */
    double a2 = exp(model->kernel->log_variance), s = model->noise_variance, inv_ls[2];
    for (size_t q = 0; q < d; q++)
        inv_ls[q] = exp(-model->kernel->log_lengthscale[model->kernel->n_lengthscale > 1 ? q : 0]);
    size_t N = n + m;
    double *Z = dalloc(N * d), *yw = dalloc(n); /* training then test points, scaled */
    for (size_t q = 0; q < d; q++) {
        for (size_t i = 0; i < n; i++)
            Z[q * N + i] = (X[q * n + i] - model->x_mean[q]) / model->x_scale[q] * inv_ls[q];
        for (size_t i = 0; i < m; i++)
            Z[q * N + n + i] =
                (Xs[q * m + i] - model->x_mean[q]) / model->x_scale[q] * inv_ls[q];
    }
    for (size_t i = 0; i < n; i++)
        yw[i] = (y[i] - model->y_mean) / model->y_scale;
    double *G = dalloc(N * N); /* feature kernel on all points */
    for (size_t j = 0; j < N; j++)
        for (size_t i = 0; i < N; i++) {
            double acc = 0.0;
            for (size_t r = 0; r < R; r++) {
                double z = 0.0;
                for (size_t q = 0; q < d; q++)
                    z += omega[q * R + r] * (Z[q * N + i] - Z[q * N + j]);
                acc += cos(z);
            }
            G[j * N + i] = a2 * acc / (double)R;
        }
    double *K = dalloc(n * n), *B = dalloc(n * (m + 1));
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++)
            K[j * n + i] = G[j * N + i] + (i == j ? s : 0.0);
    for (size_t j = 0; j < m; j++)
        for (size_t i = 0; i < n; i++)
            B[j * n + i] = G[(n + j) * N + i];
    memcpy(B + m * n, yw, n * sizeof *yw);
    assert_int_equal(LAPACKE_dposv(LAPACK_COL_MAJOR, 'L', (lapack_int)n, (lapack_int)(m + 1), K,
                                   (lapack_int)n, B, (lapack_int)n),
                     0);
    /* B[:, j] = (K^ + s I)^{-1} k*_j, B[:, m] = (K^ + s I)^{-1} y */
    double mu[15], var[15], C[225];
    predict_ok(model, Xs, m, d, 0, mu, var, C);
    double ys2 = model->y_scale * model->y_scale;
    for (size_t a = 0; a < m; a++) {
        double ref_mu = 0.0;
        for (size_t i = 0; i < n; i++)
            ref_mu += G[(n + a) * N + i] * B[m * n + i];
        ref_mu = model->y_mean + model->y_scale * ref_mu;
        if (fabs(mu[a] - ref_mu) > 1e-8 * (fabs(ref_mu) + model->y_scale))
            fail_msg("%s learn %d std %d: mean[%zu] %.15g, feature-kernel GP %.15g",
                     gp_kernel_type_name(type), learn, standardize, a, mu[a], ref_mu);
        for (size_t b = 0; b <= a; b++) {
            double c = G[(n + b) * N + (n + a)];
            for (size_t i = 0; i < n; i++)
                c -= G[(n + a) * N + i] * B[b * n + i];
            c *= ys2;
            if (fabs(C[b * m + a] - c) > 1e-8 * a2 * ys2)
                fail_msg("%s learn %d std %d: latent cov[%zu][%zu] %.15g, feature-kernel GP "
                         "%.15g",
                         gp_kernel_type_name(type), learn, standardize, a, b, C[b * m + a], c);
        }
    }
    free(Z);
    free(yw);
    free(G);
    free(K);
    free(B);
    gp_state_free(&st);
    gp_model_free(model);
    gp_kernel_free(k);
}

static void test_matches_feature_kernel_gp(void **state)
{
    (void)state;
    check_feature_kernel_gp(GP_KERNEL_RBF, 0, 1);
    check_feature_kernel_gp(GP_KERNEL_MATERN32, 1, 1);
    check_feature_kernel_gp(GP_KERNEL_MATERN52, 0, 0);
}

/* ---- full covariance and samples ---- */

static gp_model *toy_model(size_t n, size_t d, uint64_t seed, gp_kernel_type t)
{
    double *X = dalloc(n * d), *y = dalloc(n);
    toy_data(n, d, seed, 0.1, X, y, NULL);
    gp_kernel *k = leaf(t, d, 1, NULL, 0);
    gp_option_value opts[1] = {{.name = "features", .number = 60}};
    gp_fit_request req;
    fit_request(&req, X, y, n, d, k, opts, 1);
    gp_model *model = fit_ok(ssgp(), &req, "toy model");
    gp_kernel_free(k);
    free(X);
    free(y);
    return model;
}

static void test_full_covariance(void **state)
{
    (void)state;
    gp_model *model = toy_model(150, 2, 31, GP_KERNEL_RBF);
    const size_t m = 25;
    double Xs[50], mu[25], var[25], mu2[25], var2[25], C[625];
    for (size_t i = 0; i < 2 * m; i++)
        Xs[i] = 2.3 * sin(1.37 * (double)i + 0.2);
    for (int noise = 0; noise <= 1; noise++) {
        predict_ok(model, Xs, m, 2, noise, mu, var, C);
        predict_ok(model, Xs, m, 2, noise, mu2, var2, NULL);
        double vmax = 0.0;
        for (size_t i = 0; i < m; i++) {
            assert_float_equal(mu[i], mu2[i], 1e-12 * (1.0 + fabs(mu2[i])));
            assert_float_equal(var[i], var2[i], 1e-12 * var2[i]);
            if (fabs(C[i * m + i] - var[i]) > 1e-12 * var[i])
                fail_msg("include_noise %d: cov[%zu][%zu] = %.17g, variance %.17g", noise, i, i,
                         C[i * m + i], var[i]);
            vmax = fmax(vmax, var[i]);
        }
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < i; j++)
                if (fabs(C[j * m + i] - C[i * m + j]) > 1e-14 * vmax)
                    fail_msg("include_noise %d: cov not symmetric at (%zu,%zu): %.17g vs %.17g",
                             noise, i, j, C[j * m + i], C[i * m + j]);
        /* PSD: Cholesky with a tiny jitter succeeds. */
        for (size_t i = 0; i < m; i++)
            C[i * m + i] += 1e-10 * vmax;
        lapack_int info = LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)m, C, (lapack_int)m);
        if (info != 0)
            fail_msg("include_noise %d: covariance not PSD (dpotrf info %d)", noise, (int)info);
    }
    gp_model_free(model);
}

static void test_samples(void **state)
{
    (void)state;
    gp_model *model = toy_model(100, 2, 41, GP_KERNEL_MATERN32);
    const size_t m = 6, S = 4000;
    double Xs[12];
    for (size_t i = 0; i < 12; i++)
        Xs[i] = -2.5 + 0.45 * (double)i;
    double *samples = dalloc(m * S), mu[6], var[6], C[36], vnoise[6];
    gp_error err;
    gp_sample_request sr = {.X = Xs, .m = m, .d = 2, .n_samples = S, .seed = 11,
                            .include_noise = 0};
    assert_int_equal(gp_model_sample(model, &sr, samples, &err), GP_OK);
    predict_ok(model, Xs, m, 2, 0, mu, var, C);
    double em[6];
    for (size_t i = 0; i < m; i++) {
        em[i] = 0.0;
        for (size_t s = 0; s < S; s++)
            em[i] += samples[s * m + i];
        em[i] /= (double)S;
        if (fabs(em[i] - mu[i]) > 5.0 * sqrt(var[i] / (double)S))
            fail_msg("point %zu: sample mean %.6g, predictive mean %.6g (se %.3g)", i, em[i],
                     mu[i], sqrt(var[i] / (double)S));
    }
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j <= i; j++) {
            double ec = 0.0;
            for (size_t s = 0; s < S; s++)
                ec += (samples[s * m + i] - em[i]) * (samples[s * m + j] - em[j]);
            ec /= (double)(S - 1);
            double se = sqrt((C[i * m + i] * C[j * m + j] + C[j * m + i] * C[j * m + i]) /
                             (double)S);
            if (fabs(ec - C[j * m + i]) > 5.0 * se + 1e-12)
                fail_msg("cov(%zu,%zu): empirical %.6g, predictive %.6g (se %.3g)", i, j, ec,
                         C[j * m + i], se);
        }

    /* Same seed, same samples; another seed, other samples. */
    double a[6 * 10], b[6 * 10], c[6 * 10];
    gp_sample_request s10 = {.X = Xs, .m = m, .d = 2, .n_samples = 10, .seed = 5};
    assert_int_equal(gp_model_sample(model, &s10, a, &err), GP_OK);
    assert_int_equal(gp_model_sample(model, &s10, b, &err), GP_OK);
    assert_memory_equal(a, b, sizeof a);
    s10.seed = 6;
    assert_int_equal(gp_model_sample(model, &s10, c, &err), GP_OK);
    assert_memory_not_equal(a, c, sizeof a);

    /* include_noise: the empirical variance matches the observation variance,
     * which is the latent one plus the noise. */
    sr.include_noise = 1;
    sr.seed = 12;
    assert_int_equal(gp_model_sample(model, &sr, samples, &err), GP_OK);
    predict_ok(model, Xs, m, 2, 1, mu, vnoise, NULL);
    double noise = model->noise_variance * model->y_scale * model->y_scale;
    for (size_t i = 0; i < m; i++) {
        assert_float_equal(vnoise[i], var[i] + noise, 1e-10 * vnoise[i]);
        double mean = 0.0, ev = 0.0;
        for (size_t s = 0; s < S; s++)
            mean += samples[s * m + i];
        mean /= (double)S;
        for (size_t s = 0; s < S; s++)
            ev += (samples[s * m + i] - mean) * (samples[s * m + i] - mean);
        ev /= (double)(S - 1);
        double se = vnoise[i] * sqrt(2.0 / (double)S);
        if (fabs(ev - vnoise[i]) > 5.0 * se)
            fail_msg("include_noise: point %zu: sample variance %.6g, observation variance "
                     "%.6g (latent %.6g + noise %.6g; se %.3g)",
                     i, ev, vnoise[i], var[i], noise, se);
    }
    free(samples);
    gp_model_free(model);
}

/* ---- export / import ---- */

static void test_export_import(void **state)
{
    (void)state;
    const size_t n = 90, d = 3, R = 35;
    double X[270], y[90];
    toy_data(n, d, 51, 0.1, X, y, NULL);
    const size_t dims[2] = {0, 2};
    gp_kernel *k = leaf(GP_KERNEL_MATERN52, d, 1, dims, 2);
    gp_option_value opts[2] = {{.name = "features", .number = (double)R},
                               {.name = "frequencies", .string = "qmc"}};
    gp_fit_request req;
    fit_request(&req, X, y, n, d, k, opts, 2);
    gp_model *model = fit_ok(ssgp(), &req, "export model");
    gp_state st;
    gp_state_init(&st);
    gp_error err;
    assert_int_equal(gp_model_export(model, &st, &err), GP_OK);
    const gp_named_array *a;
    if ((a = gp_state_find(&st, "omega")) == NULL)
        fail_msg("exported state has no array 'omega'");
    assert_int_equal(a->rows, R);
    assert_int_equal(a->cols, 2);
    if ((a = gp_state_find(&st, "alpha")) == NULL)
        fail_msg("exported state has no array 'alpha'");
    assert_int_equal(a->rows * a->cols, 2 * R);
    if ((a = gp_state_find(&st, "chol_packed")) == NULL)
        fail_msg("exported state has no array 'chol_packed'");
    assert_int_equal(a->rows * a->cols, (2 * R) * (2 * R + 1) / 2);
    if ((a = gp_state_find(&st, "sampler")) != NULL) {
        assert_int_equal(a->rows * a->cols, 1);
        assert_true(a->data[0] == (double)GP_FREQ_QMC);
    }

    gp_model *copy = NULL;
    if (gp_model_import(ssgp(), &st, &copy, &err) != GP_OK)
        fail_msg("import: %s", err.message);
    const size_t m = 29;
    double Xs[87];
    for (size_t i = 0; i < 3 * m; i++)
        Xs[i] = 2.0 * sin(0.7 * (double)i);
    double mu1[29], v1[29], mu2[29], v2[29], C1[29 * 29], C2[29 * 29];
    for (int noise = 0; noise <= 1; noise++) {
        predict_ok(model, Xs, m, d, noise, mu1, v1, C1);
        predict_ok(copy, Xs, m, d, noise, mu2, v2, C2);
        assert_memory_equal(mu1, mu2, sizeof mu1);
        assert_memory_equal(v1, v2, sizeof v1);
        assert_memory_equal(C1, C2, sizeof C1);
    }
    double s1[29 * 5], s2[29 * 5];
    for (int noise = 0; noise <= 1; noise++) {
        gp_sample_request sr = {.X = Xs, .m = m, .d = d, .n_samples = 5, .seed = 3,
                                .include_noise = noise};
        assert_int_equal(gp_model_sample(model, &sr, s1, &err), GP_OK);
        assert_int_equal(gp_model_sample(copy, &sr, s2, &err), GP_OK);
        assert_memory_equal(s1, s2, sizeof s1);
    }
    assert_true(copy->noise_variance == model->noise_variance);
    assert_true(copy->diag.objective == model->diag.objective);

    /* A state with a truncated array is refused. */
    gp_named_array *om = (gp_named_array *)gp_state_find(&st, "omega");
    om->rows -= 1;
    gp_model *bad = NULL;
    assert_true(gp_model_import(ssgp(), &st, &bad, &err) < 0);
    assert_null(bad);
    gp_state_free(&st);
    gp_model_free(model);
    gp_model_free(copy);
    gp_kernel_free(k);
}

/* ---- kernels and inputs ---- */

static void test_matern(void **state)
{
    (void)state;
    const size_t n = 200, d = 2, m = 100;
    double X[400], y[200], Xs[200], fs[100], ys[100], mu[100], var[100];
    toy_data(n, d, 61, 0.1, X, y, NULL);
    toy_data(m, d, 62, 0.1, Xs, ys, fs);
    double sd = stddev(fs, m);
    const gp_kernel_type types[] = {GP_KERNEL_MATERN12, GP_KERNEL_MATERN32, GP_KERNEL_MATERN52};
    for (size_t t = 0; t < 3; t++) {
        gp_kernel *k = leaf(types[t], d, 1, NULL, 0);
        gp_fit_request req;
        fit_request(&req, X, y, n, d, k, NULL, 0);
        gp_model *model = fit_ok(ssgp(), &req, gp_kernel_type_name(types[t]));
        predict_ok(model, Xs, m, d, 1, mu, var, NULL);
        for (size_t i = 0; i < m; i++)
            if (!(isfinite(mu[i]) && isfinite(var[i]) && var[i] > 0.0))
                fail_msg("%s: point %zu: mean %g variance %g", gp_kernel_type_name(types[t]), i,
                         mu[i], var[i]);
        double e = rmse(mu, fs, m);
        const gp_info_item *it = find_info(model, "frequencies");
        printf("%s: RMSE %.4f vs target sd %.4f (frequencies %s)\n",
               gp_kernel_type_name(types[t]), e, sd, it && it->string ? it->string : "?");
        if (!(e < 0.3 * sd))
            fail_msg("%s: test RMSE %.4f, target sd %.4f", gp_kernel_type_name(types[t]), e, sd);
        gp_model_free(model);
        gp_kernel_free(k);
    }
}

static void test_active_dims(void **state)
{
    (void)state;
    const size_t n = 150, d = 3, m = 20, R = 30;
    double X[450], y[150];
    gp_rng rng;
    gp_rng_seed(&rng, 71);
    for (size_t i = 0; i < n * d; i++)
        X[i] = -2.0 + 4.0 * gp_rng_uniform(&rng);
    for (size_t i = 0; i < n; i++)
        y[i] = sin(1.2 * X[i]) + cos(0.8 * X[2 * n + i]) + 0.05 * gp_rng_normal(&rng);
    const size_t dims[2] = {0, 2};
    gp_kernel *k = leaf(GP_KERNEL_RBF, d, 1, dims, 2);
    gp_option_value opts[1] = {{.name = "features", .number = (double)R}};
    gp_fit_request req;
    fit_request(&req, X, y, n, d, k, opts, 1);
    gp_model *model = fit_ok(ssgp(), &req, "active_dims {0, 2}");
    gp_state st;
    gp_state_init(&st);
    gp_error err;
    assert_int_equal(gp_model_export(model, &st, &err), GP_OK);
    const gp_named_array *om = gp_state_find(&st, "omega");
    assert_non_null(om);
    assert_int_equal(om->rows, R);
    assert_int_equal(om->cols, 2);
    gp_state_free(&st);

    double Xs[60], Xs2[60], mu1[20], v1[20], mu2[20], v2[20], C1[400], C2[400];
    for (size_t i = 0; i < 3 * m; i++)
        Xs[i] = Xs2[i] = 1.8 * sin(0.77 * (double)i + 0.1);
    for (size_t i = 0; i < m; i++)
        Xs2[m + i] = 100.0 + 17.0 * (double)i; /* column 1, far outside the data */
    predict_ok(model, Xs, m, d, 1, mu1, v1, C1);
    predict_ok(model, Xs2, m, d, 1, mu2, v2, C2);
    assert_memory_equal(mu1, mu2, sizeof mu1);
    assert_memory_equal(v1, v2, sizeof v1);
    assert_memory_equal(C1, C2, sizeof C1);
    double s1[40], s2[40];
    gp_sample_request sr = {.X = Xs, .m = m, .d = d, .n_samples = 2, .seed = 9};
    assert_int_equal(gp_model_sample(model, &sr, s1, &err), GP_OK);
    sr.X = Xs2;
    assert_int_equal(gp_model_sample(model, &sr, s2, &err), GP_OK);
    assert_memory_equal(s1, s2, sizeof s1);
    /* and the fit is good on the columns it sees */
    double f[20];
    for (size_t i = 0; i < m; i++)
        f[i] = sin(1.2 * Xs[i]) + cos(0.8 * Xs[2 * m + i]);
    double e = rmse(mu1, f, m);
    printf("active_dims {0, 2}: RMSE %.4f\n", e);
    assert_true(e < 0.15);
    gp_model_free(model);
    gp_kernel_free(k);
}

static void test_shared_lengthscale(void **state)
{
    (void)state;
    const size_t n = 150, d = 2, m = 60;
    double X[300], y[150], Xs[120], fs[60], ys[60], mu[60], var[60];
    toy_data(n, d, 81, 0.1, X, y, NULL);
    toy_data(m, d, 82, 0.1, Xs, ys, fs);
    gp_kernel *k = leaf(GP_KERNEL_RBF, d, 0, NULL, 0);
    gp_option_value opts[2] = {{.name = "features", .number = 50},
                               {.name = "frequencies", .string = "orf"}};
    gp_fit_request req;
    fit_request(&req, X, y, n, d, k, opts, 2);
    gp_model *model = fit_ok(ssgp(), &req, "shared lengthscale");
    assert_int_equal(model->kernel->ard, 0);
    assert_int_equal(model->kernel->n_lengthscale, 1);
    predict_ok(model, Xs, m, d, 0, mu, var, NULL);
    for (size_t i = 0; i < m; i++)
        assert_true(isfinite(mu[i]) && isfinite(var[i]) && var[i] >= 0.0);
    double e = rmse(mu, fs, m);
    printf("shared lengthscale %.4g: RMSE %.4f (target sd %.4f)\n",
           exp(model->kernel->log_lengthscale[0]), e, stddev(fs, m));
    assert_true(e < 0.3 * stddev(fs, m));
    gp_model_free(model);
    gp_kernel_free(k);
}

/* N = 20000 with R = 50: an N x N matrix would be 3.2 GB; the fit must not need one. */
static void test_large_n(void **state)
{
    (void)state;
    const size_t n = 20000, d = 2, m = 200;
    double *X = dalloc(n * d), *y = dalloc(n);
    toy_data(n, d, 91, 0.2, X, y, NULL);
    gp_kernel *k = leaf(GP_KERNEL_RBF, d, 1, NULL, 0);
    gp_option_value opts[3] = {{.name = "features", .number = 50},
                               {.name = "frequencies", .string = "mc"},
                               {.name = "max_iterations", .number = 40}};
    gp_fit_request req;
    fit_request(&req, X, y, n, d, k, opts, 3);
    gp_model *model = fit_ok(ssgp(), &req, "N = 20000");
    double Xs[400], ys[200], fs[200], mu[200], var[200];
    toy_data(m, d, 92, 0.2, Xs, ys, fs);
    predict_ok(model, Xs, m, d, 1, mu, var, NULL);
    double e = rmse(mu, fs, m);
    printf("N=20000, R=50: RMSE %.4f, noise %.4g (true 0.04), %d iterations\n", e,
           model->noise_variance * model->y_scale * model->y_scale, model->diag.iterations);
    assert_true(e < 0.1);
    gp_model_free(model);
    gp_kernel_free(k);
    free(X);
    free(y);
}

static void test_bad_input(void **state)
{
    (void)state;
    double X[40], y[40];
    sine_data(40, 101, X, y);
    gp_kernel *k = leaf(GP_KERNEL_RBF, 1, 1, NULL, 0);
    gp_fit_request req;
    fit_request(&req, X, y, 40, 1, k, NULL, 0);
    gp_model *model = NULL;
    gp_error err;
    X[17] = NAN;
    assert_int_equal(gp_model_fit(ssgp(), &req, &model, &err), GP_EDATA);
    assert_string_equal(err.field, "X[17][0]");
    assert_null(model);
    X[17] = 0.5;

    gp_option_value zero = {.name = "features", .number = 0};
    assert_int_equal(gp_options_validate(ssgp(), &zero, 1, &err), GP_EINVAL);
    assert_string_equal(err.field, "options.features");
    req.options = &zero;
    req.n_options = 1;
    assert_int_equal(gp_model_fit(ssgp(), &req, &model, &err), GP_EINVAL);
    assert_null(model);
    gp_option_value frac = {.name = "features", .number = 2.5};
    assert_int_equal(gp_options_validate(ssgp(), &frac, 1, &err), GP_EINVAL);

    /* The memory guard, before any allocation: 20000 features need two
     * 40000 x 40000 matrices (25 GB), above the default budget (an exact fit
     * of 20000 points, 3.2 GB); a tiny max_train_points refuses R = 100. */
    gp_option_value huge = {.name = "features", .number = 20000};
    assert_int_equal(gp_options_validate(ssgp(), &huge, 1, &err), GP_OK);
    req.options = &huge;
    req.n_options = 1;
    assert_int_equal(gp_model_fit(ssgp(), &req, &model, &err), GP_ETOOBIG);
    assert_string_equal(err.field, "options.features");
    assert_null(model);
    req.n_options = 0;
    req.max_train_points = 10;
    assert_int_equal(gp_model_fit(ssgp(), &req, &model, &err), GP_ETOOBIG);
    assert_null(model);
    req.max_train_points = 0;

    /* NaN in a predict request names the point. */
    req.n_options = 0;
    model = fit_ok(ssgp(), &req, "clean data");
    double xs[3] = {0.1, NAN, 0.3}, mu[3], var[3];
    gp_predict_request pr = {.X = xs, .m = 3, .d = 1};
    gp_prediction out = {.mean = mu, .variance = var};
    assert_int_equal(gp_model_predict(model, &pr, &out, &err), GP_EDATA);
    assert_string_equal(err.field, "X[1][0]");
    gp_model_free(model);
    gp_kernel_free(k);
}

/* ---- a real dataset ---- */

static void test_concrete_vs_exact(void **state)
{
    (void)state;
    char why[256];
    if (!gp_datasets_present(why, sizeof why) || !gp_dataset_exists("concrete")) {
        printf("skipped: shared datasets absent (%s)\n", why);
        skip();
    }
    gp_dataset train, test;
    gp_error err;
    assert_int_equal(
        gp_dataset_load_split("concrete", "test20", 0, 0, 0, &train, &test, NULL, &err), GP_OK);
    double *mu = dalloc(test.n), *var = dalloc(test.n), r[2];
    for (int which = 0; which < 2; which++) {
        gp_kernel *k = leaf(GP_KERNEL_RBF, train.d, 1, NULL, 0);
        gp_option_value opts[1] = {{.name = "features", .number = 100}};
        gp_fit_request req;
        fit_request(&req, train.X, train.y, train.n, train.d, k, which ? opts : NULL,
                    which ? 1 : 0);
        gp_model *model = fit_ok(which ? ssgp() : &gp_method_exact, &req,
                                 which ? "concrete ssgp" : "concrete exact");
        predict_ok(model, test.X, test.n, test.d, 1, mu, var, NULL);
        r[which] = rmse(mu, test.y, test.n);
        const gp_info_item *it = find_info(model, "frequencies");
        printf("concrete (N=%zu): %s test RMSE %.4f%s%s\n", train.n, which ? "ssgp R=100" : "exact",
               r[which], which ? ", frequencies " : "", which && it && it->string ? it->string : "");
        gp_model_free(model);
        gp_kernel_free(k);
    }
    if (!(r[1] <= 1.5 * r[0]))
        fail_msg("concrete: ssgp RMSE %.4f > 1.5 x exact's %.4f", r[1], r[0]);
    free(mu);
    free(var);
    gp_dataset_free(&train);
    gp_dataset_free(&test);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registered_options),
        cmocka_unit_test(test_kernel_restriction),
        cmocka_unit_test(test_fit_samplers),
        cmocka_unit_test(test_seed_determinism),
        cmocka_unit_test(test_converges_to_exact),
        cmocka_unit_test(test_matches_feature_kernel_gp),
        cmocka_unit_test(test_full_covariance),
        cmocka_unit_test(test_samples),
        cmocka_unit_test(test_export_import),
        cmocka_unit_test(test_matern),
        cmocka_unit_test(test_active_dims),
        cmocka_unit_test(test_shared_lengthscale),
        cmocka_unit_test(test_large_n),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_concrete_vs_exact),
    };
    return cmocka_run_group_tests_name("ssgp", tests, NULL, NULL);
}
