/* The contract every registered method keeps: the test cases are generated
 * from the registry (the pattern of GSL's multimin/test.c), so a new method
 * gets every check by being registered. On a small seeded problem, for each method:
 *   fit; method_info keys as the descriptor lists them; predict shapes and
 *   finite values, latent <= observation variance, covariance symmetric PSD
 *   with the variances on its diagonal, quantiles monotone (the median is the
 *   mean for a Gaussian predictive); samples seeded and reproducible, their
 *   mean near the predictive mean; export/import bit-identical; cancellation
 *   from the progress callback at every early iteration; progress within the
 *   job budget; NaN/Inf refused naming the cell; identical results for 1 and 2
 *   compute threads; the kernels the descriptor lists accepted, others refused;
 *   the likelihoods it does not list refused.
 * And for every non-Gaussian likelihood a method lists (likelihood_contract):
 *   labels kept raw and no noise; predict's latent and observation outputs
 *   (probability in (0, 1) and pulled towards 1/2 from the plug-in value, or
 *   the rate and count moments, counts as quantiles), y's moments with
 *   include_noise and f's without, the latent covariance PSD and refused for
 *   y; latent samples and observation draws centred on the predictive;
 *   export/import bit-identical; labels that do not fit refused naming the
 *   cell; 1 and 2 threads identical.
 *
 * Each check is its own test case, one per (method, check) and per
 * (method/likelihood, check), named so ("ssgp: samples", "svgp/bernoulli:
 * threads"), so that one failure does not hide the others; a case fits what
 * it needs itself.
 *
 * Budgets: every fit takes the method's `quick` preset (its descriptor's
 * iterations and sizes for a fit of some 40 points, never a behaviour
 * switch), which the check "quick preset" validates. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <lapacke.h>

#include "core/base/parallel.h"
#include "core/base/rng.h"
#include "core/base/state.h"
#include "core/methods/registry.h"
#include "core/model/method.h"
#include "core/model/model.h"
#include "tests/unit/testutil.h"

#define N 40
#define D 2
#define M 7 /* test points */
#define MAX_OPTS 8

typedef struct problem {
    double X[N * D], y[N];
    double Xs[M * D];
} problem;

static void make_problem(problem *p)
{
    gp_rng rng;
    gp_rng_seed(&rng, 2024);
    for (size_t i = 0; i < N * D; i++)
        p->X[i] = 4.0 * gp_rng_uniform(&rng) - 2.0;
    for (size_t i = 0; i < N; i++)
        p->y[i] = sin(2.0 * p->X[i]) + 0.5 * cos(p->X[N + i]) + 0.1 * gp_rng_normal(&rng);
    for (size_t i = 0; i < M * D; i++)
        p->Xs[i] = 3.0 * gp_rng_uniform(&rng) - 1.5;
}

typedef struct fit_setup {
    const gp_method *m;
    gp_option_value opts[MAX_OPTS];
    size_t n_opts;
    gp_kernel *kernel;
    gp_likelihood lik; /* of the fits (zeroed: gaussian) */
    gp_mean_type mean; /* of the fits (zeroed: zero mean) */
    problem p;
} fit_setup;

static void add_option(fit_setup *s, const char *name, double v)
{
    assert_true(s->n_opts < MAX_OPTS);
    s->opts[s->n_opts++] = (gp_option_value){.name = name, .number = v, .string = NULL};
}

static void setup_for(fit_setup *s, const gp_method *m)
{
    memset(s, 0, sizeof *s);
    s->m = m;
    make_problem(&s->p);
    for (size_t i = 0; i < m->n_quick; i++)
        add_option(s, m->quick[i].name, m->quick[i].number);
    gp_error err;
    gp_kernel_type first = GP_KERNEL_RBF;
    assert_true(gp_method_accepts_kernel_type(m, first));
    assert_int_equal(gp_kernel_leaf(&s->kernel, first, D, 1, NULL, 0, &err), GP_OK);
}

static void request(const fit_setup *s, gp_fit_request *req)
{
    memset(req, 0, sizeof *req);
    req->X = s->p.X;
    req->y = s->p.y;
    req->n = N;
    req->d = D;
    req->kernel = s->kernel;
    req->standardize = 1;
    req->seed = 7;
    req->options = s->opts;
    req->n_options = s->n_opts;
    req->likelihood = s->lik;
    req->mean = s->mean;
}

static gp_model *fit_or_fail(const fit_setup *s, const gp_fit_request *req)
{
    gp_model *model = NULL;
    gp_error err;
    int rc = gp_model_fit(s->m, req, &model, &err);
    if (rc != GP_OK)
        fail_msg("%s: fit failed: %s (%s, field '%s')", s->m->name, err.message,
                 gp_status_name(rc), err.field);
    return model;
}

/* ---- predictions ---- */

typedef struct pred {
    double mean[M], var[M], cov[M * M], q[M * 3];
} pred;

static const double levels[3] = {0.1, 0.5, 0.9};

static void predict(const gp_model *model, const double *Xs, int noise, pred *out)
{
    gp_predict_request pr = {.X = Xs, .m = M, .d = D, .include_noise = noise,
                             .full_covariance = 1, .quantiles = levels, .n_quantiles = 3};
    gp_prediction o = {.mean = out->mean, .variance = out->var, .covariance = out->cov,
                       .quantiles = out->q};
    gp_error err;
    int rc = gp_model_predict(model, &pr, &o, &err);
    if (rc != GP_OK)
        fail_msg("%s: predict failed: %s", model->method->name, err.message);
}

static void check_psd(const char *name, const double *cov)
{
    double a[M * M], scale = 0.0;
    for (size_t i = 0; i < M; i++)
        scale = fmax(scale, cov[i * M + i]);
    for (size_t j = 0; j < M; j++)
        for (size_t i = 0; i < M; i++) {
            tu_assert_close(cov[j * M + i], cov[i * M + j], 0.0, 1e-12 * scale,
                            "%s: covariance symmetric at (%zu, %zu)", name, i, j);
            a[j * M + i] = cov[j * M + i] + (i == j ? 1e-10 * scale : 0.0);
        }
    lapack_int info = LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', M, a, M);
    if (info != 0)
        fail_msg("%s: covariance not positive semi-definite (dpotrf %d)", name, (int)info);
}

static void check_prediction(const fit_setup *s, const gp_model *model)
{
    const char *name = s->m->name;
    pred lat, obs;
    predict(model, s->p.Xs, 0, &lat);
    predict(model, s->p.Xs, 1, &obs);
    for (size_t i = 0; i < M; i++) {
        if (!isfinite(lat.mean[i]) || !isfinite(lat.var[i]) || !isfinite(obs.var[i]))
            fail_msg("%s: non-finite prediction at point %zu", name, i);
        assert_true(lat.var[i] >= 0.0);
        if (lat.var[i] > obs.var[i])
            fail_msg("%s: latent variance %.17g > observation variance %.17g at %zu", name,
                     lat.var[i], obs.var[i], i);
        tu_assert_close(lat.mean[i], obs.mean[i], 0.0, 0.0, "%s: mean at %zu", name, i);
    }
    const pred *both[2] = {&lat, &obs};
    for (size_t b = 0; b < 2; b++) {
        const pred *p = both[b];
        check_psd(name, p->cov);
        for (size_t i = 0; i < M; i++) {
            tu_assert_close(p->cov[i * M + i], p->var[i], 1e-8, 1e-12,
                            "%s: covariance diagonal vs variance at %zu (noise %zu)", name, i, b);
            if (!(p->q[i] <= p->q[M + i] && p->q[M + i] <= p->q[2 * M + i]))
                fail_msg("%s: quantiles not monotone at %zu: %g %g %g", name, i, p->q[i],
                         p->q[M + i], p->q[2 * M + i]);
            if (!gp_method_is_mixture(s->m))
                tu_assert_close(p->q[M + i], p->mean[i], 1e-12, 1e-12,
                                "%s: median vs mean at %zu", name, i);
        }
    }
}

/* ---- the posterior's gradient in x (gp_model_predict_grad) ---- */

static double grad_value(const gp_model *model, const double *x, int want_var)
{
    double mean, var;
    gp_error err;
    if (gp_model_predict_grad(model, x, &mean, &var, NULL, NULL, &err) != GP_OK)
        fail_msg("%s: predict_grad failed: %s", model->method->name, err.message);
    return want_var ? var : mean;
}

/* A method with the op agrees with its own latent prediction (1e-10
 * relative) and with central differences of its values; the others refuse. */
static void check_predict_grad(const fit_setup *s, const gp_model *model)
{
    const char *name = s->m->name;
    double x[D], mean, var, dmean[D], dvar[D];
    gp_error err;
    for (size_t j = 0; j < D; j++)
        x[j] = s->p.Xs[j * M];
    int rc = gp_model_predict_grad(model, x, &mean, &var, dmean, dvar, &err);
    if (!gp_method_can_predict_grad(s->m)) {
        assert_int_equal(rc, GP_EUNSUPPORTED);
        return;
    }
    pred lat;
    predict(model, s->p.Xs, 0, &lat);
    for (size_t i = 0; i < M; i++) {
        for (size_t j = 0; j < D; j++)
            x[j] = s->p.Xs[j * M + i];
        rc = gp_model_predict_grad(model, x, &mean, &var, dmean, dvar, &err);
        if (rc != GP_OK)
            fail_msg("%s: predict_grad failed: %s", name, err.message);
        tu_assert_close(mean, lat.mean[i], 1e-10, 1e-13, "%s: predict_grad mean at %zu", name, i);
        tu_assert_close(var, lat.var[i], 1e-10, 1e-13, "%s: predict_grad var at %zu", name, i);
        for (size_t j = 0; j < D; j++) { /* h 1e-6: the differences' error is ~1e-10 */
            double xj = x[j], h = 1e-6, f[4];
            for (int sgn = 0; sgn < 2; sgn++) {
                x[j] = xj + (sgn ? -h : h);
                f[2 * sgn] = grad_value(model, x, 0);
                f[2 * sgn + 1] = grad_value(model, x, 1);
            }
            x[j] = xj;
            tu_assert_close(dmean[j], (f[0] - f[2]) / (2.0 * h), 1e-5, 1e-7,
                            "%s: dmean[%zu] at %zu", name, j, i);
            tu_assert_close(dvar[j], (f[1] - f[3]) / (2.0 * h), 1e-5, 1e-7,
                            "%s: dvar[%zu] at %zu", name, j, i);
        }
    }
}

/* ---- dynamic batching: a point's answer does not depend on its company ---- */

#define BM 23 /* points: more than 16, a BLAS kernel's widest unroll */
static const size_t batch_sizes[] = {1, 2, 1, 5, 1, 3, 1, 9};
#define NB (sizeof batch_sizes / sizeof batch_sizes[0])

typedef struct bufs {
    double *mem;
    gp_prediction pr;
} bufs;

/* Buffers for m points of model with the outputs the request asks. */
static void bufs_alloc(bufs *b, const gp_model *model, const gp_predict_request *r)
{
    size_t m = r->m, p = model->n_outputs, K = 0;
    if (r->components)
        K = gp_model_parts(model) ? gp_model_parts(model) : gp_model_components(model);
    size_t n = m * (2 * p + 3 * p + 2 * K + 6 + 1);
    b->mem = calloc(n, sizeof(double));
    assert_non_null(b->mem);
    double *q = b->mem;
    memset(&b->pr, 0, sizeof b->pr);
    b->pr.mean = q;
    b->pr.variance = q + m * p;
    q += 2 * m * p;
    if (r->n_quantiles)
        b->pr.quantiles = q;
    q += 3 * m * p;
    if (K) {
        b->pr.component_mean = q;
        b->pr.component_variance = q + m * K;
    }
    q += 2 * m * K;
    if (model->likelihood != GP_LIK_GAUSSIAN) {
        double **f[6] = {&b->pr.latent_mean, &b->pr.latent_variance, &b->pr.obs_mean,
                         &b->pr.obs_variance, &b->pr.rate_mean, &b->pr.rate_variance};
        for (int k = 0; k < 6; k++)
            *f[k] = q + (size_t)k * m;
    }
    q += 6 * m;
    if (gp_method_has_gate(model->method))
        b->pr.ask_oracle = (unsigned char *)q;
}

static void same_bits(const char *name, const char *what, size_t r, const void *a,
                      const void *b, size_t bytes)
{
    if ((a == NULL) != (b == NULL) || (a && memcmp(a, b, bytes) != 0))
        fail_msg("%s: request %zu: batched %s differs from the request alone", name, r, what);
}

static void compare_bufs(const char *name, size_t r, const gp_model *model,
                         const gp_predict_request *req, const bufs *x, const bufs *y)
{
    size_t m = req->m, p = model->n_outputs, K = 0, dbl = sizeof(double);
    if (req->components)
        K = gp_model_parts(model) ? gp_model_parts(model) : gp_model_components(model);
    same_bits(name, "mean", r, x->pr.mean, y->pr.mean, m * p * dbl);
    same_bits(name, "variance", r, x->pr.variance, y->pr.variance, m * p * dbl);
    same_bits(name, "quantiles", r, x->pr.quantiles, y->pr.quantiles,
              m * p * req->n_quantiles * dbl);
    same_bits(name, "component means", r, x->pr.component_mean, y->pr.component_mean,
              m * K * dbl);
    same_bits(name, "component variances", r, x->pr.component_variance,
              y->pr.component_variance, m * K * dbl);
    same_bits(name, "latent mean", r, x->pr.latent_mean, y->pr.latent_mean, m * dbl);
    same_bits(name, "latent variance", r, x->pr.latent_variance, y->pr.latent_variance,
              m * dbl);
    same_bits(name, "observation mean", r, x->pr.obs_mean, y->pr.obs_mean, m * dbl);
    same_bits(name, "observation variance", r, x->pr.obs_variance, y->pr.obs_variance,
              m * dbl);
    same_bits(name, "rate mean", r, x->pr.rate_mean, y->pr.rate_mean, m * dbl);
    same_bits(name, "rate variance", r, x->pr.rate_variance, y->pr.rate_variance, m * dbl);
    same_bits(name, "oracle flags", r, x->pr.ask_oracle, y->pr.ask_oracle, m);
}

/* Requests of several sizes and options (latent or observation variance,
 * quantiles, components where the method has them) answered by
 * gp_model_predict_batch and each alone by gp_model_predict: bit for bit the
 * same. Also every point alone against all BM points in one call. */
static void check_batch(const gp_model *model)
{
    const char *name = model->method->name;
    gp_rng rng;
    gp_rng_seed(&rng, 99);
    double X[BM * D];
    for (size_t i = 0; i < BM * D; i++)
        X[i] = 3.4 * gp_rng_uniform(&rng) - 1.7;
    int comps_ok = gp_method_is_mixture(model->method) ||
                   (gp_model_parts(model) && model->likelihood == GP_LIK_GAUSSIAN);
    gp_predict_request reqs[NB];
    double Xr[NB][BM * D];
    bufs alone[NB], batched[NB];
    gp_prediction outs[NB];
    for (size_t r = 0, off = 0; r < NB; off += batch_sizes[r], r++) {
        size_t m = batch_sizes[r];
        for (size_t c = 0; c < D; c++)
            memcpy(Xr[r] + c * m, X + c * BM + off, m * sizeof(double));
        reqs[r] = (gp_predict_request){.X = Xr[r], .m = m, .d = D,
                                       .include_noise = (int)(r % 3 != 1),
                                       .quantiles = r % 2 ? levels : NULL,
                                       .n_quantiles = r % 2 ? 3 : 0,
                                       .components = comps_ok && r % 4 == 3};
        bufs_alloc(&alone[r], model, &reqs[r]);
        bufs_alloc(&batched[r], model, &reqs[r]);
        outs[r] = batched[r].pr;
        gp_error err;
        if (gp_model_predict(model, &reqs[r], &alone[r].pr, &err) != GP_OK)
            fail_msg("%s: predict of request %zu failed: %s", name, r, err.message);
    }
    int rcs[NB];
    gp_error errs[NB];
    assert_int_equal(gp_model_predict_batch(model, reqs, outs, rcs, errs, NB), GP_OK);
    for (size_t r = 0; r < NB; r++) {
        if (rcs[r] != GP_OK)
            fail_msg("%s: batched request %zu failed: %s", name, r, errs[r].message);
        compare_bufs(name, r, model, &reqs[r], &batched[r], &alone[r]);
    }
    /* all points in one request against each point alone */
    gp_predict_request all = {.X = X, .m = BM, .d = D, .include_noise = 1};
    bufs whole;
    bufs_alloc(&whole, model, &all);
    gp_error err;
    assert_int_equal(gp_model_predict(model, &all, &whole.pr, &err), GP_OK);
    for (size_t i = 0; i < BM; i++) {
        double x1[D];
        for (size_t c = 0; c < D; c++)
            x1[c] = X[c * BM + i];
        gp_predict_request one = {.X = x1, .m = 1, .d = D, .include_noise = 1};
        bufs b;
        bufs_alloc(&b, model, &one);
        assert_int_equal(gp_model_predict(model, &one, &b.pr, &err), GP_OK);
        size_t p = model->n_outputs;
        for (size_t j = 0; j < p; j++)
            if (memcmp(&b.pr.mean[j], &whole.pr.mean[j * BM + i], sizeof(double)) ||
                memcmp(&b.pr.variance[j], &whole.pr.variance[j * BM + i], sizeof(double)))
                fail_msg("%s: point %zu alone differs from the same point among %d", name, i,
                         BM);
        free(b.mem);
    }
    free(whole.mem);
    for (size_t r = 0; r < NB; r++) {
        free(alone[r].mem);
        free(batched[r].mem);
    }
}

/* Point i's outputs in x (a call of mx points) against point j's in y (of
 * my): every output the request asked, the same bits. */
static int point_same(const gp_model *model, const bufs *x, size_t mx, size_t i, const bufs *y,
                      size_t my, size_t j)
{
    size_t p = model->n_outputs;
    for (size_t k = 0; k < p; k++)
        if (memcmp(&x->pr.mean[k * mx + i], &y->pr.mean[k * my + j], sizeof(double)) ||
            memcmp(&x->pr.variance[k * mx + i], &y->pr.variance[k * my + j], sizeof(double)))
            return 0;
    const double *fx[6] = {x->pr.latent_mean, x->pr.latent_variance, x->pr.obs_mean,
                           x->pr.obs_variance, x->pr.rate_mean, x->pr.rate_variance};
    const double *fy[6] = {y->pr.latent_mean, y->pr.latent_variance, y->pr.obs_mean,
                           y->pr.obs_variance, y->pr.rate_mean, y->pr.rate_variance};
    for (int k = 0; k < 6; k++)
        if (fx[k] && memcmp(&fx[k][i], &fy[k][j], sizeof(double)))
            return 0;
    return 1;
}

#define SM 40 /* points of the shapes check */
static const size_t shapes[] = {1, 3, 17, 40};
#define NSHAPES (sizeof shapes / sizeof shapes[0])

/* The method declares per-point arithmetic (core/model/method.h: required),
 * and holds to it: SM points each alone (one thread) against calls of 1, 3,
 * 17 and 40 points, starting at 0 and at 2 (so a point sits at several
 * positions of calls of several sizes), with 1 and 2 compute threads. */
static void check_shapes(const gp_model *model)
{
    const char *name = model->method->name;
    if (!model->method->ops->batch_invariant)
        fail_msg("%s: not batch_invariant (core/model/method.h: every method's predict must be "
                 "per-point arithmetic)", name);
    gp_rng rng;
    gp_rng_seed(&rng, 5);
    double X[SM * D];
    for (size_t i = 0; i < SM * D; i++)
        X[i] = 3.4 * gp_rng_uniform(&rng) - 1.7;
    bufs alone[SM];
    gp_error err;
    gp_parallel_set_threads(1);
    for (size_t i = 0; i < SM; i++) {
        double x1[D];
        for (size_t c = 0; c < D; c++)
            x1[c] = X[c * SM + i];
        gp_predict_request one = {.X = x1, .m = 1, .d = D, .include_noise = 1};
        bufs_alloc(&alone[i], model, &one);
        assert_int_equal(gp_model_predict(model, &one, &alone[i].pr, &err), GP_OK);
    }
    for (int t = 1; t <= 2; t++) {
        gp_parallel_set_threads(t);
        for (size_t a = 0; a < NSHAPES; a++)
            for (size_t first = 0; first <= 2; first += 2)
                for (size_t c0 = first; c0 < SM; c0 += shapes[a]) {
                    size_t g = SM - c0 < shapes[a] ? SM - c0 : shapes[a];
                    double Xg[SM * D];
                    for (size_t c = 0; c < D; c++)
                        memcpy(Xg + c * g, X + c * SM + c0, g * sizeof(double));
                    gp_predict_request r = {.X = Xg, .m = g, .d = D, .include_noise = 1};
                    bufs b;
                    bufs_alloc(&b, model, &r);
                    assert_int_equal(gp_model_predict(model, &r, &b.pr, &err), GP_OK);
                    for (size_t i = 0; i < g; i++)
                        if (!point_same(model, &b, g, i, &alone[c0 + i], 1, 0))
                            fail_msg("%s: point %zu at position %zu of a call of %zu (%d "
                                     "threads) differs from the point alone",
                                     name, c0 + i, i, g, t);
                    free(b.mem);
                }
    }
    gp_parallel_set_threads(0);
    for (size_t i = 0; i < SM; i++)
        free(alone[i].mem);
}

/* ---- samples ---- */

#define S 4000

static void draw(const gp_model *model, const double *Xs, uint64_t seed, size_t n,
                 double *out)
{
    gp_sample_request sr = {.X = Xs, .m = M, .d = D, .n_samples = n, .seed = seed};
    gp_error err;
    int rc = gp_model_sample(model, &sr, out, &err);
    if (rc != GP_OK)
        fail_msg("%s: sample failed: %s", model->method->name, err.message);
}

static void check_samples(const fit_setup *s, const gp_model *model)
{
    const char *name = s->m->name;
    double *a = malloc(sizeof(double) * M * S), *b = malloc(sizeof(double) * M * S);
    assert_non_null(a);
    assert_non_null(b);
    draw(model, s->p.Xs, 11, S, a);
    draw(model, s->p.Xs, 11, S, b);
    assert_memory_equal(a, b, sizeof(double) * M * S);
    draw(model, s->p.Xs, 12, S, b);
    assert_true(memcmp(a, b, sizeof(double) * M * S) != 0);
    pred lat;
    predict(model, s->p.Xs, 0, &lat);
    for (size_t i = 0; i < M; i++) {
        double sum = 0.0;
        for (size_t k = 0; k < S; k++) {
            if (!isfinite(a[k * M + i]))
                fail_msg("%s: non-finite sample", name);
            sum += a[k * M + i];
        }
        /* 6 standard errors: a wrong mean fails, chance does not. */
        double se = sqrt(lat.var[i] / S);
        tu_assert_close(sum / S, lat.mean[i], 0.0, 6.0 * se + 1e-9,
                        "%s: sample mean at point %zu", name, i);
    }
    free(a);
    free(b);
}

/* Sample requests answered together by gp_model_sample_batch (exact shares
 * one solve; the others answer one by one) get bit for bit the draws each
 * gets alone: requests of other seeds, draw counts and noise beside them. */
static void check_sample_batch(const fit_setup *s, const gp_model *model)
{
    enum { NR = 3, NS = 5 };
    int gaussian = model->likelihood == GP_LIK_GAUSSIAN;
    size_t p = model->n_outputs;
    gp_sample_request reqs[NR];
    double alone[NR][M * NS * 4], got[NR][M * NS * 4], *outs[NR];
    int rcs[NR];
    gp_error errs[NR], err;
    assert_true(p <= 4);
    for (size_t r = 0; r < NR; r++) {
        reqs[r] = (gp_sample_request){.X = s->p.Xs, .m = M, .d = D, .n_samples = NS - r,
                                      .seed = 30 + r, .include_noise = gaussian && r == 1};
        outs[r] = got[r];
        if (gp_model_sample(model, &reqs[r], alone[r], &err) != GP_OK)
            fail_msg("%s: sample of request %zu failed: %s", s->m->name, r, err.message);
    }
    assert_int_equal(gp_model_sample_batch(model, reqs, outs, rcs, errs, NR), GP_OK);
    for (size_t r = 0; r < NR; r++) {
        if (rcs[r] != GP_OK)
            fail_msg("%s: batched sample request %zu failed: %s", s->m->name, r,
                     errs[r].message);
        if (memcmp(got[r], alone[r], M * (NS - r) * p * sizeof(double)) != 0)
            fail_msg("%s: batched sample request %zu differs from the request alone",
                     s->m->name, r);
    }
}

/* ---- export / import ---- */

/* The model exported and imported again (caller frees); its draws checked
 * bit-identical to the original's. */
static gp_model *roundtrip(const fit_setup *s, const gp_model *model)
{
    gp_state st;
    gp_state_init(&st);
    gp_error err;
    assert_int_equal(gp_model_export(model, &st, &err), GP_OK);
    /* nothing non-finite is ever stored: the daemon reports a stored model
     * that holds one as poisoned rather than serving it */
    if (gp_state_check_finite(&st, &err) != GP_OK)
        fail_msg("%s: the exported state is not finite: %s", s->m->name, err.message);
    gp_model *back = NULL;
    if (gp_model_import(s->m, &st, &back, &err) != GP_OK)
        fail_msg("%s: import failed: %s", s->m->name, err.message);
    gp_state_free(&st);
    double sa[M * 5], sb[M * 5];
    draw(model, s->p.Xs, 5, 5, sa);
    draw(back, s->p.Xs, 5, 5, sb);
    assert_memory_equal(sa, sb, sizeof sa);
    return back;
}

static void check_roundtrip(const fit_setup *s, const gp_model *model)
{
    gp_model *back = roundtrip(s, model);
    pred a, b;
    predict(model, s->p.Xs, 1, &a);
    predict(back, s->p.Xs, 1, &b);
    assert_memory_equal(&a, &b, sizeof a);
    gp_model_free(back);
}

/* ---- progress and cancellation ---- */

typedef struct progress_log {
    int calls, last, max_seen, budget_seen, cancel_at, decreasing;
} progress_log;

static int on_progress(void *ctx, int iteration, int max_iterations, double objective)
{
    (void)objective;
    progress_log *p = ctx;
    p->calls++;
    if (iteration < p->last)
        p->decreasing = 1;
    p->last = iteration;
    if (iteration > p->max_seen)
        p->max_seen = iteration;
    if (max_iterations > p->budget_seen)
        p->budget_seen = max_iterations;
    return p->cancel_at > 0 && iteration >= p->cancel_at;
}

static void check_progress_and_cancel(const fit_setup *s)
{
    const char *name = s->m->name;
    gp_fit_request req;
    request(s, &req);
    progress_log log = {0};
    req.progress = on_progress;
    req.progress_ctx = &log;
    gp_model *model = fit_or_fail(s, &req);
    gp_model_free(model);
    assert_true(log.calls > 0);
    assert_false(log.decreasing);
    int budget = gp_method_max_iterations(s->m, s->opts, s->n_opts);
    if (log.budget_seen > 0 && log.max_seen > log.budget_seen)
        fail_msg("%s: progress iteration %d beyond its max_iterations %d", name, log.max_seen,
                 log.budget_seen);
    if (s->m->iterations_option && log.budget_seen <= budget && log.max_seen > budget)
        fail_msg("%s: progress iteration %d beyond the job budget %d", name, log.max_seen,
                 budget);
    int last = log.max_seen; /* every iteration the fit reports */
    print_message("%s: %d progress calls up to iteration %d of %d (job budget %d)\n", name,
                  log.calls, log.max_seen, log.budget_seen, budget);
    for (int k = 1; k <= last; k++) {
        progress_log c = {.cancel_at = k};
        req.progress_ctx = &c;
        gp_model *m2 = NULL;
        gp_error err;
        int rc = gp_model_fit(s->m, &req, &m2, &err);
        if (rc != GP_ECANCELLED)
            fail_msg("%s: cancelling at iteration %d gave %s", name, k, gp_status_name(rc));
        assert_null(m2);
    }
}

/* ---- bad data ---- */

static void check_refused(const fit_setup *s, double bad, int in_y, const char *field)
{
    fit_setup t = *s;
    if (in_y)
        t.p.y[5] = bad;
    else
        t.p.X[N + 3] = bad; /* row 3, column 1 */
    gp_fit_request req;
    request(&t, &req);
    gp_model *model = NULL;
    gp_error err;
    assert_int_equal(gp_model_fit(s->m, &req, &model, &err), GP_EDATA);
    assert_string_equal(err.field, field);
    assert_null(model);
}

static void check_bad_data(const fit_setup *s)
{
    check_refused(s, NAN, 0, "X[3][1]");
    check_refused(s, INFINITY, 0, "X[3][1]");
    check_refused(s, NAN, 1, "y[5]");
    check_refused(s, -INFINITY, 1, "y[5]");
}

/* ---- threads ---- */

static void check_threads(const fit_setup *s)
{
    pred out[2];
    double draws[2][M * 3];
    for (int t = 1; t <= 2; t++) {
        gp_parallel_set_threads(t);
        gp_fit_request req;
        request(s, &req);
        gp_model *model = fit_or_fail(s, &req);
        predict(model, s->p.Xs, 1, &out[t - 1]);
        draw(model, s->p.Xs, 3, 3, draws[t - 1]);
        gp_model_free(model);
    }
    gp_parallel_set_threads(0);
    if (memcmp(&out[0], &out[1], sizeof out[0]) != 0)
        fail_msg("%s: predictions differ between 1 and 2 compute threads", s->m->name);
    assert_memory_equal(draws[0], draws[1], sizeof draws[0]);
}

/* ---- kernels ---- */

static void check_kernels(const fit_setup *s)
{
    const char *name = s->m->name;
    for (int t = 0; t < GP_KERNEL_TYPE_COUNT; t++) {
        gp_kernel_type type = (gp_kernel_type)t;
        gp_kernel *k = NULL;
        gp_error err;
        if (type == GP_KERNEL_SUM || type == GP_KERNEL_PRODUCT) {
            gp_kernel *terms[2] = {NULL, NULL};
            assert_int_equal(gp_kernel_leaf(&terms[0], GP_KERNEL_RBF, D, 1, NULL, 0, &err),
                             GP_OK);
            assert_int_equal(gp_kernel_leaf(&terms[1], GP_KERNEL_RBF, D, 0, NULL, 0, &err),
                             GP_OK);
            assert_int_equal(gp_kernel_composite(&k, type, terms, 2, &err), GP_OK);
        } else if (type == GP_KERNEL_PERIODIC) {
            /* On one input: over the Euclidean distance of several the
             * exp-sine-squared kernel is not positive definite. */
            static const size_t dim0[1] = {0};
            assert_int_equal(gp_kernel_leaf(&k, type, D, 1, dim0, 1, &err), GP_OK);
        } else {
            assert_int_equal(gp_kernel_leaf(&k, type, D, 1, NULL, 0, &err), GP_OK);
        }
        fit_setup t2 = *s;
        t2.kernel = k;
        gp_fit_request req;
        request(&t2, &req);
        gp_model *model = NULL;
        int rc = gp_model_fit(s->m, &req, &model, &err);
        if (gp_method_accepts_kernel_type(s->m, type)) {
            if (rc != GP_OK)
                fail_msg("%s: listed kernel %s refused: %s", name, gp_kernel_type_name(type),
                         err.message);
        } else {
            if (rc != GP_EUNSUPPORTED)
                fail_msg("%s: unlisted kernel %s gave %s", name, gp_kernel_type_name(type),
                         gp_status_name(rc));
            assert_string_equal(err.field, "kernel.type");
        }
        gp_model_free(model);
        gp_kernel_free(k);
    }
}

/* ---- fit report ---- */

static void check_report(const fit_setup *s, const gp_model *model)
{
    const char *name = s->m->name;
    assert_true(isfinite(model->diag.objective));
    assert_string_equal(model->diag.objective_name, s->m->objective_name);
    assert_int_equal(model->n_train, N);
    assert_int_equal(model->input_dim, D);
    for (size_t i = 0; i < model->diag.n_info; i++) {
        const gp_info_item *it = &model->diag.info[i];
        const gp_info_spec *spec = gp_method_info_spec(s->m, it->key);
        if (spec == NULL)
            fail_msg("%s: method_info key '%s' is not in the descriptor", name, it->key);
        if ((spec->type == GP_INFO_STRING) != (it->string != NULL))
            fail_msg("%s: method_info '%s' has the wrong type", name, it->key);
    }
    for (size_t i = 0; i < s->m->n_options; i++)
        assert_non_null(s->m->options[i].help);
    for (size_t i = 0; i < s->m->n_info; i++)
        assert_true(strlen(s->m->info[i].help) > 0);
    if (s->m->iterations_option)
        assert_non_null(gp_method_option_spec(s->m, s->m->iterations_option));
    if (s->m->restarts_option)
        assert_non_null(gp_method_option_spec(s->m, s->m->restarts_option));
}

/* ---- likelihoods ----
 * Every likelihood the descriptor lists besides gaussian gets its own body
 * (likelihood_contract); every method refuses the ones it does not list. */

static void check_unlisted_likelihoods(const fit_setup *s)
{
    for (int l = 0; l < GP_LIK_COUNT; l++) {
        if (gp_method_accepts_likelihood(s->m, (gp_likelihood)l))
            continue;
        fit_setup t = *s;
        for (size_t i = 0; i < N; i++)
            t.p.y[i] = (double)(i % 2); /* labels every likelihood takes */
        gp_fit_request req;
        request(&t, &req);
        req.likelihood = (gp_likelihood)l;
        gp_model *model = NULL;
        gp_error err;
        int rc = gp_model_fit(s->m, &req, &model, &err);
        if (rc != GP_EUNSUPPORTED)
            fail_msg("%s: unlisted likelihood %s gave %s", s->m->name,
                     gp_likelihood_name((gp_likelihood)l), gp_status_name(rc));
        assert_string_equal(err.field, "likelihood");
        assert_null(model);
    }
}

/* Labels of the likelihood from the same smooth function as the Gaussian problem. */
static void make_labels(problem *p, gp_likelihood l)
{
    for (size_t i = 0; i < N; i++) {
        double f = sin(2.0 * p->X[i]) + 0.5 * cos(p->X[N + i]);
        if (l == GP_LIK_BERNOULLI)
            p->y[i] = f + 0.3 * sin(7.0 * (double)i) > 0.0 ? 1.0 : 0.0;
        else
            p->y[i] = floor(exp(0.8 + f) + 0.5 * sin(5.0 * (double)i) + 0.5);
    }
}

typedef struct obs_pred {
    double mean[M], var[M], q[M * 3];
    double lm[M], lv[M], om[M], ov[M], rm[M], rv[M];
} obs_pred;

static int obs_predict(const gp_model *model, const double *Xs, int noise, int full,
                       obs_pred *out, double *cov, gp_error *err)
{
    memset(out, 0, sizeof *out);
    gp_predict_request pr = {.X = Xs, .m = M, .d = D, .include_noise = noise,
                             .full_covariance = full, .quantiles = levels, .n_quantiles = 3};
    gp_prediction o = {.mean = out->mean, .variance = out->var, .covariance = cov,
                       .quantiles = out->q, .latent_mean = out->lm, .latent_variance = out->lv,
                       .obs_mean = out->om, .obs_variance = out->ov, .rate_mean = out->rm,
                       .rate_variance = out->rv};
    return gp_model_predict(model, &pr, &o, err);
}

static void check_obs_prediction(const char *name, gp_likelihood l, const gp_model *model,
                                 const double *Xs)
{
    obs_pred y, f;
    double cov[M * M];
    gp_error err;
    if (obs_predict(model, Xs, 1, 0, &y, NULL, &err) != GP_OK ||
        obs_predict(model, Xs, 0, 1, &f, cov, &err) != GP_OK)
        fail_msg("%s/%s: predict failed: %s", name, gp_likelihood_name(l), err.message);
    assert_int_equal(obs_predict(model, Xs, 1, 1, &y, cov, &err), GP_EUNSUPPORTED);
    assert_string_equal(err.field, "full_covariance");
    assert_int_equal(obs_predict(model, Xs, 1, 0, &y, NULL, &err), GP_OK);
    check_psd(name, cov);
    for (size_t i = 0; i < M; i++) {
        if (!isfinite(y.lm[i]) || !(y.lv[i] >= 0.0) || !isfinite(y.om[i]) || !(y.ov[i] >= 0.0))
            fail_msg("%s/%s: bad prediction at %zu", name, gp_likelihood_name(l), i);
        tu_assert_close(y.mean[i], y.om[i], 0, 0, "%s: mean is y's with include_noise", name);
        tu_assert_close(y.var[i], y.ov[i], 0, 0, "%s: variance is y's", name);
        tu_assert_close(f.mean[i], f.lm[i], 0, 0, "%s: mean is f's without include_noise", name);
        tu_assert_close(f.lm[i], y.lm[i], 0, 0, "%s: latent mean either way", name);
        tu_assert_close(cov[i * M + i], f.lv[i], 1e-8, 1e-12, "%s: covariance diagonal", name);
        for (int b = 0; b < 2; b++) {
            const double *q = b ? y.q : f.q;
            if (!(q[i] <= q[M + i] && q[M + i] <= q[2 * M + i]))
                fail_msg("%s: quantiles not monotone at %zu", name, i);
        }
        if (l == GP_LIK_BERNOULLI) {
            assert_true(y.om[i] > 0.0 && y.om[i] < 1.0);
            tu_assert_close(y.ov[i], y.om[i] * (1.0 - y.om[i]), 1e-15, 0, "%s: p(1-p)", name);
            /* integrating over f pulls p towards 1/2 from the plug-in value */
            double plug = 1.0 / (1.0 + exp(-y.lm[i]));
            if (gp_model_components(model) == 1 && fabs(y.om[i] - 0.5) > fabs(plug - 0.5) + 1e-12)
                fail_msg("%s: p %.17g further from 1/2 than the plug-in %.17g", name, y.om[i],
                         plug);
            for (int j = 0; j < 3; j++)
                assert_true(y.q[i + j * M] == 0.0 || y.q[i + j * M] == 1.0);
        } else {
            assert_true(y.rm[i] > 0.0 && y.rv[i] >= 0.0);
            tu_assert_close(y.om[i], y.rm[i], 0, 0, "%s: count mean = rate mean", name);
            tu_assert_close(y.ov[i], y.rm[i] + y.rv[i], 1e-15, 0, "%s: count variance", name);
            for (int j = 0; j < 3; j++)
                assert_true(y.q[i + j * M] >= 0 && y.q[i + j * M] == floor(y.q[i + j * M]));
        }
    }
}

static void check_obs_samples(const char *name, gp_likelihood l, const gp_model *model,
                              const double *Xs)
{
    size_t n = 2000;
    double *f = malloc(sizeof(double) * M * n), *y = malloc(sizeof(double) * M * n);
    assert_non_null(f);
    assert_non_null(y);
    gp_sample_request sr = {.X = Xs, .m = M, .d = D, .n_samples = n, .seed = 21};
    gp_error err;
    assert_int_equal(gp_model_sample(model, &sr, f, &err), GP_OK);
    assert_int_equal(gp_model_sample_observations(model, &sr, f, y, &err), GP_OK);
    obs_pred p;
    assert_int_equal(obs_predict(model, Xs, 1, 0, &p, NULL, &err), GP_OK);
    for (size_t i = 0; i < M; i++) {
        double sf = 0.0, sy = 0.0;
        for (size_t k = 0; k < n; k++) {
            double v = y[k * M + i];
            if (l == GP_LIK_BERNOULLI ? !(v == 0.0 || v == 1.0) : !(v >= 0.0 && v == floor(v)))
                fail_msg("%s: observation draw %g does not fit %s", name, v,
                         gp_likelihood_name(l));
            sf += f[k * M + i];
            sy += v;
        }
        tu_assert_close(sf / n, p.lm[i], 0, 6.0 * sqrt(p.lv[i] / n) + 1e-9,
                        "%s: latent sample mean at %zu", name, i);
        tu_assert_close(sy / n, p.om[i], 0, 6.0 * sqrt(p.ov[i] / n) + 1e-9,
                        "%s: observation draw mean at %zu", name, i);
    }
    sr.include_noise = 1;
    assert_int_equal(gp_model_sample(model, &sr, f, &err), GP_EUNSUPPORTED);
    assert_string_equal(err.field, "include_noise");
    free(f);
    free(y);
}

static void check_obs_roundtrip(const fit_setup *s, const gp_model *model)
{
    gp_model *back = roundtrip(s, model);
    assert_int_equal(back->likelihood, model->likelihood);
    obs_pred a, b;
    gp_error err;
    assert_int_equal(obs_predict(model, s->p.Xs, 1, 0, &a, NULL, &err), GP_OK);
    assert_int_equal(obs_predict(back, s->p.Xs, 1, 0, &b, NULL, &err), GP_OK);
    assert_memory_equal(&a, &b, sizeof a);
    gp_model_free(back);
}

static void check_bad_labels(const fit_setup *s, gp_likelihood l)
{
    const double bern[2] = {2.0, 0.5}, counts[2] = {-1.0, 2.5};
    for (int k = 0; k < 2; k++) {
        fit_setup t = *s;
        t.p.y[5] = l == GP_LIK_BERNOULLI ? bern[k] : counts[k];
        gp_fit_request req;
        request(&t, &req);
        req.likelihood = l;
        gp_model *model = NULL;
        gp_error err;
        assert_int_equal(gp_model_fit(s->m, &req, &model, &err), GP_EDATA);
        assert_string_equal(err.field, "y[5]");
        assert_null(model);
    }
}

/* The fit of a non-Gaussian likelihood: labels kept raw, no noise; the report. */
static void check_obs_fit(const fit_setup *s, const gp_model *model)
{
    assert_int_equal(model->likelihood, s->lik);
    assert_true(model->y_mean == 0.0 && model->y_scale == 1.0 && model->noise_variance == 0.0);
    check_report(s, model);
}

static void check_obs_predict(const fit_setup *s, const gp_model *model)
{
    check_obs_prediction(s->m->name, s->lik, model, s->p.Xs);
}

static void check_obs_draws(const fit_setup *s, const gp_model *model)
{
    check_obs_samples(s->m->name, s->lik, model, s->p.Xs);
}

static void check_labels(const fit_setup *s)
{
    check_bad_labels(s, s->lik);
}

static void check_obs_threads(const fit_setup *s)
{
    obs_pred out[2];
    for (int t = 1; t <= 2; t++) {
        gp_parallel_set_threads(t);
        gp_fit_request req;
        request(s, &req);
        gp_model *m2 = fit_or_fail(s, &req);
        gp_error err;
        assert_int_equal(obs_predict(m2, s->p.Xs, 1, 0, &out[t - 1], NULL, &err), GP_OK);
        gp_model_free(m2);
    }
    gp_parallel_set_threads(0);
    if (memcmp(&out[0], &out[1], sizeof out[0]) != 0)
        fail_msg("%s/%s: predictions differ between 1 and 2 threads", s->m->name,
                 gp_likelihood_name(s->lik));
}

/* ---- the quick preset ---- */

/* The descriptor's `quick` preset names integer or number options, sets
 * its iterations option, and passes the options' checks. */
static void check_quick(const fit_setup *s)
{
    const gp_method *m = s->m;
    int sets_iterations = m->iterations_option == NULL;
    for (size_t i = 0; i < m->n_quick; i++) {
        const gp_option_spec *spec = gp_method_option_spec(m, m->quick[i].name);
        if (spec == NULL)
            fail_msg("%s: quick preset: '%s' is not one of its options", m->name,
                     m->quick[i].name);
        if (spec->type != GP_OPTION_INT && spec->type != GP_OPTION_NUMBER)
            fail_msg("%s: quick preset: '%s' is not an integer or number option", m->name,
                     spec->name);
        if (m->iterations_option && strcmp(spec->name, m->iterations_option) == 0)
            sets_iterations = 1;
    }
    if (!sets_iterations)
        fail_msg("%s: quick preset: no value for its iterations option '%s'", m->name,
                 m->iterations_option);
    gp_error err;
    if (gp_options_validate(m, s->opts, s->n_opts, &err) != GP_OK)
        fail_msg("%s: quick preset refused: %s (field '%s')", m->name, err.message, err.field);
}

/* ---- the cases: one per (method, check) and (method/likelihood, check) ---- */

static void check_batch_of(const fit_setup *s, const gp_model *model)
{
    (void)s;
    check_batch(model);
    check_shapes(model);
}

/* A check runs on a model fitted with the case's setup (on_model), or takes
 * the setup and fits what it needs itself (on_setup). */
typedef struct contract_check {
    const char *name;
    void (*on_model)(const fit_setup *s, const gp_model *model);
    void (*on_setup)(const fit_setup *s);
} contract_check;

/* Every method, on the Gaussian problem. */
static const contract_check method_checks[] = {
    {"quick preset", NULL, check_quick},
    {"report", check_report, NULL},
    {"predict", check_prediction, NULL},
    {"posterior gradient in x", check_predict_grad, NULL},
    {"batching", check_batch_of, NULL},
    {"samples", check_samples, NULL},
    {"sample batching", check_sample_batch, NULL},
    {"export/import", check_roundtrip, NULL},
    {"progress and cancel", NULL, check_progress_and_cancel},
    {"bad data", NULL, check_bad_data},
    {"threads", NULL, check_threads},
    {"kernels", NULL, check_kernels},
    {"unlisted likelihoods", NULL, check_unlisted_likelihoods},
};

/* Every non-Gaussian likelihood a method lists, on labels of it. */
static const contract_check likelihood_checks[] = {
    {"fit and report", check_obs_fit, NULL},
    {"predict", check_obs_predict, NULL},
    {"batching", check_batch_of, NULL},
    {"samples", check_obs_draws, NULL},
    {"export/import", check_obs_roundtrip, NULL},
    {"bad labels", NULL, check_labels},
    {"threads", NULL, check_obs_threads},
};

/* Every method that takes a mean (mean_functions), with a linear one: the
 * mean is added back generically (core/model/model.c), so these make sure
 * that path keeps batches, threads, samples and states bit-identical. */
static const contract_check mean_checks[] = {
    {"predict", check_prediction, NULL},
    {"posterior gradient in x", check_predict_grad, NULL},
    {"batching", check_batch_of, NULL},
    {"samples", check_samples, NULL},
    {"sample batching", check_sample_batch, NULL},
    {"export/import", check_roundtrip, NULL},
    {"threads", NULL, check_threads},
};

/* The same with a non-Gaussian likelihood: the mean moves the latent f
 * before the likelihood's predictive (observation fields, draws of y). */
static const contract_check obs_mean_checks[] = {
    {"fit and report", check_obs_fit, NULL},
    {"predict", check_obs_predict, NULL},
    {"batching", check_batch_of, NULL},
    {"samples", check_obs_draws, NULL},
    {"export/import", check_obs_roundtrip, NULL},
    {"threads", NULL, check_obs_threads},
};

#define N_OBS_MEAN_CHECKS (sizeof obs_mean_checks / sizeof obs_mean_checks[0])
#define N_METHOD_CHECKS (sizeof method_checks / sizeof method_checks[0])
#define N_MEAN_CHECKS (sizeof mean_checks / sizeof mean_checks[0])
#define N_LIKELIHOOD_CHECKS (sizeof likelihood_checks / sizeof likelihood_checks[0])

typedef struct contract_case {
    const gp_method *m;
    gp_likelihood lik;
    gp_mean_type mean;
    const contract_check *check;
    char name[96];
} contract_case;

static void run_case(void **state)
{
    const contract_case *c = *state;
    fit_setup s;
    setup_for(&s, c->m);
    if (c->lik != GP_LIK_GAUSSIAN) {
        make_labels(&s.p, c->lik);
        s.lik = c->lik;
    }
    s.mean = c->mean;
    if (c->check->on_model) {
        gp_fit_request req;
        request(&s, &req);
        gp_model *model = fit_or_fail(&s, &req);
        c->check->on_model(&s, model);
        gp_model_free(model);
    } else {
        c->check->on_setup(&s);
    }
    gp_kernel_free(s.kernel);
}

/* Append the cases of m (with likelihood lik) for checks[0..n). */
static size_t add_cases(contract_case *cases, struct CMUnitTest *tests, size_t count,
                        const gp_method *m, gp_likelihood lik, const contract_check *checks,
                        size_t n)
{
    for (size_t k = 0; k < n; k++, count++) {
        contract_case *c = &cases[count];
        *c = (contract_case){.m = m, .lik = lik, .check = &checks[k]};
        if (lik == GP_LIK_GAUSSIAN)
            snprintf(c->name, sizeof c->name, "%s: %s", m->name, checks[k].name);
        else
            snprintf(c->name, sizeof c->name, "%s/%s: %s", m->name, gp_likelihood_name(lik),
                     checks[k].name);
        tests[count] = (struct CMUnitTest)cmocka_unit_test_prestate(run_case, c);
        tests[count].name = c->name;
    }
    return count;
}

int main(void)
{
    size_t n = gp_method_count();
    size_t cap = n * (N_METHOD_CHECKS +
                      (size_t)GP_LIK_COUNT * (N_MEAN_CHECKS + N_LIKELIHOOD_CHECKS)),
           count = 0;
    struct CMUnitTest *tests = calloc(cap, sizeof *tests);
    contract_case *cases = calloc(cap, sizeof *cases);
    if (tests == NULL || cases == NULL)
        return 1;
    for (size_t i = 0; i < n; i++) {
        const gp_method *m = gp_method_at(i);
        count = add_cases(cases, tests, count, m, GP_LIK_GAUSSIAN, method_checks,
                          N_METHOD_CHECKS);
        /* a linear mean with every likelihood the method fits (svgp's latent mean) */
        /* softmax answers C columns per point (one per class): its own
         * tests (test_svgp_softmax.c) hold it to these properties */
        for (int l = 0; m->mean_functions && l < GP_LIK_COUNT; l++) {
            if (!gp_method_accepts_likelihood(m, (gp_likelihood)l) || l == GP_LIK_SOFTMAX)
                continue;
            size_t first = count;
            count = l ? add_cases(cases, tests, count, m, (gp_likelihood)l, obs_mean_checks,
                                  N_OBS_MEAN_CHECKS)
                      : add_cases(cases, tests, count, m, GP_LIK_GAUSSIAN, mean_checks,
                                  N_MEAN_CHECKS);
            for (size_t k = first; k < count; k++) {
                cases[k].mean = GP_MEAN_LINEAR;
                snprintf(cases[k].name, sizeof cases[k].name, "%s%s%s/linear mean: %s",
                         m->name, l ? "/" : "", l ? gp_likelihood_name((gp_likelihood)l) : "",
                         cases[k].check->name);
            }
        }
        for (int l = 1; l < GP_LIK_COUNT; l++)
            if (gp_method_accepts_likelihood(m, (gp_likelihood)l) && l != GP_LIK_SOFTMAX)
                count = add_cases(cases, tests, count, m, (gp_likelihood)l, likelihood_checks,
                                  N_LIKELIHOOD_CHECKS);
    }
    int rc = _cmocka_run_group_tests("method_contract", tests, count, NULL, NULL);
    free(tests);
    free(cases);
    return rc;
}
