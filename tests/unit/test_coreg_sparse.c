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

#include <lapacke.h>

#include "core/base/rng.h"
#include "core/coreg/sparse.h"
#include "core/kernel/kernel.h"
#include "core/linalg/linalg.h"

#define LOG_2PI 1.8378770664093454836

enum { N = 11, D = 2, P = 3, Q = 2, R = 1, PER_Q = R + P, LAT = Q * PER_Q, MZ = 4 };

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
    gp_coreg_sparse_data d = {pb->X, N, D, pb->M, pb->row, pb->out, pb->y};
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
    /* and any other q is worse */
    Lq[0] *= 1.1;
    double E2;
    assert_int_equal(gp_coreg_svgp_elbo(&at, &d, post.mt, Lq, &E2, NULL, NULL, &err), GP_OK);
    assert_true(E2 < E);
    free(Lq);
    gp_coreg_sparse_post_free(&post);
    problem_free(&pb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sgpr_gradient),
        cmocka_unit_test(test_svgp_gradient),
        cmocka_unit_test(test_sgpr_full_rank_is_exact),
        cmocka_unit_test(test_svgp_at_optimal_q_is_sgpr),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
