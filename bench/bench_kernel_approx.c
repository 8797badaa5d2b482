/* Benchmark of the random-feature frequency samplers (core/features/sample.h) on
 * kernel approximation: the protocol of Figure 2 of "Stein Random Feature
 * Regression" (docs/methods/stein-random-features.md §3.3), plus a Matérn-3/2
 * extension (§3.4) and a sweep over the spread of the inputs (§2.2b) that sets
 * the thresholds of gp_freq_sampler_auto (core/methods/ssgp/auto.c).
 *
 * Run from the repository root:
 *   build/bench/bench_kernel_approx [--sweep r,d,matern,spread|all] [--seeds N]
 *       [--quick] [--n N] [--samplers LIST] [--stein-iterations N] [--stein-step X]
 *       [--threads N]
 * or `sh bench/run.sh build kernel_approx [ARGS...]`. Prints markdown tables to
 * stdout and progress notes to stderr.
 *
 * Protocol: N = 1000 points X ~ U[0,1]^d (gp_rng, stream derived from
 * (X_SEED, seed index)), unit lengthscale, relative Frobenius error
 * ||K - K^||_F / ||K||_F (gp_features_kernel_error for the feature samplers),
 * mean over the seeds (5 by default). Frequencies of seed index k are drawn
 * with seed FREQ_SEED + k. The frequencies do not depend on X, so one draw per
 * (kernel, sampler, R, d, seed) is cached and shared by every sweep that uses
 * it (e.g. d = 2, R = 200 appears in the R, d and spread sweeps).
 *
 * Nyström (RBF only): as scikit-learn's Nystroem(kernel='rbf', gamma=0.5,
 * n_components=R) fitted on a separate independent U[0,1]^d sample of 1000
 * points (stream (NYS_SEED, k)); the R landmarks are the first R of a random
 * permutation of that sample, K^ = K_nm K_mm^+ K_mn with the pseudo-inverse
 * from the eigendecomposition of K_mm (LAPACKE dsyevd), eigenvalues below
 * 1e-12 times the largest dropped; error measured on X. The column
 * "NYS fp32" is the same computation in single precision with scikit-learn's
 * own regularisation (|lambda| clamped below at 1e-12): scikit-learn keeps
 * float32 inputs in float32, and the paper's X were JAX float32 arrays. It
 * reproduces the paper's Nyström floor of ~1e-4; in double precision the
 * Nyström error at d = 2 is ~1e-10 (checked against scikit-learn 1.2.1 on
 * float64 and float32 inputs). */
#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/support/args.h"
#include "bench/support/cli.h"
#include "bench/support/clock.h"
#include "core/base/error.h"
#include "core/base/parallel.h"
#include "core/base/rng.h"
#include "core/methods/ssgp/auto.h"
#include "core/features/sample.h"
#include "core/kernel/kernel.h"

#define N_POINTS 1000
#define N_NYS_SAMPLE 1000
#define MAX_SEEDS 32
#define X_SEED UINT64_C(20240801)
#define NYS_SEED UINT64_C(20240802)
#define NYS_PERM_SEED UINT64_C(20240803)
#define FREQ_SEED UINT64_C(1000)

/* ---- the compared methods ---- */

typedef enum variant {
    V_MC = 0,
    V_QMC,
    V_ORF,
    V_STEIN,    /* stein, bandwidth total (the default) */
    V_STEIN_PD, /* stein, bandwidth per_dim (the authors' code) */
    V_NYS,      /* Nyström, pseudo-inverse with a relative cut */
    V_NYS32,
    V_COUNT
} variant;

static const char *const variant_name[V_COUNT] = {"mc",       "qmc", "orf",      "stein",
                                                  "stein_pd", "nys", "nys32"};
static const char *const variant_label[V_COUNT] = {
    "MC", "QMC", "ORF", "Stein (total)", "Stein (per_dim)", "NYS", "NYS fp32"};

#define M(v) (1u << (v))
#define FEATURE_MASK (M(V_MC) | M(V_QMC) | M(V_ORF) | M(V_STEIN) | M(V_STEIN_PD))

typedef struct options {
    int quick;
    int seeds;
    size_t n;
    int do_r, do_d, do_matern, do_spread;
    unsigned samplers; /* mask of variants allowed */
    int stein_iterations; /* 0: default */
    double stein_step;    /* 0: default */
    int threads;
    /* --r-list / --d-list / --s-list: restrict the sweeps to these values. */
    double r_list[32], d_list[32], s_list[32];
    int n_r_list, n_d_list, n_s_list;
} options;

/* 1 when v is selected by a list (an empty list selects everything). */
static int in_list(const double *list, int n, double v)
{
    if (n == 0)
        return 1;
    for (int i = 0; i < n; i++)
        if (fabs(list[i] - v) < 1e-9)
            return 1;
    return 0;
}

static int parse_list(const char *arg, double *out, int *n)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", arg);
    *n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t != NULL;
         t = strtok_r(NULL, ",", &save)) {
        if (*n == 32)
            return -1;
        char *end = NULL;
        out[(*n)++] = strtod(t, &end);
        if (end == t || *end != '\0')
            return -1;
    }
    return *n > 0 ? 0 : -1;
}

/* The entries of a comma list: 1 in use[i] for each of names[0..n) listed,
 * "all" selecting every one; -1 with a message on an entry not known. */
static int parse_choice(const char *list, const char *const *names, int n, int *use,
                        const char *flag)
{
    if (gp_bench_list_has(list, "all")) {
        for (int i = 0; i < n; i++)
            use[i] = 1;
        return 0;
    }
    return gp_bench_parse_names(list, names, n, use, flag);
}

/* 0 to run, 1 after --help, 2 after a message on stderr. */
static int parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    long seeds = -1, n = N_POINTS, iterations = 0, threads = 0;
    double step = NAN; /* NAN: not given */
    const char *sweep = NULL, *samplers = NULL, *lists[3] = {NULL, NULL, NULL};
    char seeds_help[80], n_help[64];
    snprintf(seeds_help, sizeof seeds_help, "seeds per cell (default 5, 2 with --quick; at most %d)",
             MAX_SEEDS);
    snprintf(n_help, sizeof n_help, "points in X (default %d)", N_POINTS);
    const gp_bench_cli_option opts[] = {
        {"sweep", GP_BENCH_CLI_STRING, &sweep, 0, 0,
         "comma list of r, d, matern, spread, or all (default all)"},
        {"seeds", GP_BENCH_CLI_LONG, &seeds, 1, MAX_SEEDS, seeds_help},
        {"quick", GP_BENCH_CLI_FLAG, &o->quick, 0, 0, "a small subset (2 seeds, few R / d / s values)"},
        {"n", GP_BENCH_CLI_LONG, &n, 2, 100000000, n_help},
        {"samplers", GP_BENCH_CLI_STRING, &samplers, 0, 0,
         "subset of mc,qmc,orf,stein,stein_pd,nys,nys32"},
        {"stein-iterations", GP_BENCH_CLI_LONG, &iterations, 1, 100000000,
         "SVGD iterations (default: gp_stein_default_options)"},
        {"stein-step", GP_BENCH_CLI_DOUBLE, &step, 0, 0,
         "Adam learning rate of SVGD, positive (default: as above)"},
        {"threads", GP_BENCH_CLI_LONG, &threads, 0, 4096, "gp_parallel threads (default: online CPUs)"},
        {"r-list", GP_BENCH_CLI_STRING, &lists[0], 0, 0, "run only these R values of the sweeps"},
        {"d-list", GP_BENCH_CLI_STRING, &lists[1], 0, 0,
         "run only these d values (also filters the spread sweep's d = 2, 8)"},
        {"s-list", GP_BENCH_CLI_STRING, &lists[2], 0, 0, "run only these s values of the spread sweep"},
    };
    size_t n_pos = 0;
    int rc = gp_bench_cli_parse(argc, argv, opts, sizeof opts / sizeof opts[0], "[options]", NULL,
                                0, &n_pos);
    if (rc != 0)
        return rc;
    if (!isnan(step) && !(step > 0.0)) {
        fprintf(stderr, "--stein-step: positive\n");
        return 2;
    }
    o->stein_step = isnan(step) ? 0.0 : step;
    double *list_out[3] = {o->r_list, o->d_list, o->s_list};
    int *list_n[3] = {&o->n_r_list, &o->n_d_list, &o->n_s_list};
    for (int i = 0; i < 3; i++)
        if (lists[i] != NULL && parse_list(lists[i], list_out[i], list_n[i]) != 0) {
            fprintf(stderr, "--%s: a comma list of numbers\n", opts[8 + i].name);
            return 2;
        }
    static const char *const sweep_names[4] = {"r", "d", "matern", "spread"};
    int sweeps[4] = {0, 0, 0, 0};
    if (sweep != NULL && parse_choice(sweep, sweep_names, 4, sweeps, "--sweep") != 0)
        return 2;
    o->do_r = sweeps[0];
    o->do_d = sweeps[1];
    o->do_matern = sweeps[2];
    o->do_spread = sweeps[3];
    int any_sweep = sweeps[0] + sweeps[1] + sweeps[2] + sweeps[3] > 0;
    int use[V_COUNT];
    o->samplers = (1u << V_COUNT) - 1;
    if (samplers != NULL) {
        if (gp_bench_parse_names(samplers, variant_name, V_COUNT, use, "--samplers") != 0)
            return 2;
        o->samplers = 0;
        for (int v = 0; v < V_COUNT; v++)
            o->samplers |= use[v] ? M(v) : 0u;
    }
    o->seeds = (int)seeds;
    o->n = (size_t)n;
    o->stein_iterations = (int)iterations;
    o->threads = (int)threads;
    if (!any_sweep)
        o->do_r = o->do_d = o->do_matern = o->do_spread = 1;
    if (o->seeds < 0)
        o->seeds = o->quick ? 2 : 5;
    return 0;
}

/* ---- data ---- */

/* n x d column-major, U[0, scale]^d, from the stream (base, k). */
static void sample_uniform(uint64_t base, size_t k, size_t n, size_t d, double scale, double *X)
{
    gp_rng rng;
    gp_rng_derive(&rng, base, (uint64_t)k);
    for (size_t i = 0; i < n * d; i++)
        X[i] = scale * gp_rng_uniform(&rng);
}

/* ---- frequency draws, cached ---- */

typedef struct draw {
    gp_kernel_type kernel;
    variant v;
    size_t R, d, k;
    double *omega; /* NULL when the draw failed */
    double seconds;
} draw;

static draw *cache = NULL;
static size_t cache_len = 0, cache_cap = 0;

static void stein_options(const options *o, variant v, gp_stein_options *so)
{
    gp_stein_default_options(so);
    so->bandwidth = v == V_STEIN_PD ? GP_SVGD_BANDWIDTH_PER_DIM : GP_SVGD_BANDWIDTH_TOTAL;
    if (o->stein_iterations > 0)
        so->iterations = o->stein_iterations;
    if (o->stein_step > 0.0)
        so->step = o->stein_step;
}

static const draw *get_draw(const options *o, gp_kernel_type kt, variant v, size_t R, size_t d,
                            size_t k)
{
    for (size_t i = 0; i < cache_len; i++) {
        const draw *c = &cache[i];
        if (c->kernel == kt && c->v == v && c->R == R && c->d == d && c->k == k)
            return c;
    }
    if (cache_len == cache_cap) {
        size_t cap = cache_cap ? 2 * cache_cap : 64;
        draw *nc = realloc(cache, cap * sizeof *nc);
        if (nc == NULL)
            return NULL;
        cache = nc;
        cache_cap = cap;
    }
    draw *c = &cache[cache_len++];
    c->kernel = kt;
    c->v = v;
    c->R = R;
    c->d = d;
    c->k = k;
    c->seconds = 0.0;
    c->omega = malloc(R * d * sizeof(double));
    gp_error err;
    gp_error_clear(&err);
    gp_spectral spec;
    int rc = gp_kernel_spectral(kt, &spec, &err);
    gp_freq_sampler s = v == V_MC    ? GP_FREQ_MC
                        : v == V_QMC ? GP_FREQ_QMC
                        : v == V_ORF ? GP_FREQ_ORF
                                     : GP_FREQ_STEIN;
    gp_stein_options so;
    stein_options(o, v, &so);
    if (c->omega == NULL)
        rc = GP_ENOMEM;
    if (rc == GP_OK) {
        double t0 = gp_bench_seconds();
        rc = gp_frequencies_draw(&spec, s, R, d, FREQ_SEED + (uint64_t)k, &so, NULL, NULL,
                                 c->omega, &err);
        c->seconds = gp_bench_seconds() - t0;
    }
    if (rc != GP_OK) {
        fprintf(stderr, "bench_kernel_approx: %s R=%zu d=%zu seed %zu: %s\n", variant_name[v], R,
                d, k, err.message);
        free(c->omega);
        c->omega = NULL;
    }
    return c;
}

/* ---- exact kernel and Nyström ---- */

/* Lower triangle of the RBF Gram (gamma 1/2) of X (n x d col-major) into K (n x n). */
static void rbf_gram_lower(const double *X, size_t n, size_t d, double *K)
{
    for (size_t j = 0; j < n; j++)
        for (size_t i = j; i < n; i++) {
            double s = 0.0;
            for (size_t c = 0; c < d; c++) {
                double t = X[c * n + i] - X[c * n + j];
                s += t * t;
            }
            K[j * n + i] = exp(-0.5 * s);
        }
}

/* RBF cross kernel A (na x d) vs B (nb x d) into C (na x nb, col-major). */
static void rbf_cross(const double *A, size_t na, const double *B, size_t nb, size_t d,
                      double *C)
{
    for (size_t j = 0; j < nb; j++)
        for (size_t i = 0; i < na; i++) {
            double s = 0.0;
            for (size_t c = 0; c < d; c++) {
                double t = A[c * na + i] - B[c * nb + j];
                s += t * t;
            }
            C[j * na + i] = exp(-0.5 * s);
        }
}

/* Frobenius norm of a symmetric matrix from its lower triangle. */
static double frob_lower(const double *E, size_t n)
{
    double diag = 0.0, off = 0.0;
    for (size_t j = 0; j < n; j++) {
        diag += E[j * n + j] * E[j * n + j];
        for (size_t i = j + 1; i < n; i++)
            off += E[j * n + i] * E[j * n + i];
    }
    return sqrt(diag + 2.0 * off);
}

/* Landmarks of seed index k: the first R points of a random permutation of
 * the separate sample Z (nz x d) into L (R x d). */
static void nystrom_landmarks(size_t k, const double *Z, size_t nz, size_t d, size_t R,
                              size_t *perm, double *L)
{
    gp_rng rng;
    gp_rng_derive(&rng, NYS_PERM_SEED, (uint64_t)k);
    for (size_t i = 0; i < nz; i++)
        perm[i] = i;
    for (size_t i = nz - 1; i > 0; i--) {
        size_t j = (size_t)gp_rng_below(&rng, (uint64_t)(i + 1));
        size_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (size_t c = 0; c < d; c++)
        for (size_t r = 0; r < R; r++)
            L[c * R + r] = Z[c * nz + perm[r]];
}

/* ||K - B B^T||_F / ||K||_F with K the RBF Gram of X and B n x R; E is n x n work. */
static double lowrank_rel_error(const double *X, size_t n, size_t d, const double *B, size_t R,
                                double *E)
{
    rbf_gram_lower(X, n, d, E);
    double nk = frob_lower(E, n);
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (int)n, (int)R, -1.0, B, (int)n, 1.0, E,
                (int)n);
    return frob_lower(E, n) / nk;
}

/* Relative errors of Nyström with R landmarks: rel64 in double precision with
 * the relative eigenvalue cut; rel32 as scikit-learn computes it on float32
 * inputs (kernel values, eigendecomposition and features in single
 * precision, |lambda| clamped below at 1e-12), which is what the paper's
 * pipeline (JAX arrays, float32 by default) fed it. */
static int nystrom_errors(const double *X, size_t n, size_t d, size_t k, size_t R,
                          double *rel64, double *rel32)
{
    size_t nz = N_NYS_SAMPLE;
    int rc = -1;
    double *Z = malloc(nz * d * sizeof(double));
    size_t *perm = malloc(nz * sizeof(size_t));
    double *L = malloc(R * d * sizeof(double));
    double *Kmm = malloc(R * R * sizeof(double));
    double *w = malloc(R * sizeof(double));
    double *Knm = malloc(n * R * sizeof(double));
    double *B = malloc(n * R * sizeof(double));
    double *E = malloc(n * n * sizeof(double));
    float *Kmmf = malloc(R * R * sizeof(float));
    float *wf = malloc(R * sizeof(float));
    float *Knmf = malloc(n * R * sizeof(float));
    float *Bf = malloc(n * R * sizeof(float));
    double *Xr = malloc(n * d * sizeof(double));
    double *Lr = malloc(R * d * sizeof(double));
    float *Uf = malloc(R * R * sizeof(float));
    float *Vtf = malloc(R * R * sizeof(float));
    float *Nf = malloc(R * R * sizeof(float));
    if (!Z || !perm || !L || !Kmm || !w || !Knm || !B || !E || !Kmmf || !wf || !Knmf || !Bf ||
        !Xr || !Lr || !Uf || !Vtf || !Nf || R > nz)
        goto done;
    sample_uniform(NYS_SEED, k, nz, d, 1.0, Z);
    nystrom_landmarks(k, Z, nz, d, R, perm, L);

    /* Double precision, relative cut. */
    rbf_cross(L, R, L, R, d, Kmm);
    if (LAPACKE_dsyevd(LAPACK_COL_MAJOR, 'V', 'L', (lapack_int)R, Kmm, (lapack_int)R, w) != 0)
        goto done;
    double wmax = 0.0;
    for (size_t r = 0; r < R; r++)
        wmax = fmax(wmax, fabs(w[r]));
    rbf_cross(X, n, L, R, d, Knm);
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)R, (int)R, 1.0, Knm,
                (int)n, Kmm, (int)R, 0.0, B, (int)n);
    for (size_t r = 0; r < R; r++) {
        double sc = w[r] > 1e-12 * wmax ? 1.0 / sqrt(w[r]) : 0.0;
        for (size_t i = 0; i < n; i++)
            B[r * n + i] *= sc;
    }
    *rel64 = lowrank_rel_error(X, n, d, B, R, E);

    /* Single precision, scikit-learn's clamp: inputs rounded to float, kernel
     * values rounded to float, ssyevd, features in float. */
    for (size_t i = 0; i < n * d; i++)
        Xr[i] = (double)(float)X[i];
    for (size_t i = 0; i < R * d; i++)
        Lr[i] = (double)(float)L[i];
    rbf_cross(Lr, R, Lr, R, d, Kmm);
    for (size_t i = 0; i < R * R; i++)
        Kmmf[i] = (float)Kmm[i];
    /* As scikit-learn: the SVD K_mm = U S Vh (scipy.linalg.svd, gesdd),
     * normalization N = U diag(max(S, 1e-12)^(-1/2)) Vh formed explicitly in
     * float, then the features K_nm N^T in float. */
    if (LAPACKE_sgesdd(LAPACK_COL_MAJOR, 'S', (lapack_int)R, (lapack_int)R, Kmmf, (lapack_int)R,
                       wf, Uf, (lapack_int)R, Vtf, (lapack_int)R) != 0)
        goto done;
    rbf_cross(Xr, n, Lr, R, d, Knm);
    for (size_t i = 0; i < n * R; i++)
        Knmf[i] = (float)Knm[i];
    for (size_t r = 0; r < R; r++) {
        float sc = (float)(1.0 / sqrt(fmax((double)wf[r], 1e-12)));
        for (size_t i = 0; i < R; i++)
            Uf[r * R + i] *= sc; /* U diag(S^(-1/2)) */
    }
    cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (int)R, (int)R, (int)R, 1.0f, Uf,
                (int)R, Vtf, (int)R, 0.0f, Nf, (int)R);
    /* F = K_nm N^T (n x R), in float. */
    cblas_sgemm(CblasColMajor, CblasNoTrans, CblasTrans, (int)n, (int)R, (int)R, 1.0f, Knmf,
                (int)n, Nf, (int)R, 0.0f, Bf, (int)n);
    for (size_t i = 0; i < n * R; i++)
        B[i] = (double)Bf[i];
    *rel32 = lowrank_rel_error(X, n, d, B, R, E);
    rc = 0;
done:
    free(Z);
    free(perm);
    free(L);
    free(Kmm);
    free(w);
    free(Knm);
    free(B);
    free(E);
    free(Kmmf);
    free(wf);
    free(Knmf);
    free(Bf);
    free(Xr);
    free(Lr);
    free(Uf);
    free(Vtf);
    free(Nf);
    return rc;
}

/* ---- one point of a sweep ---- */

typedef struct point {
    double err[V_COUNT][MAX_SEEDS];
    double spread[MAX_SEEDS];
    int auto_pick[MAX_SEEDS]; /* variant picked by auto (spread sweep) */
    double auto_err[MAX_SEEDS];
} point;

static double mean_of(const double *v, int n)
{
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += v[i];
    return s / n;
}

static variant variant_of_sampler(gp_freq_sampler s)
{
    switch (s) {
    case GP_FREQ_MC:
        return V_MC;
    case GP_FREQ_QMC:
        return V_QMC;
    case GP_FREQ_ORF:
        return V_ORF;
    default:
        return V_STEIN;
    }
}

/* Errors of every variant in mask (restricted to --samplers) at (kernel, d,
 * R), X ~ U[0, scale]^d; with do_auto also the pick of gp_freq_sampler_auto. */
static void eval_point(const options *o, gp_kernel_type kt, size_t d, size_t R, double scale,
                       unsigned mask, int do_auto, point *p)
{
    size_t n = o->n;
    double *X = malloc(n * d * sizeof(double));
    if (X == NULL) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    mask &= o->samplers;
    for (int v = 0; v < V_COUNT; v++)
        for (int k = 0; k < MAX_SEEDS; k++)
            p->err[v][k] = NAN;
    for (int k = 0; k < o->seeds; k++) {
        sample_uniform(X_SEED, (size_t)k, n, d, scale, X);
        p->spread[k] = gp_features_spread(X, n, d, NULL);
        for (int v = 0; v < V_COUNT; v++) {
            if (!(mask & M(v)))
                continue;
            if (FEATURE_MASK & M(v)) {
                const draw *dr = get_draw(o, kt, (variant)v, R, d, (size_t)k);
                if (dr == NULL || dr->omega == NULL)
                    continue;
                gp_error err;
                gp_error_clear(&err);
                double rel = NAN;
                if (gp_features_kernel_error(kt, X, n, d, dr->omega, R, &rel, &err) != GP_OK)
                    fprintf(stderr, "bench_kernel_approx: error of %s: %s\n", variant_name[v],
                            err.message);
                p->err[v][k] = rel;
            } else if (v == V_NYS) {
                double a = NAN, b = NAN;
                if (nystrom_errors(X, n, d, (size_t)k, R, &a, &b) != 0)
                    fprintf(stderr, "bench_kernel_approx: Nyström failed (R=%zu d=%zu)\n", R, d);
                p->err[V_NYS][k] = a;
                p->err[V_NYS32][k] = b;
            }
        }
        if (do_auto) {
            variant pick = variant_of_sampler(gp_freq_sampler_auto(NULL, p->spread[k], d));
            p->auto_pick[k] = (int)pick;
            p->auto_err[k] = p->err[pick][k];
            if (isnan(p->auto_err[k])) { /* not measured in this run: measure it */
                const draw *dr = get_draw(o, kt, pick, R, d, (size_t)k);
                if (dr != NULL && dr->omega != NULL)
                    gp_features_kernel_error(kt, X, n, d, dr->omega, R, &p->auto_err[k], NULL);
            }
        }
    }
    free(X);
}

static double cell_mean(const options *o, const point *p, variant v)
{
    return mean_of(p->err[v], o->seeds);
}

static void print_cell(double ours, double paper)
{
    if (isnan(ours))
        printf(" – ");
    else
        printf(" %.2e", ours);
    if (paper > 0.0)
        printf(" (%.1e)", paper);
    printf(" |");
}

/* ---- paper numbers (docs/methods/stein-random-features.md §3.3: mean of the 5 runs of the CSVs) ---- */

static const size_t r_values[] = {10, 50, 100, 200, 300, 500, 750, 1000};
#define N_R (sizeof r_values / sizeof r_values[0])
/* MC, QMC, ORF, NYS, SVGD(msrf) */
static const double paper_r[N_R][5] = {
    {5.6e-2, 2.7e-2, 9.4e-2, 4.7e-4, 5.6e-3}, {3.6e-2, 8.4e-3, 2.9e-2, 9.5e-5, 7.8e-4},
    {2.0e-2, 3.9e-3, 2.4e-2, 1.3e-4, 2.6e-4}, {1.4e-2, 1.8e-3, 7.6e-3, 9.7e-5, 8.3e-5},
    {1.3e-2, 1.1e-3, 5.8e-3, 1.6e-4, 6.1e-5}, {1.2e-2, 1.1e-3, 5.6e-3, 1.1e-4, 2.8e-5},
    {8.0e-3, 5.8e-4, 5.0e-3, 9.6e-5, 1.7e-5}, {5.4e-3, 5.2e-4, 6.0e-3, 7.0e-5, 1.5e-5}};
static const double paper_d[4][6] = {/* d, MC, QMC, ORF, NYS, SVGD */
                                     {2, 1.4e-2, 1.8e-3, 9.2e-3, 9.7e-5, 8.3e-5},
                                     {10, 8.2e-2, 4.4e-2, 4.1e-2, 6.3e-3, 1.3e-2},
                                     {20, 2.1e-1, 1.9e-1, 1.6e-1, 9.0e-2, 1.4e-1},
                                     {30, 4.5e-1, 4.3e-1, 4.0e-1, 2.6e-1, 4.1e-1}};

/* Paper column of a variant (-1: none). */
static int paper_col(variant v)
{
    switch (v) {
    case V_MC:
        return 0;
    case V_QMC:
        return 1;
    case V_ORF:
        return 2;
    case V_NYS:
    case V_NYS32:
        return 3;
    case V_STEIN:
    case V_STEIN_PD:
        return 4;
    default:
        return -1;
    }
}

static void print_header(const char *first, unsigned mask, const char *extra)
{
    printf("| %s |", first);
    for (int v = 0; v < V_COUNT; v++)
        if (mask & M(v))
            printf(" %s |", variant_label[v]);
    printf("%s\n|---:|", extra ? extra : "");
    for (int v = 0; v < V_COUNT; v++)
        if (mask & M(v))
            printf("---:|");
    if (extra)
        for (const char *c = extra; *c; c++)
            if (*c == '|')
                printf("---|");
    printf("\n");
}

/* ---- targets, filled by the sweeps and printed at the end ---- */

typedef struct targets {
    int have_r;
    double r_stein[N_R], r_stein_pd[N_R], r_qmc[N_R], r_nys[N_R];
    int have_r_at[N_R];
    int have_d10, have_d20;
    double d10, d20, d10_pd, d20_pd;
    int spread_points, spread_ok;
    double spread_worst;
} targets;

static targets tg;

static void run_r_sweep(const options *o)
{
    unsigned mask = (FEATURE_MASK | M(V_NYS) | M(V_NYS32)) & o->samplers;
    printf("## R sweep: RBF, d = 2, N = %zu, mean of %d seeds (paper's number in "
           "parentheses; Stein vs the paper's SVGD, NYS vs the paper's NYS)\n\n",
           o->n, o->seeds);
    print_header("R", mask, NULL);
    fflush(stdout);
    tg.have_r = 1;
    for (size_t i = 0; i < N_R; i++) {
        size_t R = r_values[i];
        if ((o->quick && R != 50 && R != 200) || !in_list(o->r_list, o->n_r_list, (double)R))
            continue;
        double t0 = gp_bench_seconds();
        point *p = calloc(1, sizeof *p);
        eval_point(o, GP_KERNEL_RBF, 2, R, 1.0, mask, 0, p);
        printf("| %zu |", R);
        for (int v = 0; v < V_COUNT; v++) {
            if (!(mask & M(v)))
                continue;
            int pc = paper_col((variant)v);
            print_cell(cell_mean(o, p, (variant)v), pc >= 0 ? paper_r[i][pc] : 0.0);
        }
        printf("\n");
        fflush(stdout);
        tg.have_r_at[i] = 1;
        tg.r_stein[i] = cell_mean(o, p, V_STEIN);
        tg.r_stein_pd[i] = cell_mean(o, p, V_STEIN_PD);
        tg.r_qmc[i] = cell_mean(o, p, V_QMC);
        tg.r_nys[i] = cell_mean(o, p, V_NYS);
        free(p);
        fprintf(stderr, "r sweep: R=%zu done in %.1f s\n", R, gp_bench_seconds() - t0);
    }
    printf("\n");
}

static void run_d_sweep(const options *o)
{
    unsigned mask = (FEATURE_MASK | M(V_NYS) | M(V_NYS32)) & o->samplers;
    size_t R = 200;
    printf("## d sweep: RBF, R = %zu, N = %zu, mean of %d seeds (paper's number in "
           "parentheses at d = 2, 10, 20, 30)\n\n",
           R, o->n, o->seeds);
    print_header("d", mask, NULL);
    fflush(stdout);
    for (size_t d = 2; d <= 30; d += 2) {
        if ((o->quick && d != 2 && d != 10) || !in_list(o->d_list, o->n_d_list, (double)d))
            continue;
        double t0 = gp_bench_seconds();
        point *p = calloc(1, sizeof *p);
        eval_point(o, GP_KERNEL_RBF, d, R, 1.0, mask, 0, p);
        int row = -1;
        for (int j = 0; j < 4; j++)
            if ((size_t)paper_d[j][0] == d)
                row = j;
        printf("| %zu |", d);
        for (int v = 0; v < V_COUNT; v++) {
            if (!(mask & M(v)))
                continue;
            int pc = paper_col((variant)v);
            print_cell(cell_mean(o, p, (variant)v),
                       pc >= 0 && row >= 0 ? paper_d[row][pc + 1] : 0.0);
        }
        printf("\n");
        fflush(stdout);
        if (d == 10) {
            tg.have_d10 = 1;
            tg.d10 = cell_mean(o, p, V_STEIN);
            tg.d10_pd = cell_mean(o, p, V_STEIN_PD);
        } else if (d == 20) {
            tg.have_d20 = 1;
            tg.d20 = cell_mean(o, p, V_STEIN);
            tg.d20_pd = cell_mean(o, p, V_STEIN_PD);
        }
        free(p);
        fprintf(stderr, "d sweep: d=%zu done in %.1f s\n", d, gp_bench_seconds() - t0);
    }
    printf("\n");
}

/* One row of the Matérn-3/2 tables: the point (d, R) evaluated and printed
 * under its label `value` (the swept one, named `what` in the progress note). */
static void matern_row(const options *o, size_t d, size_t R, unsigned mask, const char *what,
                       size_t value)
{
    double t0 = gp_bench_seconds();
    point *p = calloc(1, sizeof *p);
    eval_point(o, GP_KERNEL_MATERN32, d, R, 1.0, mask, 0, p);
    printf("| %zu |", value);
    for (int v = 0; v < V_COUNT; v++)
        if (mask & M(v))
            print_cell(cell_mean(o, p, (variant)v), 0.0);
    printf("\n");
    fflush(stdout);
    free(p);
    fprintf(stderr, "matern: %s=%zu done in %.1f s\n", what, value, gp_bench_seconds() - t0);
}

static void run_matern(const options *o)
{
    unsigned mask = (M(V_MC) | M(V_QMC) | M(V_ORF) | M(V_STEIN) | M(V_STEIN_PD)) & o->samplers;
    printf("## Matérn-3/2 (spectral density: multivariate Student-t, nu = 1.5; not in the "
           "paper): R sweep at d = 2, N = %zu, mean of %d seeds\n\n",
           o->n, o->seeds);
    print_header("R", mask, NULL);
    fflush(stdout);
    for (size_t i = 0; i < N_R; i++) {
        size_t R = r_values[i];
        if ((o->quick && R != 200) || !in_list(o->r_list, o->n_r_list, (double)R))
            continue;
        matern_row(o, 2, R, mask, "R", R);
    }
    printf("\n## Matérn-3/2: d sweep at R = 200, N = %zu, mean of %d seeds\n\n", o->n,
           o->seeds);
    print_header("d", mask, NULL);
    static const size_t ds[] = {2, 4, 8, 16};
    for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++) {
        size_t d = ds[i];
        if ((o->quick && d != 8) || !in_list(o->d_list, o->n_d_list, (double)d))
            continue;
        matern_row(o, d, 200, mask, "d", d);
    }
    printf("\n");
}

static void run_spread(const options *o)
{
    static const double s_values[] = {0.5, 1, 1.5, 2, 2.5, 3, 4, 5, 7, 10, 14, 20};
    static const size_t d_values[] = {2, 8};
    unsigned mask = (M(V_MC) | M(V_QMC) | M(V_ORF) | M(V_STEIN)) & o->samplers;
    size_t R = 200;
    for (size_t di = 0; di < sizeof d_values / sizeof d_values[0]; di++) {
        size_t d = d_values[di];
        if (!in_list(o->d_list, o->n_d_list, (double)d))
            continue;
        printf("## Spread sweep: RBF, d = %zu, R = %zu, X ~ U[0, s]^d, N = %zu, mean of %d "
               "seeds; auto = gp_freq_sampler_auto(gp_features_spread(X), d)\n\n",
               d, R, o->n, o->seeds);
        print_header("s", mask, " spread | auto (picks) | best | auto / best |");
        fflush(stdout);
        for (size_t si = 0; si < sizeof s_values / sizeof s_values[0]; si++) {
            double s = s_values[si];
            if ((o->quick && s != 1 && s != 5 && s != 20) ||
                !in_list(o->s_list, o->n_s_list, s))
                continue;
            double t0 = gp_bench_seconds();
            point *p = calloc(1, sizeof *p);
            eval_point(o, GP_KERNEL_RBF, d, R, s, mask, 1, p);
            printf("| %g |", s);
            double best = INFINITY;
            int best_v = -1;
            for (int v = 0; v < V_COUNT; v++) {
                if (!(mask & M(v)))
                    continue;
                double m = cell_mean(o, p, (variant)v);
                print_cell(m, 0.0);
                if (m < best) {
                    best = m;
                    best_v = v;
                }
            }
            double am = mean_of(p->auto_err, o->seeds);
            int counts[V_COUNT] = {0};
            for (int k = 0; k < o->seeds; k++)
                counts[p->auto_pick[k]]++;
            printf(" %.3f | %.2e (", mean_of(p->spread, o->seeds), am);
            int first = 1;
            for (int v = 0; v < V_COUNT; v++)
                if (counts[v]) {
                    printf("%s%s", first ? "" : ", ", variant_name[v]);
                    if (counts[v] != o->seeds)
                        printf(" ×%d", counts[v]);
                    first = 0;
                }
            double ratio = am / best;
            printf(") | %s | %.3f |\n", best_v >= 0 ? variant_name[best_v] : "–", ratio);
            fflush(stdout);
            tg.spread_points++;
            if (ratio <= 1.10)
                tg.spread_ok++;
            if (!(ratio <= tg.spread_worst))
                tg.spread_worst = ratio;
            free(p);
            fprintf(stderr, "spread: d=%zu s=%g done in %.1f s\n", d, s, gp_bench_seconds() - t0);
        }
        printf("\n");
    }
}

static void print_timings(void)
{
    printf("## Seconds per Stein draw (gp_frequencies_draw, mean over the seeds)\n\n");
    printf("| kernel | bandwidth | d | R | draws | s per draw |\n|---|---|---:|---:|---:|---:|\n");
    /* Group the cache by (kernel, variant, d, R) in order of first appearance. */
    for (size_t i = 0; i < cache_len; i++) {
        const draw *c = &cache[i];
        if (c->v != V_STEIN && c->v != V_STEIN_PD)
            continue;
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = cache[j].kernel == c->kernel && cache[j].v == c->v && cache[j].d == c->d &&
                   cache[j].R == c->R;
        if (seen)
            continue;
        double sum = 0.0;
        int cnt = 0;
        for (size_t j = i; j < cache_len; j++)
            if (cache[j].kernel == c->kernel && cache[j].v == c->v && cache[j].d == c->d &&
                cache[j].R == c->R && cache[j].omega != NULL) {
                sum += cache[j].seconds;
                cnt++;
            }
        printf("| %s | %s | %zu | %zu | %d | %.3f |\n", gp_kernel_type_name(c->kernel),
               c->v == V_STEIN ? "total" : "per_dim", c->d, c->R, cnt, cnt ? sum / cnt : NAN);
    }
    printf("\n");
}

static const char *yes_no(int ok)
{
    return ok ? "**met**" : "**NOT met**";
}

static void print_targets(const options *o)
{
    printf("## Targets\n\n");
    if (tg.have_r) {
        for (size_t i = 0; i < N_R; i++) {
            if (!tg.have_r_at[i])
                continue;
            size_t R = r_values[i];
            if (R == 200 || R == 1000)
                printf("- Stein (total) at d = 2, R = %zu: %.2e vs the paper's SVGD %.1e: %s "
                       "(per_dim: %.2e)\n",
                       R, tg.r_stein[i], paper_r[i][4], yes_no(tg.r_stein[i] <= paper_r[i][4]),
                       tg.r_stein_pd[i]);
        }
        for (size_t i = 0; i < N_R; i++) {
            if (!tg.have_r_at[i] || r_values[i] < 200)
                continue;
            double ratio = tg.r_qmc[i] / tg.r_stein[i];
            printf("- d = 2, R = %zu: QMC / Stein = %.1f (target ≥ 10): %s\n", r_values[i],
                   ratio, yes_no(ratio >= 10.0));
        }
        for (size_t i = 0; i < N_R; i++) {
            if (!tg.have_r_at[i] || r_values[i] < 300)
                continue;
            printf("- d = 2, R = %zu: Stein %.2e vs Nyström %.2e (target: below): %s\n",
                   r_values[i], tg.r_stein[i], tg.r_nys[i], yes_no(tg.r_stein[i] < tg.r_nys[i]));
        }
    }
    if (tg.have_d10)
        printf("- d = 10, R = 200: Stein (total) %.2e vs the paper's 1.3e-2: %s (per_dim %.2e)\n",
               tg.d10, yes_no(tg.d10 <= 1.3e-2), tg.d10_pd);
    if (tg.have_d20)
        printf("- d = 20, R = 200: Stein (total) %.2e vs the paper's 1.4e-1: %s (per_dim %.2e)\n",
               tg.d20, yes_no(tg.d20 <= 1.4e-1), tg.d20_pd);
    if (tg.spread_points)
        printf("- auto within 10%% of the best sampler: %d of %d spread points (worst ratio "
               "%.3f): %s\n",
               tg.spread_ok, tg.spread_points, tg.spread_worst,
               yes_no(tg.spread_ok == tg.spread_points));
    (void)o;
    printf("\n");
}

int main(int argc, char **argv)
{
    options o;
    int rc = parse_args(argc, argv, &o);
    if (rc != 0)
        return rc == 1 ? 0 : 2;
    if (o.threads > 0)
        gp_parallel_set_threads(o.threads);
    gp_stein_options so;
    stein_options(&o, V_STEIN, &so);
    printf("# bench_kernel_approx\n\n");
    printf("Kernel approximation (docs/methods/stein-random-features.md §3.3 protocol): N = %zu, X ~ U[0,1]^d, unit "
           "lengthscale, relative Frobenius error, mean of %d seeds%s. Stein: %d SVGD "
           "iterations, Adam step %g, anneal power %g, %d cycles, weight decay %g, init %s; "
           "gp_parallel threads %d.\n\n",
           o.n, o.seeds, o.quick ? " (--quick subset)" : "", so.iterations, so.step,
           so.anneal_power, so.anneal_cycles, so.weight_decay,
           gp_freq_sampler_name(so.init) ? gp_freq_sampler_name(so.init) : "?",
           gp_parallel_threads());
    fflush(stdout);
    tg.spread_worst = 0.0;
    double t0 = gp_bench_seconds();
    if (o.do_r)
        run_r_sweep(&o);
    if (o.do_d)
        run_d_sweep(&o);
    if (o.do_matern)
        run_matern(&o);
    if (o.do_spread)
        run_spread(&o);
    print_timings();
    print_targets(&o);
    printf("Total time %.0f s.\n", gp_bench_seconds() - t0);
    for (size_t i = 0; i < cache_len; i++)
        free(cache[i].omega);
    free(cache);
    return 0;
}
