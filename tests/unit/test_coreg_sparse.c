/* The sparse coregionalised bounds (core/coreg/sparse.h): finite-difference
 * gradients of every parameter group of sgpr's collapsed bound and svgp's
 * ELBO on heterotopic data, the collapsed bound with Z = X against the dense
 * coregionalised log marginal likelihood, and svgp at the optimal q equal to
 * sgpr's bound. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <cblas.h>
#include <lapacke.h>

#include "core/base/parallel.h"
#include "core/base/rng.h"
#include "core/base/state.h"
#include "core/base/value.h"
#include "core/coreg/lml.h"
#include "core/coreg/params.h"
#include "core/coreg/sparse_impl.h"
#include "core/coreg/sparse.h"
#include "core/kernel/kernel.h"
#include "core/linalg/linalg.h"
#include "core/methods/registry.h"
#include "core/model/model.h"

#define LOG_2PI 1.8378770664093454836

enum { N = 11, D = 2, D_DIM = D, P = 3, Q = 2, R = 1, PER_Q = R + P, LAT = Q * PER_Q, MZ = 4 };

typedef struct problem {
    double X[D * N], Z[D * N], A[P * LAT], noise[P];
    size_t row[N * P], out[N * P], M;
    double y[N * P];
    gp_kernel *k[Q];
    size_t mz;
} problem;

static void problem_init(problem *pb, size_t mz)
{
    gp_rng rng;
    gp_rng_seed(&rng, 7);
    gp_error err;
    for (size_t i = 0; i < D * N; i++)
        pb->X[i] = 2.0 * gp_rng_uniform(&rng) - 1.0;
    pb->mz = mz;
    if (mz == N)
        memcpy(pb->Z, pb->X, sizeof pb->X);
    else
        for (size_t i = 0; i < D * mz; i++)
            pb->Z[i] = 1.6 * gp_rng_uniform(&rng) - 0.8;
    for (size_t i = 0; i < P * LAT; i++)
        pb->A[i] = 0.2 + 0.6 * gp_rng_uniform(&rng);
    for (size_t j = 0; j < P; j++)
        pb->noise[j] = 0.05 + 0.05 * (double)j;
    pb->M = 0;
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < P; j++) {
            if ((i + 2 * j) % 4 == 1) /* heterotopic: a quarter missing, no row empty */
                continue;
            pb->row[pb->M] = i;
            pb->out[pb->M] = j;
            pb->y[pb->M] = sin(2.0 * pb->X[i * D] + (double)j) + 0.3 * pb->X[i * D + 1];
            pb->M++;
        }
    for (size_t q = 0; q < Q; q++) {
        assert_int_equal(gp_kernel_leaf(&pb->k[q], GP_KERNEL_MATERN52, D, 1, NULL, 0, &err),
                         GP_OK);
        double th[3] = {0.0, log(0.6 + 0.5 * (double)q), log(0.9 - 0.2 * (double)q)};
        gp_kernel_set_params(pb->k[q], th);
    }
}

static void problem_free(problem *pb)
{
    for (size_t q = 0; q < Q; q++)
        gp_kernel_free(pb->k[q]);
}

static gp_coreg_sparse_at at_of(const problem *pb)
{
    gp_coreg_sparse_at at = {P, Q, PER_Q, (const gp_kernel *const *)pb->k, pb->A, pb->noise,
                             pb->Z, pb->mz};
    return at;
}

static gp_coreg_sparse_data data_of(const problem *pb)
{
    gp_coreg_sparse_data d = {pb->X, N, D, pb->M, pb->row, pb->out, pb->y, 1.0};
    return d;
}

/* q for svgp: a mean and a lower factor with positive diagonal */
static void q_init(size_t K, double *mq, double *Lq)
{
    memset(Lq, 0, K * K * sizeof *Lq);
    for (size_t i = 0; i < K; i++) {
        mq[i] = 0.3 * sin((double)i);
        Lq[i * K + i] = 0.5 + 0.02 * (double)i;
        for (size_t r = i + 1; r < K && r < i + 3; r++)
            Lq[r + i * K] = 0.05 * cos((double)(r + i));
    }
}

static double eval(problem *pb, int svgp, const double *mq, const double *Lq,
                   const gp_coreg_sparse_grad *g)
{
    gp_coreg_sparse_at at = at_of(pb);
    gp_coreg_sparse_data d = data_of(pb);
    double F;
    gp_error err;
    int rc = svgp ? gp_coreg_svgp_elbo(&at, &d, mq, Lq, &F, NULL, g, &err)
                  : gp_coreg_sgpr_bound(&at, &d, &F, g, NULL, &err);
    if (rc != GP_OK)
        fail_msg("bound: %s", err.message);
    return F;
}

static void check(const char *what, size_t i, double an, double fd)
{
    double tol = 1e-5 * (1.0 + fabs(fd));
    if (!(fabs(an - fd) <= tol))
        fail_msg("%s[%zu]: analytic %.10g, finite difference %.10g", what, i, an, fd);
}

/* Central differences of every parameter group against the analytic gradient. */
static void fd_all(int svgp)
{
    problem pb;
    problem_init(&pb, MZ);
    size_t K = LAT * MZ, np = gp_kernel_n_params(pb.k[0]);
    double *mq = calloc(K, sizeof *mq), *Lq = calloc(K * K, sizeof *Lq);
    double gk[Q * 3], gA[P * LAT], gs[P], gz[D * MZ];
    double *gm = calloc(K, sizeof *gm), *gL = calloc(K * K, sizeof *gL);
    q_init(K, mq, Lq);
    gp_coreg_sparse_grad g = {gk, gA, gs, gz, svgp ? gm : NULL, svgp ? gL : NULL};
    eval(&pb, svgp, mq, Lq, &g);
    const double h = 1e-6;
#define FD(what, ptr, idx, an)                                                                    \
    do {                                                                                       \
        double keep = (ptr);                                                                   \
        (ptr) = keep + h;                                                                      \
        double fp = eval(&pb, svgp, mq, Lq, NULL);                                             \
        (ptr) = keep - h;                                                                      \
        double fm = eval(&pb, svgp, mq, Lq, NULL);                                             \
        (ptr) = keep;                                                                          \
        check(what, idx, an, (fp - fm) / (2.0 * h));                                           \
    } while (0)
    for (size_t q = 0; q < Q; q++) {
        double th[3];
        gp_kernel_get_params(pb.k[q], th);
        for (size_t t = 0; t < np; t++) {
            double keep = th[t];
            th[t] = keep + h;
            gp_kernel_set_params(pb.k[q], th);
            double fp = eval(&pb, svgp, mq, Lq, NULL);
            th[t] = keep - h;
            gp_kernel_set_params(pb.k[q], th);
            double fm = eval(&pb, svgp, mq, Lq, NULL);
            th[t] = keep;
            gp_kernel_set_params(pb.k[q], th);
            check("kernel", q * np + t, gk[q * np + t], (fp - fm) / (2.0 * h));
        }
    }
    for (size_t i = 0; i < P * LAT; i++)
        FD("A", pb.A[i], i, gA[i]);
    for (size_t j = 0; j < P; j++)
        FD("noise", pb.noise[j], j, gs[j]);
    for (size_t i = 0; i < D * MZ; i++)
        FD("Z", pb.Z[i], i, gz[i]);
    for (size_t i = 0; svgp && i < K; i += 3)
        FD("mean", mq[i], i, gm[i]);
    for (size_t c = 0; svgp && c < K; c += 5)
        for (size_t r = c; r < K; r += 4)
            FD("chol", Lq[r + c * K], r + c * K, gL[r + c * K]);
#undef FD
    free(mq);
    free(Lq);
    free(gm);
    free(gL);
    problem_free(&pb);
}

static void test_sgpr_gradient(void **state)
{
    (void)state;
    fd_all(0);
}

static void test_svgp_gradient(void **state)
{
    (void)state;
    fd_all(1);
}

/* The dense coregionalised LML of the observed entries. */
static double dense_lml(const problem *pb)
{
    size_t M = pb->M;
    double *S = calloc(M * M, sizeof *S), *a = malloc(M * sizeof *a);
    for (size_t c = 0; c < M; c++)
        for (size_t r = 0; r < M; r++) {
            double v = 0.0;
            for (size_t l = 0; l < LAT; l++) {
                size_t q = l / PER_Q;
                v += pb->A[pb->out[r] + l * P] * pb->A[pb->out[c] + l * P] *
                     gp_kernel_eval(pb->k[q], pb->X + pb->row[r] * D, pb->X + pb->row[c] * D,
                                    pb->row[r] == pb->row[c]);
            }
            S[r + c * M] = v + (r == c ? pb->noise[pb->out[r]] : 0.0);
        }
    assert_int_equal(LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)M, S, (lapack_int)M), 0);
    memcpy(a, pb->y, M * sizeof *a);
    LAPACKE_dpotrs(LAPACK_COL_MAJOR, 'L', (lapack_int)M, 1, S, (lapack_int)M, a, (lapack_int)M);
    double quad = 0.0, logdet = 0.0;
    for (size_t i = 0; i < M; i++) {
        quad += pb->y[i] * a[i];
        logdet += 2.0 * log(S[i * M + i]);
    }
    free(S);
    free(a);
    return -0.5 * (quad + logdet + (double)M * LOG_2PI);
}

static void test_sgpr_full_rank_is_exact(void **state)
{
    (void)state;
    problem pb;
    problem_init(&pb, N);
    double F = eval(&pb, 0, NULL, NULL, NULL), ref = dense_lml(&pb);
    if (!(fabs(F - ref) < 1e-4 * (1.0 + fabs(ref))))
        fail_msg("bound %.10g, exact %.10g", F, ref);
    problem_free(&pb);
}

/* At the collapsed optimum q = N(mw, B^{-1}) the ELBO equals the bound. */
static void test_svgp_at_optimal_q_is_sgpr(void **state)
{
    (void)state;
    problem pb;
    problem_init(&pb, MZ);
    gp_coreg_sparse_at at = at_of(&pb);
    gp_coreg_sparse_data d = data_of(&pb);
    gp_coreg_sparse_post post = {0};
    gp_error err;
    double F, E;
    assert_int_equal(gp_coreg_sgpr_bound(&at, &d, &F, NULL, &post, &err), GP_OK);
    size_t K = post.K;
    double *Lq = malloc(K * K * sizeof *Lq);
    memcpy(Lq, post.C, K * K * sizeof *Lq);
    assert_int_equal(LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)K, Lq, (lapack_int)K), 0);
    gp_zero_upper(Lq, K, K);
    assert_int_equal(gp_coreg_svgp_elbo(&at, &d, post.mt, Lq, &E, NULL, NULL, &err), GP_OK);
    if (!(fabs(F - E) < 1e-8 * (1.0 + fabs(F))))
        fail_msg("sgpr %.12g, svgp at the optimal q %.12g", F, E);
    /* a natural-gradient step of 1 on the full batch from the prior lands there */
    double *m1 = calloc(K, sizeof *m1), *L1 = calloc(K * K, sizeof *L1), *S1 = calloc(K * K, sizeof *S1);
    for (size_t i = 0; i < K; i++)
        L1[i * K + i] = 1.0;
    assert_int_equal(gp_coreg_svgp_natgrad(&at, &d, 1.0, m1, L1, &err), GP_OK);
    for (size_t i = 0; i < K; i++)
        assert_true(fabs(m1[i] - post.mt[i]) < 1e-8 * (1.0 + fabs(post.mt[i])));
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, (int)K, (int)K, (int)K, 1.0, L1, (int)K,
                L1, (int)K, 0.0, S1, (int)K);
    for (size_t i = 0; i < K * K; i++)
        assert_true(fabs(S1[i] - post.C[i]) < 1e-8);
    /* a half step from the optimum stays there */
    assert_int_equal(gp_coreg_svgp_natgrad(&at, &d, 0.5, m1, L1, &err), GP_OK);
    for (size_t i = 0; i < K; i++)
        assert_true(fabs(m1[i] - post.mt[i]) < 1e-8 * (1.0 + fabs(post.mt[i])));
    free(m1);
    free(L1);
    free(S1);
    /* and any other q is worse */
    Lq[0] *= 1.1;
    double E2;
    assert_int_equal(gp_coreg_svgp_elbo(&at, &d, post.mt, Lq, &E2, NULL, NULL, &err), GP_OK);
    assert_true(E2 < E);
    free(Lq);
    gp_coreg_sparse_post_free(&post);
    problem_free(&pb);
}


/* A row whose outputs are all missing contributes nothing: the bound with
 * it in X (and no entry of it) equals the bound without the row. */
static void test_missing_equals_removed(void **state)
{
    (void)state;
    problem pb;
    problem_init(&pb, MZ);
    double y1[(N + 1) * P], y2[N * P];
    for (size_t i = 0; i < (N + 1) * P; i++)
        y1[i] = NAN;
    for (size_t i = 0; i < N * P; i++)
        y2[i] = NAN;
    for (size_t a = 0; a < pb.M; a++) { /* row N/2 of y1 is the extra one */
        size_t i = pb.row[a], i1 = i < N / 2 ? i : i + 1;
        y1[pb.out[a] * (N + 1) + i1] = pb.y[a];
        y2[pb.out[a] * N + i] = pb.y[a];
    }
    double X1[D * (N + 1)];
    for (size_t i = 0; i <= N; i++)
        for (size_t k = 0; k < D; k++)
            X1[i * D + k] = i == N / 2 ? 0.123 * (double)(k + 1)
                                       : pb.X[(i < N / 2 ? i : i - 1) * D + k];
    gp_coreg_entries e1, e2;
    gp_error err;
    assert_int_equal(gp_coreg_entries_build(y1, N + 1, P, &e1, &err), GP_OK);
    assert_int_equal(gp_coreg_entries_build(y2, N, P, &e2, &err), GP_OK);
    assert_int_equal(e1.M, pb.M);
    double t1[N * P], t2[N * P];
    for (size_t a = 0; a < e1.M; a++) {
        t1[a] = y1[e1.out[a] * (N + 1) + e1.row[a]];
        t2[a] = y2[e2.out[a] * N + e2.row[a]];
    }
    gp_coreg_sparse_at at = at_of(&pb);
    gp_coreg_sparse_data d1 = {X1, N + 1, D, e1.M, e1.row, e1.out, t1, 1.0};
    gp_coreg_sparse_data d2 = {pb.X, N, D, e2.M, e2.row, e2.out, t2, 1.0};
    double F1, F2, E1, E2;
    size_t K = LAT * MZ;
    double *mq = calloc(K, sizeof *mq), *Lq = calloc(K * K, sizeof *Lq);
    q_init(K, mq, Lq);
    assert_int_equal(gp_coreg_sgpr_bound(&at, &d1, &F1, NULL, NULL, &err), GP_OK);
    assert_int_equal(gp_coreg_sgpr_bound(&at, &d2, &F2, NULL, NULL, &err), GP_OK);
    assert_int_equal(gp_coreg_svgp_elbo(&at, &d1, mq, Lq, &E1, NULL, NULL, &err), GP_OK);
    assert_int_equal(gp_coreg_svgp_elbo(&at, &d2, mq, Lq, &E2, NULL, NULL, &err), GP_OK);
    assert_true(fabs(F1 - F2) < 1e-10 * (1.0 + fabs(F1)));
    assert_true(fabs(E1 - E2) < 1e-10 * (1.0 + fabs(E1)));
    free(mq);
    free(Lq);
    gp_coreg_entries_free(&e1);
    gp_coreg_entries_free(&e2);
    problem_free(&pb);
}

/* With Z = X, sgpr's bound in the packed coordinates of the shared
 * parameters (core/coreg/params.h) is the exact coregionalised LML of
 * core/coreg/lml.h, value and gradient (up to Kuu's jitter): checks the chain
 * from dF/dA to W and log kappa against the exact path's chain from B. */
static void full_rank_against_exact(gp_coreg_type type, size_t latents, size_t rank)
{
    problem pb;
    problem_init(&pb, N);
    gp_error err;
    gp_coreg_spec spec = {type, rank, latents, 1, GP_COREG_SOLVER_AUTO};
    gp_coreg_params cp;
    assert_int_equal(gp_coreg_params_init(&cp, &spec, P, pb.k[0], NULL, &err), GP_OK);
    size_t dim = gp_coreg_params_dim(&cp);
    double *x = calloc(dim, sizeof *x), *g1 = calloc(dim, sizeof *g1), *g2 = calloc(dim, sizeof *g2);
    gp_coreg_params_pack(&cp, x);
    for (size_t i = 0; i < dim; i++) /* away from the symmetric start */
        x[i] += 0.1 * sin(3.0 * (double)i + 1.0);
    gp_coreg_params_unpack(&cp, x);
    double yw[N * P], Y[N * P];
    for (size_t i = 0; i < N * P; i++)
        Y[i] = NAN;
    for (size_t a = 0; a < pb.M; a++)
        Y[pb.out[a] * N + pb.row[a]] = pb.y[a];
    gp_coreg_entries e;
    assert_int_equal(gp_coreg_entries_build(Y, N, P, &e, &err), GP_OK);
    for (size_t a = 0; a < e.M; a++)
        yw[a] = Y[e.out[a] * N + e.row[a]];
    gp_coreg_data cd = {pb.X, N, D_DIM, &e, yw};
    double *A = calloc(e.M * e.M, sizeof *A), *alpha = calloc(e.M, sizeof *alpha), lml;
    assert_int_equal(gp_coreg_lml_general(&cp, &cd, A, alpha, &lml, g1, NULL, NULL, &err), GP_OK);
    size_t per_q = gp_coreg_sparse_per_q(&cp), L = cp.q * per_q;
    double *Am = calloc(P * L, sizeof *Am);
    gp_coreg_sparse_build_A(&cp, Am);
    gp_coreg_sparse_at at = {P, cp.q, per_q, (const gp_kernel *const *)cp.kernels, Am, cp.noise,
                             pb.X, N};
    gp_coreg_sparse_data sd = {pb.X, N, D_DIM, e.M, e.row, e.out, yw, 1.0};
    double *gk = calloc(cp.q * cp.n_kparams, sizeof *gk), *gA = calloc(P * L, sizeof *gA);
    double gs[P], *gB = calloc(cp.q * P * P, sizeof *gB), F;
    gp_coreg_sparse_grad gr = {gk, gA, gs, NULL, NULL, NULL};
    assert_int_equal(gp_coreg_sgpr_bound(&at, &sd, &F, &gr, NULL, &err), GP_OK);
    gp_coreg_sparse_chain(&cp, gk, gA, gs, gB, g2);
    if (!(fabs(F - lml) < 1e-4 * (1.0 + fabs(lml))))
        fail_msg("bound %.10g, exact LML %.10g", F, lml);
    for (size_t i = 0; i < dim; i++)
        if (!(fabs(g1[i] - g2[i]) < 1e-3 * (1.0 + fabs(g1[i]))))
            fail_msg("packed gradient [%zu]: bound %.8g, exact %.8g", i, g2[i], g1[i]);
    free(x);
    free(g1);
    free(g2);
    free(A);
    free(alpha);
    free(Am);
    free(gk);
    free(gA);
    free(gB);
    gp_coreg_entries_free(&e);
    gp_coreg_params_free(&cp);
    problem_free(&pb);
}

static void test_full_rank_against_exact(void **state)
{
    (void)state;
    full_rank_against_exact(GP_COREG_ICM, 1, 2);
    full_rank_against_exact(GP_COREG_LMC, 2, 1);
}

/* ---- the methods ---- */

enum { FN = 40, FP = 2 };

/* Two correlated outputs of one input, output 1 missing on every third row. */
static void method_data(double *X, double *Y)
{
    for (size_t i = 0; i < FN; i++) {
        double x = -2.0 + 4.0 * (double)i / (FN - 1);
        X[i] = x;
        Y[i] = sin(2.0 * x) + 0.05 * cos(13.0 * x);
        Y[FN + i] = i % 3 == 1 ? NAN : 2.0 * sin(2.0 * x) + 0.5 + 0.05 * sin(17.0 * x);
    }
}

typedef struct coreg_opts {
    gp_value obj, items[2];
    char *keys[2];
    gp_option_value ov[3];
} coreg_opts;

static size_t coreg_options(coreg_opts *o, const char *type, size_t inducing)
{
    memset(o, 0, sizeof *o);
    o->keys[0] = (char *)"type";
    o->items[0].type = GP_VALUE_STRING;
    o->items[0].string = (char *)type;
    o->obj.type = GP_VALUE_OBJECT;
    o->obj.keys = o->keys;
    o->obj.items = o->items;
    o->obj.n = 1;
    o->ov[0].name = "coregionalization";
    o->ov[0].object = &o->obj;
    o->ov[1].name = "inducing";
    o->ov[1].number = (double)inducing;
    o->ov[2].name = "max_iterations";
    o->ov[2].number = 60;
    return 3;
}

static gp_model *fit_coreg(const char *method, const char *type, size_t inducing, double *X,
                           double *Y)
{
    const gp_method *me = gp_method_find(method);
    assert_non_null(me);
    gp_kernel *k = NULL;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, GP_KERNEL_RBF, 1, 0, NULL, 0, &err), GP_OK);
    coreg_opts o;
    size_t no = coreg_options(&o, type, inducing);
    method_data(X, Y);
    gp_fit_request req = {.X = X, .y = Y, .n = FN, .d = 1, .kernel = k, .standardize = 1,
                          .seed = 3, .options = o.ov, .n_options = no, .n_outputs = FP};
    gp_model *model = NULL;
    int rc = gp_model_fit(me, &req, &model, &err);
    if (rc != GP_OK)
        fail_msg("%s %s: %s (field %s)", method, type, err.message, err.field);
    gp_kernel_free(k);
    assert_int_equal(model->coreg.type, strcmp(type, "icm") == 0 ? GP_COREG_ICM : GP_COREG_LMC);
    assert_int_equal(model->n_outputs, FP);
    return model;
}

static void predict_model(const gp_model *model, const double *Xs, size_t m, int full,
                          double *mu, double *var, double *cov, double *cross)
{
    gp_predict_request pr = {.X = Xs, .m = m, .d = 1, .include_noise = 0,
                             .full_covariance = full};
    gp_prediction out = {.mean = mu, .variance = var, .covariance = cov,
                         .cross_covariance = cross};
    gp_error err;
    if (gp_model_predict(model, &pr, &out, &err) != GP_OK)
        fail_msg("predict: %s", err.message);
}

/* Fit, predict near the truth, batch invariance, covariances consistent,
 * export/import bit for bit, samples of the right shape. */
static void method_round(const char *method, const char *type)
{
    double X[FN], Y[FN * FP];
    gp_model *model = fit_coreg(method, type, 12, X, Y);
    enum { TM = 5 };
    double Xs[TM] = {-1.5, -0.7, 0.1, 0.9, 1.7};
    double mu[TM * FP], var[TM * FP], cov[TM * TM * FP], cross[TM * FP * TM * FP];
    predict_model(model, Xs, TM, 1, mu, var, cov, cross);
    for (size_t i = 0; i < TM; i++) {
        double t0 = sin(2.0 * Xs[i]), t1 = 2.0 * t0 + 0.5;
        if (!(fabs(mu[i] - t0) < 0.15 && fabs(mu[TM + i] - t1) < 0.3))
            fail_msg("%s %s: point %zu predicted (%g, %g), truth (%g, %g)", method, type, i,
                     mu[i], mu[TM + i], t0, t1);
        for (size_t j = 0; j < FP; j++) {
            size_t r = i + TM * j;
            assert_true(var[r] >= 0.0);
            assert_true(fabs(cross[r * TM * FP + r] - var[r]) <= 1e-12 * (1.0 + var[r]));
            assert_true(fabs(cov[j * TM * TM + i * TM + i] - var[r]) <= 1e-12 * (1.0 + var[r]));
        }
    }
    /* batch invariance: each point alone gives the same bits */
    for (size_t i = 0; i < TM; i++) {
        double m1[FP], v1[FP];
        predict_model(model, Xs + i, 1, 0, m1, v1, NULL, NULL);
        for (size_t j = 0; j < FP; j++) {
            assert_memory_equal(&m1[j], &mu[i + TM * j], sizeof(double));
            assert_memory_equal(&v1[j], &var[i + TM * j], sizeof(double));
        }
    }
    /* round trip */
    gp_state st;
    gp_state_init(&st);
    gp_error err;
    assert_int_equal(gp_model_export(model, &st, &err), GP_OK);
    gp_model *back = NULL;
    if (gp_model_import(model->method, &st, &back, &err) != GP_OK)
        fail_msg("import: %s", err.message);
    double mu2[TM * FP], var2[TM * FP];
    predict_model(back, Xs, TM, 0, mu2, var2, NULL, NULL);
    assert_memory_equal(mu, mu2, sizeof mu);
    assert_memory_equal(var, var2, sizeof var);
    assert_int_equal(back->coreg.type, model->coreg.type);
    assert_int_equal(back->coreg.n_observed, model->coreg.n_observed);
    /* samples: m x n_samples x p, their spread near the variance */
    enum { NS = 400 };
    double *smp = malloc(TM * NS * FP * sizeof *smp);
    gp_sample_request sr = {.X = Xs, .m = TM, .d = 1, .n_samples = NS, .seed = 5};
    if (gp_model_sample(back, &sr, smp, &err) != GP_OK)
        fail_msg("sample: %s", err.message);
    for (size_t j = 0; j < FP; j++) {
        double s = 0.0;
        for (size_t t = 0; t < NS; t++)
            s += smp[j * TM * NS + t * TM + 2];
        s /= NS;
        assert_true(fabs(s - mu[2 + TM * j]) < 4.0 * sqrt(var[2 + TM * j] / NS) + 1e-6);
    }
    free(smp);
    gp_model_free(back);
    gp_state_free(&st);
    gp_model_free(model);
}

static void test_sgpr_icm_method(void **state)
{
    (void)state;
    method_round("sgpr", "icm");
}

static void test_sgpr_lmc_method(void **state)
{
    (void)state;
    method_round("sgpr", "lmc");
}

static void test_svgp_icm_method(void **state)
{
    (void)state;
    method_round("svgp", "icm");
}

static void test_svgp_lmc_method(void **state)
{
    (void)state;
    method_round("svgp", "lmc");
}

/* sum_q B_q[ja,jb] k_q(xa, xb) */
static double kco(const gp_coreg_view *v, double Bq[][FP * FP], const double *xa, size_t ja,
                  const double *xb, size_t jb, int same)
{
    double t = 0.0;
    for (size_t q = 0; q < v->q; q++)
        t += Bq[q][ja + jb * FP] * gp_kernel_eval(v->kernels[q], xa, xb, same);
    return t;
}

/* sgpr with every training input inducing (random selection of all n,
 * Z fixed) predicts as the dense coregionalised GP at its fitted
 * parameters (model->coreg), in original units. */
static void test_sgpr_full_rank_predicts_exact(void **state)
{
    (void)state;
    double X[FN], Y[FN * FP];
    method_data(X, Y);
    gp_kernel *k = NULL;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, GP_KERNEL_RBF, 1, 0, NULL, 0, &err), GP_OK);
    coreg_opts o;
    coreg_options(&o, "lmc", FN);
    gp_option_value ov[6];
    memcpy(ov, o.ov, sizeof o.ov);
    ov[3] = (gp_option_value){.name = "inducing_selection", .string = "random"};
    ov[4] = (gp_option_value){.name = "optimize_inducing", .number = 0};
    ov[5] = (gp_option_value){.name = "reselect", .number = 0};
    ov[2].number = 15;
    gp_fit_request req = {.X = X, .y = Y, .n = FN, .d = 1, .kernel = k, .standardize = 1,
                          .seed = 3, .options = ov, .n_options = 6, .n_outputs = FP};
    gp_model *model = NULL;
    if (gp_model_fit(gp_method_find("sgpr"), &req, &model, &err) != GP_OK)
        fail_msg("fit: %s", err.message);
    const gp_coreg_view *v = &model->coreg;
    /* the dense GP over the observed entries, working units */
    size_t M = 0, row[FN * FP], out[FN * FP];
    double yw[FN * FP], xs[FN];
    for (size_t i = 0; i < FN; i++)
        xs[i] = (X[i] - model->x_mean[0]) / model->x_scale[0];
    for (size_t i = 0; i < FN; i++)
        for (size_t j = 0; j < FP; j++)
            if (!isnan(Y[j * FN + i])) {
                row[M] = i;
                out[M] = j;
                yw[M++] = (Y[j * FN + i] - v->y_mean[j]) / v->y_scale[j];
            }
    double *S = calloc(M * M, sizeof *S), *al = malloc(M * sizeof *al);
    double Bq[GP_COREG_MAX_LATENTS][FP * FP];
    for (size_t q = 0; q < v->q; q++)
        for (size_t a = 0; a < FP; a++)
            for (size_t b = 0; b < FP; b++) {
                double t = a == b ? v->kappa[q * FP + a] : 0.0;
                for (size_t r = 0; r < v->rank; r++)
                    t += v->W[q * FP * v->rank + r * FP + a] * v->W[q * FP * v->rank + r * FP + b];
                Bq[q][a + b * FP] = t;
            }
    for (size_t c = 0; c < M; c++)
        for (size_t r = 0; r < M; r++)
            S[r + c * M] = kco(v, Bq, &xs[row[r]], out[r], &xs[row[c]], out[c], row[r] == row[c]) +
                           (r == c ? v->noise[out[r]] : 0.0);
    assert_int_equal(LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)M, S, (lapack_int)M), 0);
    memcpy(al, yw, M * sizeof *al);
    LAPACKE_dpotrs(LAPACK_COL_MAJOR, 'L', (lapack_int)M, 1, S, (lapack_int)M, al, (lapack_int)M);
    enum { TM = 4 };
    double Xt[TM] = {-1.3, -0.2, 0.55, 1.8}, mu[TM * FP], var[TM * FP], ks[FN * FP];
    predict_model(model, Xt, TM, 0, mu, var, NULL, NULL);
    for (size_t i = 0; i < TM; i++) {
        double x = (Xt[i] - model->x_mean[0]) / model->x_scale[0];
        for (size_t j = 0; j < FP; j++) {
            double m0 = 0.0;
            for (size_t a = 0; a < M; a++) {
                ks[a] = kco(v, Bq, &x, j, &xs[row[a]], out[a], 0);
                m0 += ks[a] * al[a];
            }
            LAPACKE_dpotrs(LAPACK_COL_MAJOR, 'L', (lapack_int)M, 1, S, (lapack_int)M, ks,
                           (lapack_int)M);
            double v0 = kco(v, Bq, &x, j, &x, j, 1);
            for (size_t a = 0; a < M; a++)
                v0 -= kco(v, Bq, &x, j, &xs[row[a]], out[a], 0) * ks[a];
            double sc = v->y_scale[j], mo = v->y_mean[j] + sc * m0, vo = v0 * sc * sc;
            if (!(fabs(mu[i + TM * j] - mo) < 1e-4 * (1.0 + fabs(mo)) &&
                  fabs(var[i + TM * j] - vo) < 1e-4 * (sc * sc + vo)))
                fail_msg("point %zu output %zu: sgpr (%.8g, %.8g), exact (%.8g, %.8g)", i, j,
                         mu[i + TM * j], var[i + TM * j], mo, vo);
        }
    }
    free(S);
    free(al);
    gp_model_free(model);
    gp_kernel_free(k);
}

/* A full-batch svgp fit ends with q optimal for its parameters: its
 * reported ELBO is sgpr's collapsed bound at them. */
static void test_svgp_fit_ends_at_collapsed_bound(void **state)
{
    (void)state;
    double X[FN], Y[FN * FP];
    gp_model *model = fit_coreg("svgp", "icm", 10, X, Y);
    const gp_coreg_sparse_impl *im = model->impl;
    gp_coreg_entries e;
    gp_error err;
    assert_int_equal(gp_coreg_entries_build(Y, FN, FP, &e, &err), GP_OK);
    double yw[FN * FP], xs[FN], offset = 0.0, F;
    for (size_t a = 0; a < e.M; a++) {
        size_t j = e.out[a];
        yw[a] = (Y[j * FN + e.row[a]] - im->cp.y_mean[j]) / im->cp.y_scale[j];
        offset -= log(im->cp.y_scale[j]);
    }
    for (size_t i = 0; i < FN; i++)
        xs[i] = (X[i] - model->x_mean[0]) / model->x_scale[0];
    gp_coreg_sparse_at at = gp_coreg_sparse_impl_at(im);
    gp_coreg_sparse_data d = {xs, FN, 1, e.M, e.row, e.out, yw, 1.0};
    assert_int_equal(gp_coreg_sgpr_bound(&at, &d, &F, NULL, NULL, &err), GP_OK);
    if (!(fabs(F + offset - model->diag.objective) < 1e-6 * (1.0 + fabs(F))))
        fail_msg("svgp's ELBO %.10g, the collapsed bound there %.10g", model->diag.objective,
                 F + offset);
    gp_coreg_entries_free(&e);
    gp_model_free(model);
}

/* Batched predictions (gp_model_predict_batch) and 1 or 2 threads give a
 * point the bits it gets alone; the fit is the same bits with 1 or 2
 * threads. */
static void test_batch_and_threads(void **state)
{
    (void)state;
    double X[FN], Y[FN * FP];
    gp_parallel_set_threads(1);
    gp_model *m1 = fit_coreg("sgpr", "lmc", 10, X, Y);
    gp_parallel_set_threads(2);
    gp_model *m2 = fit_coreg("sgpr", "lmc", 10, X, Y);
    double Xa[3] = {-1.1, 0.2, 1.4}, Xb[2] = {0.7, -0.4};
    double ma[3 * FP], va[3 * FP], mb[2 * FP], vb[2 * FP], m2a[3 * FP], v2a[3 * FP];
    predict_model(m2, Xa, 3, 0, m2a, v2a, NULL, NULL);
    gp_parallel_set_threads(1);
    gp_predict_request reqs[2] = {{.X = Xa, .m = 3, .d = 1}, {.X = Xb, .m = 2, .d = 1}};
    gp_prediction outs[2] = {{.mean = ma, .variance = va}, {.mean = mb, .variance = vb}};
    int rcs[2];
    gp_error errs[2];
    assert_int_equal(gp_model_predict_batch(m1, reqs, outs, rcs, errs, 2), GP_OK);
    assert_int_equal(rcs[0], GP_OK);
    assert_int_equal(rcs[1], GP_OK);
    assert_memory_equal(ma, m2a, sizeof ma); /* fit and predict with 2 threads: same bits */
    assert_memory_equal(va, v2a, sizeof va);
    for (size_t i = 0; i < 2; i++) {
        double m0[FP], v0[FP];
        predict_model(m1, Xb + i, 1, 0, m0, v0, NULL, NULL);
        for (size_t j = 0; j < FP; j++) {
            assert_memory_equal(&m0[j], &mb[i + 2 * j], sizeof(double));
            assert_memory_equal(&v0[j], &vb[i + 2 * j], sizeof(double));
        }
    }
    gp_parallel_set_threads(0);
    gp_model_free(m1);
    gp_model_free(m2);
}

/* svgp's minibatch path (optimizer adam): natural-gradient steps on the
 * joint q and Adam on the parameters reach predictions near the truth. */
static void test_svgp_adam_method(void **state)
{
    (void)state;
    double X[FN], Y[FN * FP];
    method_data(X, Y);
    gp_kernel *k = NULL;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, GP_KERNEL_RBF, 1, 0, NULL, 0, &err), GP_OK);
    coreg_opts o;
    coreg_options(&o, "icm", 12);
    gp_option_value ov[7];
    memcpy(ov, o.ov, sizeof o.ov);
    ov[3] = (gp_option_value){.name = "optimizer", .string = "adam"};
    ov[4] = (gp_option_value){.name = "batch_size", .number = 10};
    ov[5] = (gp_option_value){.name = "epochs", .number = 60};
    ov[6] = (gp_option_value){.name = "learning_rate", .number = 0.05};
    gp_fit_request req = {.X = X, .y = Y, .n = FN, .d = 1, .kernel = k, .standardize = 1,
                          .seed = 3, .options = ov, .n_options = 7, .n_outputs = FP};
    gp_model *model = NULL;
    if (gp_model_fit(gp_method_find("svgp"), &req, &model, &err) != GP_OK)
        fail_msg("fit: %s", err.message);
    const gp_info_item *it = NULL;
    for (size_t i = 0; i < model->diag.n_info; i++)
        if (strcmp(model->diag.info[i].key, "optimizer") == 0)
            it = &model->diag.info[i];
    assert_non_null(it);
    assert_string_equal(it->string, "adam");
    double Xs[3] = {-1.2, 0.3, 1.1}, mu[3 * FP], var[3 * FP];
    predict_model(model, Xs, 3, 0, mu, var, NULL, NULL);
    for (size_t i = 0; i < 3; i++) {
        double t0 = sin(2.0 * Xs[i]), t1 = 2.0 * t0 + 0.5;
        if (!(fabs(mu[i] - t0) < 0.25 && fabs(mu[3 + i] - t1) < 0.5))
            fail_msg("adam: point %zu predicted (%g, %g), truth (%g, %g)", i, mu[i], mu[3 + i],
                     t0, t1);
    }
    gp_model_free(model);
    gp_kernel_free(k);
}

/* Refused naming the field: solver on a sparse method, a likelihood other
 * than gaussian, several outputs without the option. */
static void test_bad_input(void **state)
{
    (void)state;
    double X[FN], Y[FN * FP];
    method_data(X, Y);
    gp_kernel *k = NULL;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, GP_KERNEL_RBF, 1, 0, NULL, 0, &err), GP_OK);
    coreg_opts o;
    size_t no = coreg_options(&o, "icm", 8);
    gp_fit_request req = {.X = X, .y = Y, .n = FN, .d = 1, .kernel = k, .standardize = 1,
                          .seed = 3, .options = o.ov, .n_options = no, .n_outputs = FP};
    gp_model *model = NULL;
    /* solver is exact's */
    o.keys[1] = (char *)"solver";
    o.items[1].type = GP_VALUE_STRING;
    o.items[1].string = (char *)"kronecker";
    o.obj.n = 2;
    assert_int_not_equal(gp_model_fit(gp_method_find("sgpr"), &req, &model, &err), GP_OK);
    assert_string_equal(err.field, "options.coregionalization.solver");
    o.obj.n = 1;
    /* bernoulli */
    req.likelihood = GP_LIK_BERNOULLI;
    assert_int_not_equal(gp_model_fit(gp_method_find("svgp"), &req, &model, &err), GP_OK);
    assert_string_equal(err.field, "likelihood");
    req.likelihood = GP_LIK_GAUSSIAN;
    /* several outputs without the option */
    req.n_options = 0;
    assert_int_not_equal(gp_model_fit(gp_method_find("sgpr"), &req, &model, &err), GP_OK);
    assert_string_equal(err.field, "y");
    assert_null(model);
    gp_kernel_free(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sgpr_gradient),
        cmocka_unit_test(test_svgp_gradient),
        cmocka_unit_test(test_sgpr_full_rank_is_exact),
        cmocka_unit_test(test_svgp_at_optimal_q_is_sgpr),
        cmocka_unit_test(test_missing_equals_removed),
        cmocka_unit_test(test_full_rank_against_exact),
        cmocka_unit_test(test_sgpr_icm_method),
        cmocka_unit_test(test_sgpr_lmc_method),
        cmocka_unit_test(test_svgp_icm_method),
        cmocka_unit_test(test_svgp_lmc_method),
        cmocka_unit_test(test_sgpr_full_rank_predicts_exact),
        cmocka_unit_test(test_svgp_fit_ends_at_collapsed_bound),
        cmocka_unit_test(test_batch_and_threads),
        cmocka_unit_test(test_svgp_adam_method),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
