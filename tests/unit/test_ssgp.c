/* Method "ssgp" (core/methods/ssgp/ssgp.h): registration and options, kernel
 * restriction, fits with every frequency sampler, determinism, convergence to
 * the exact GP as R grows, and predictions equal to those of the exact GP of
 * the feature kernel. Full covariance, samples, export/import, kernels and
 * inputs are test_ssgp_model.c's. */
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
#include "tests/unit/ssgp_fixture.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registered_options),
        cmocka_unit_test(test_kernel_restriction),
        cmocka_unit_test(test_fit_samplers),
        cmocka_unit_test(test_seed_determinism),
        cmocka_unit_test(test_converges_to_exact),
        cmocka_unit_test(test_matches_feature_kernel_gp),
    };
    return cmocka_run_group_tests_name("ssgp", tests, NULL, NULL);
}
