/* A softmax model's predictions in batches (core/model/predict.c's joined
 * path, what server/batcher.c calls through gp_model_predict_batch): the
 * observation fields are m x C there (class probabilities, the latents'
 * moments), so a batch must carry C columns of each per point and copy
 * them back per request. Fitted with svgp on a small seeded 3-class set:
 *   - requests of several sizes and options, batched, bit for bit what each
 *     gets alone (every one of the m x C values of every field);
 *   - the probabilities of a point sum to 1 and lie in (0, 1);
 *   - quantiles refused naming "quantiles", alone and in a batch, without
 *     spoiling the other requests of the batch. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/base/rng.h"
#include "core/kernel/kernel.h"
#include "core/methods/registry.h"
#include "core/model/model.h"
#include "tests/unit/testutil.h"

#define N 60
#define D 2
#define C 3
#define NB 6
#define BM 23 /* points of all requests together */
#define PI 3.14159265358979323846

static const size_t sizes[NB] = {1, 5, 2, 7, 3, 5};

/* Three classes by the angle of a point around the origin, with a few flips. */
static gp_model *fit_softmax(void)
{
    static double X[N * D], y[N];
    gp_rng rng;
    gp_rng_seed(&rng, 7);
    for (size_t i = 0; i < N; i++) {
        double a = 4.0 * gp_rng_uniform(&rng) - 2.0, b = 4.0 * gp_rng_uniform(&rng) - 2.0;
        X[i] = a;
        X[N + i] = b;
        double t = atan2(b, a) + PI; /* (0, 2 pi] */
        y[i] = (double)((size_t)(t / (2.0 * PI / C)) % C);
        if (gp_rng_uniform(&rng) < 0.05)
            y[i] = (double)(((size_t)y[i] + 1) % C);
    }
    gp_option_value opts[] = {{"max_iterations", 30, NULL, NULL}, {"inducing", 10, NULL, NULL}};
    gp_error err;
    gp_error_clear(&err);
    gp_kernel *k = NULL;
    if (gp_kernel_leaf(&k, GP_KERNEL_RBF, D, 1, NULL, 0, &err) != GP_OK)
        fail_msg("kernel: %s", err.message);
    gp_fit_request req;
    memset(&req, 0, sizeof req);
    req.kernel = k;
    req.X = X;
    req.y = y;
    req.n = N;
    req.d = D;
    req.standardize = 1;
    req.seed = 3;
    req.options = opts;
    req.n_options = 2;
    req.likelihood = GP_LIK_SOFTMAX;
    gp_model *model = NULL;
    int rc = gp_model_fit(gp_method_find("svgp"), &req, &model, &err);
    gp_kernel_free(k);
    if (rc != GP_OK)
        fail_msg("svgp softmax fit: %s (%s)", err.message, err.field);
    assert_int_equal(model->likelihood, GP_LIK_SOFTMAX);
    assert_int_equal(model->n_outputs, C);
    return model;
}

typedef struct bufs {
    double *mem;
    gp_prediction pr;
} bufs;

/* mean, variance and the four observation fields a softmax model fills, m x C each. */
static void bufs_alloc(bufs *b, size_t m)
{
    b->mem = calloc(6 * m * C, sizeof(double));
    assert_non_null(b->mem);
    memset(&b->pr, 0, sizeof b->pr);
    double **f[6] = {&b->pr.mean,     &b->pr.variance, &b->pr.latent_mean,
                     &b->pr.latent_variance, &b->pr.obs_mean, &b->pr.obs_variance};
    for (int k = 0; k < 6; k++)
        *f[k] = b->mem + (size_t)k * m * C;
}

static void test_batched_is_alone(void **state)
{
    (void)state;
    gp_model *model = fit_softmax();
    gp_rng rng;
    gp_rng_seed(&rng, 11);
    double X[BM * D];
    for (size_t i = 0; i < BM * D; i++)
        X[i] = 4.4 * gp_rng_uniform(&rng) - 2.2;
    gp_predict_request reqs[NB];
    double Xr[NB][BM * D];
    bufs alone[NB], batched[NB];
    gp_prediction outs[NB];
    gp_error err;
    for (size_t r = 0, off = 0; r < NB; off += sizes[r], r++) {
        size_t m = sizes[r];
        for (size_t c = 0; c < D; c++)
            memcpy(Xr[r] + c * m, X + c * BM + off, m * sizeof(double));
        reqs[r] = (gp_predict_request){.X = Xr[r], .m = m, .d = D,
                                       .include_noise = (int)(r % 3 != 1)};
        bufs_alloc(&alone[r], m);
        bufs_alloc(&batched[r], m);
        outs[r] = batched[r].pr;
        if (gp_model_predict(model, &reqs[r], &alone[r].pr, &err) != GP_OK)
            fail_msg("predict of request %zu alone: %s", r, err.message);
    }
    int rcs[NB];
    gp_error errs[NB];
    assert_int_equal(gp_model_predict_batch(model, reqs, outs, rcs, errs, NB), GP_OK);
    for (size_t r = 0; r < NB; r++) {
        if (rcs[r] != GP_OK)
            fail_msg("batched request %zu: %s", r, errs[r].message);
        /* every field, all C columns: the same bits */
        if (memcmp(batched[r].mem, alone[r].mem, 6 * sizes[r] * C * sizeof(double)) != 0)
            fail_msg("batched request %zu (%zu points) differs from the request alone", r,
                     sizes[r]);
        const double *prob = alone[r].pr.obs_mean;
        for (size_t i = 0; i < sizes[r]; i++) {
            double s = 0.0;
            for (size_t c = 0; c < C; c++) {
                double q = prob[c * sizes[r] + i];
                if (!(q > 0.0 && q < 1.0))
                    fail_msg("request %zu point %zu: p(class %zu) = %g", r, i, c, q);
                s += q;
            }
            tu_assert_close(s, 1.0, 0.0, 1e-9, "probabilities sum to 1");
        }
    }
    for (size_t r = 0; r < NB; r++) {
        free(alone[r].mem);
        free(batched[r].mem);
    }
    gp_model_free(model);
}

static void test_quantiles_refused(void **state)
{
    (void)state;
    gp_model *model = fit_softmax();
    double X[2 * D] = {0.1, -0.5, 0.3, 1.2}, q[1] = {0.5}, Q[2 * C];
    bufs b[2];
    bufs_alloc(&b[0], 2);
    bufs_alloc(&b[1], 2);
    gp_predict_request reqs[2] = {
        {.X = X, .m = 2, .d = D, .include_noise = 1, .quantiles = q, .n_quantiles = 1},
        {.X = X, .m = 2, .d = D, .include_noise = 1}};
    b[0].pr.quantiles = Q;
    gp_error err;
    gp_error_clear(&err);
    assert_int_equal(gp_model_predict(model, &reqs[0], &b[0].pr, &err), GP_EUNSUPPORTED);
    assert_string_equal(err.field, "quantiles");
    gp_prediction outs[2] = {b[0].pr, b[1].pr};
    int rcs[2];
    gp_error errs[2];
    assert_int_equal(gp_model_predict_batch(model, reqs, outs, rcs, errs, 2), GP_OK);
    assert_int_equal(rcs[0], GP_EUNSUPPORTED);
    assert_string_equal(errs[0].field, "quantiles");
    assert_int_equal(rcs[1], GP_OK);
    free(b[0].mem);
    free(b[1].mem);
    gp_model_free(model);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batched_is_alone),
        cmocka_unit_test(test_quantiles_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
