/* The random-feature GP that learns online: see core/methods/rfgp.h and
 * docs/methods/kernel-jit-online.md ("As implemented in gpserve").
 *
 * Units: point inputs and every output are standardised with statistics of
 * the warm-up buffer (fixed from then on, so an update never rescales the
 * model); distributional inputs are taken as given. The kernel (widths, s0)
 * and the noise s are in working units; predictions go back per output. */
#include "core/methods/rfgp.h"

#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/parallel.h"
#include "core/base/rng.h"
#include "core/features/embed.h"
#include "core/linalg/linalg.h"
#include "core/model/method.h"
#include "core/optim/driver.h"

#define LOG_2PI 1.8378770664093453
/* KJIT's noise (§4: sigma_y^2 = 1e-4), working units, when the request gives none */
#define DEFAULT_NOISE 1e-4
/* rows the width heuristics look at (§4: a subsample of at most 1500) */
#define HEURISTIC_ROWS 1500
/* streams of the fit's seed */
#define STREAM_INNER 1 /* points: the one stage; else W_in, b_in */
#define STREAM_OUTER 2
#define STREAM_SUBSAMPLE 3
#define STREAM_SAMPLE_NOISE 4
/* The crossover of `refactor_batch` "auto", as a fraction of D: measured at
 * D = 800 (bench/bench_rfgp.c), k rank-one updates cost as much as one
 * re-factorisation at k = 240-320, not the note's D / 10 (§7): the
 * re-factorisation rebuilds P = L L^T, a D^3 product, before its dpotrf
 * (docs/methods/kernel-jit-online.md, "As implemented"). */
#define AUTO_CROSSOVER_PER_D (1.0 / 3.0)

enum { SEL_MEDIAN = 0, SEL_LOOCV, SEL_ML, SEL_FIXED };
static const char *const selection_names[] = {"median", "loocv", "ml", "fixed"};

static const gp_kernel_type rfgp_kernels[] = {GP_KERNEL_RBF};

static const gp_option_spec rfgp_options[] = {
    {"input", GP_OPTION_OBJECT, 0, NULL, 0, 0, gp_input_spec_schema,
     "what one input is: absent, points of the data's columns; {\"kind\": \"point\", \"dim\": "
     "d}; {\"kind\": \"gaussian\", \"dim\": d, \"covariance\": \"diag\"|\"full\"} (rows: mean, "
     "then variances or the covariance); {\"kind\": \"samples\", \"dim\": d, \"samples\": S}; "
     "{\"kind\": \"messages\", \"messages\": [\"normal\", \"beta\", \"gamma\"...]} (each "
     "moment-matched to a Gaussian, docs/methods/kernel-jit-online.md §6). A model created "
     "without rows takes its dimension from here"},
    {"outputs", GP_OPTION_INT, 1, NULL, 1, 1000, NULL,
     "p, the outputs (columns of y): a model created without rows takes it from here; with "
     "rows it must match them"},
    {"features", GP_OPTION_INT, 800, NULL, 1, 16384, NULL,
     "D, the random features the regression sees (KJIT: 800); the factor of the D x D "
     "precision is the model's memory and an update's cost, O(D^2)"},
    {"inner_features", GP_OPTION_INT, 400, NULL, 1, 16384, NULL,
     "D_in, the inner (embedding) features of distributional inputs (KJIT: 400)"},
    {"warmup", GP_OPTION_INT, 300, NULL, 0, 1000000, NULL,
     "n0, the rows buffered before the widths are chosen and the model can predict (KJIT: "
     "300); 0 only with width_selection fixed"},
    {"width_selection", GP_OPTION_ENUM, 0, "median", 0, 0, "median|loocv|ml|fixed",
     "how the widths are chosen at the end of the warm-up: median heuristics (§4: inner "
     "widths^2 = the average input variance per dimension, the median distance for points; "
     "outer gamma^2 = median_factor x the median squared distance of the embeddings), "
     "closed-form leave-one-out over median factors x noise ratios, type-II marginal "
     "likelihood (L-BFGS, analytic gradients), or fixed: the kernel's lengthscales and "
     "outer_width as given"},
    {"median_factor", GP_OPTION_NUMBER, 0.5, NULL, 1e-6, 1e6, NULL,
     "medf: the outer width gamma^2 is medf times the median squared distance between "
     "embeddings (KJIT: 0.5)"},
    {"outer_width", GP_OPTION_NUMBER, 0, NULL, 0, 1e150, NULL,
     "gamma, the width of the outer Gaussian kernel on embeddings, for width_selection fixed "
     "with distributional inputs (required there; 0: not given)"},
    {"forgetting", GP_OPTION_NUMBER, 1, NULL, 1e-6, 1, NULL,
     "lambda in (0, 1]: every row first scales the precision and b by lambda (P <- lambda P + "
     "psi psi^T / s), so old rows fade; 1 never forgets (KJIT)"},
    {"refactor_batch", GP_OPTION_NUMBER, 0, NULL, 0, 1e9, "auto",
     "rows per update from which a batch re-factorises the precision (dsyrk + Cholesky, "
     "O(D^2 k + D^3)) instead of k rank-one updates (O(k D^2)); 0 or \"auto\": the crossover "
     "measured on the reference machine, D / 3"},
    {"gate_threshold", GP_OPTION_NUMBER, 0, "relative", -1e300, 1e300, "relative",
     "tau, the gate: a prediction asks for the true answer where log var_y >= tau for some "
     "output (original units; §2). A number is an absolute tau; \"relative\" (the default) "
     "sets tau_j = log(noise_j) + log(1 + gate_kappa) per output"},
    {"gate_kappa", GP_OPTION_NUMBER, 1, NULL, 1e-9, 1e300, NULL,
     "kappa of the relative gate: ask where the latent variance reaches kappa times the "
     "noise (§8.13: 1 matches KJIT's hand-set -8.5 at noise 1e-4)"},
    {"max_iterations", GP_OPTION_INT, 100, NULL, 0, 100000, NULL,
     "L-BFGS iterations of width_selection ml"},
    {"tolerance", GP_OPTION_NUMBER, 1e-9, NULL, 1e-16, 1, NULL,
     "ml: stop when the relative change of the marginal likelihood falls below this"},
};

#define N_OPTIONS (sizeof rfgp_options / sizeof rfgp_options[0])

/* ---- configuration: fixed when the model is created, exported ---- */

typedef struct rfgp_cfg {
    size_t D, d_in, p, warmup, dk, width;
    int two_stage, selection, gate_absolute, noise_learn;
    double median_factor, outer_width, forgetting, refactor_batch, gate_tau, kappa;
    int max_iterations;
    double tolerance;
    uint64_t seed;
} rfgp_cfg;

#define CFG_LEN 20

static void cfg_encode(const rfgp_cfg *c, double *v)
{
    /* the seed as two 32-bit halves: a double holds 53 bits */
    double vals[CFG_LEN] = {(double)c->D, (double)c->d_in, (double)c->p, (double)c->warmup,
                            (double)c->dk, (double)c->width, c->two_stage, c->selection,
                            c->gate_absolute, c->noise_learn, c->median_factor, c->outer_width,
                            c->forgetting, c->refactor_batch, c->gate_tau, c->kappa,
                            c->max_iterations, c->tolerance, (double)(c->seed >> 32),
                            (double)(c->seed & 0xffffffffu)};
    memcpy(v, vals, sizeof vals);
}

static int is_count(double v, double below)
{
    return isfinite(v) && v >= 0.0 && v == floor(v) && v < below;
}

static int cfg_decode(const double *v, rfgp_cfg *c, gp_error *err)
{
    for (int i = 0; i < 10; i++)
        if (!is_count(v[i], 1e9))
            return gp_error_set(err, GP_EDATA, "rfgp_config", "corrupt configuration");
    if (!is_count(v[16], 1e9) || !is_count(v[18], 4294967296.0) ||
        !is_count(v[19], 4294967296.0) || !(v[12] > 0.0 && v[12] <= 1.0) || v[0] < 1 ||
        v[2] < 1 || v[4] < 1 || v[7] > SEL_FIXED)
        return gp_error_set(err, GP_EDATA, "rfgp_config", "corrupt configuration");
    *c = (rfgp_cfg){.D = (size_t)v[0], .d_in = (size_t)v[1], .p = (size_t)v[2],
                    .warmup = (size_t)v[3], .dk = (size_t)v[4], .width = (size_t)v[5],
                    .two_stage = v[6] != 0.0, .selection = (int)v[7],
                    .gate_absolute = v[8] != 0.0, .noise_learn = v[9] != 0.0,
                    .median_factor = v[10], .outer_width = v[11], .forgetting = v[12],
                    .refactor_batch = v[13], .gate_tau = v[14], .kappa = v[15],
                    .max_iterations = (int)v[16], .tolerance = v[17],
                    .seed = ((uint64_t)v[18] << 32) | (uint64_t)v[19]};
    return GP_OK;
}

/* ---- the model's state ---- */

/* The posterior: the packed factor of P, z = L^{-1} b, and b. */
typedef struct post {
    double *L; /* D(D+1)/2, packed lower (column j: its D - j entries from the diagonal) */
    double *z; /* D x p */
    double *b; /* D x p */
    double n;  /* rows absorbed */
    double refactorisations, rank_one;
} post;

/* The feature map and the standardisation fixed at the end of the warm-up. */
typedef struct fmap {
    double *w_in, *b_in;   /* dk x d_in, d_in (two stages) */
    double *w_out, *b_out; /* (d_in or dk) x D, D */
    double *widths;        /* dk, working units */
    double gamma;          /* outer width (two stages) */
    double *x_mean, *x_scale; /* dk (points) */
    double *y_mean, *y_scale; /* p */
} fmap;

typedef struct rfgp_impl {
    rfgp_cfg c;
    int online;
    size_t n_buf;
    double *buf_x; /* warmup x width, leading dimension warmup (original units) */
    double *buf_y; /* warmup x p */
    fmap map;
    post post;
    double *threshold; /* p, original units */
    int always_asks;
} rfgp_impl;

static void post_free(post *q)
{
    free(q->L);
    free(q->z);
    free(q->b);
    memset(q, 0, sizeof *q);
}

static void map_free(fmap *m)
{
    free(m->w_in);
    free(m->b_in);
    free(m->w_out);
    free(m->b_out);
    free(m->widths);
    free(m->x_mean);
    free(m->x_scale);
    free(m->y_mean);
    free(m->y_scale);
    memset(m, 0, sizeof *m);
}

static void impl_free(void *p)
{
    rfgp_impl *im = p;
    if (im == NULL)
        return;
    free(im->buf_x);
    free(im->buf_y);
    map_free(&im->map);
    post_free(&im->post);
    free(im->threshold);
    free(im);
}

static size_t packed_len(size_t D)
{
    return D * (D + 1) / 2;
}

static int post_alloc(const rfgp_cfg *c, post *q, gp_error *err)
{
    memset(q, 0, sizeof *q);
    q->L = gp_alloc_doubles(packed_len(c->D), err);
    q->z = gp_alloc_doubles(c->D * c->p, err);
    q->b = gp_alloc_doubles(c->D * c->p, err);
    if (!q->L || !q->z || !q->b) {
        post_free(q);
        return GP_ENOMEM;
    }
    return GP_OK;
}

/* The prior: P = I / s0, so L = I / sqrt(s0), b = z = 0. */
static void post_prior(const rfgp_cfg *c, post *q, double s0)
{
    size_t D = c->D;
    memset(q->L, 0, packed_len(D) * sizeof *q->L);
    double *col = q->L;
    for (size_t j = 0; j < D; col += D - j, j++)
        col[0] = 1.0 / sqrt(s0);
    memset(q->z, 0, D * c->p * sizeof *q->z);
    memset(q->b, 0, D * c->p * sizeof *q->b);
    q->n = q->refactorisations = q->rank_one = 0.0;
}

static int map_alloc(const rfgp_cfg *c, fmap *m, gp_error *err)
{
    memset(m, 0, sizeof *m);
    size_t m_in = c->two_stage ? c->d_in : c->dk;
    int ok = (m->w_out = gp_alloc_doubles(m_in * c->D, err)) &&
             (m->b_out = gp_alloc_doubles(c->D, err)) &&
             (m->widths = gp_alloc_doubles(c->dk, err)) &&
             (m->x_mean = gp_alloc_doubles(c->dk, err)) &&
             (m->x_scale = gp_alloc_doubles(c->dk, err)) &&
             (m->y_mean = gp_alloc_doubles(c->p, err)) &&
             (m->y_scale = gp_alloc_doubles(c->p, err));
    if (ok && c->two_stage)
        ok = (m->w_in = gp_alloc_doubles(c->dk * c->d_in, err)) &&
             (m->b_in = gp_alloc_doubles(c->d_in, err));
    if (!ok) {
        map_free(m);
        return GP_ENOMEM;
    }
    return GP_OK;
}

static void embed_of(const rfgp_cfg *c, const gp_input_spec *in, const fmap *m, gp_embed *e)
{
    memset(e, 0, sizeof *e);
    e->input = *in;
    e->dk = c->dk;
    e->d_in = c->two_stage ? c->d_in : 0;
    e->d_out = c->D;
    e->w_in = m->w_in;
    e->b_in = m->b_in;
    e->w_out = m->w_out;
    e->b_out = m->b_out;
    if (!c->two_stage) {
        e->x_mean = m->x_mean;
        e->x_scale = m->x_scale;
    }
}

/* ---- the recursive-least-squares QR update ---- */

/* (col, x) <- (c1 col + s1 x, c2 x - s2 col) over m entries: a Givens rotation
 * with the forgetting factor folded into the factor's side (c1 = c sqrt(l),
 * s2 = s sqrt(l)), so forgetting costs no extra pass over L. Memory-bound on
 * the factor, as core/linalg's rotation: the same wide-vector clones. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "avx2", "default"), optimize("O3")))
#endif
static void rotate4(double *restrict col, double *restrict x, size_t m, double c1, double s1,
                    double c2, double s2)
{
    for (size_t i = 0; i < m; i++) {
        double l = col[i], xi = x[i];
        col[i] = c1 * l + s1 * xi;
        x[i] = c2 * xi - s2 * l;
    }
}

/* One row (x, t) = (psi / sd, y / sd) into [sqrt(l) L | sqrt(l) z]: on return
 * L L^T = l L L^T + x x^T and z = L^{-1} (l b + x t^T), with x and t
 * overwritten (t holds the whitened residual). */
static void qr_row(double *L, size_t D, double *x, double *z, size_t p, double *t, double rl)
{
    double *col = L;
    for (size_t j = 0; j < D; col += D - j, j++) {
        double a = rl * col[0], bb = x[j];
        if (bb == 0.0) { /* the identity rotation: only the forgetting's scaling */
            for (size_t i = 0; rl != 1.0 && i < D - j; i++)
                col[i] *= rl;
            for (size_t q = 0; rl != 1.0 && q < p; q++)
                z[q * D + j] *= rl;
            continue;
        }
        double r = sqrt(a * a + bb * bb);
        if (!(r < INFINITY) || r < 1e-150)
            r = hypot(a, bb);
        if (!(r > 0.0))
            continue;
        double c = a / r, s = bb / r;
        col[0] = r;
        x[j] = 0.0;
        rotate4(col + 1, x + j + 1, D - j - 1, c * rl, s, c, s * rl);
        for (size_t q = 0; q < p; q++) {
            double zq = rl * z[q * D + j], tq = t[q];
            z[q * D + j] = c * zq + s * tq;
            t[q] = c * tq - s * zq;
        }
    }
}

/* Rows of a batch from which the precision is re-factorised. */
static size_t crossover(const rfgp_cfg *c)
{
    double k = c->refactor_batch > 0 ? c->refactor_batch : ceil(AUTO_CROSSOVER_PER_D * (double)c->D);
    return k < 1 ? 1 : (size_t)k;
}

/* k rank-one updates in place (cannot fail): Psi (D x k) the features, Yw
 * (k x p, leading dimension ldy) the working targets; x (D) and t (p) scratch. */
static void apply_rank_one(const rfgp_cfg *c, post *q, double noise, const double *Psi,
                           const double *Yw, size_t ldy, size_t k, double *x, double *t)
{
    size_t D = c->D, p = c->p;
    double sd = sqrt(noise), lam = c->forgetting, rl = sqrt(lam);
    for (size_t i = 0; i < k; i++) {
        const double *psi = Psi + i * D;
        for (size_t j = 0; j < D; j++)
            x[j] = psi[j] / sd;
        for (size_t o = 0; o < p; o++)
            t[o] = Yw[o * ldy + i] / sd;
        qr_row(q->L, D, x, q->z, p, t, rl);
        for (size_t o = 0; o < p; o++) {
            double yo = Yw[o * ldy + i] / noise, *bo = q->b + o * D;
            for (size_t j = 0; j < D; j++)
                bo[j] = lam * bo[j] + psi[j] * yo;
        }
    }
    q->n += (double)k;
    q->rank_one += (double)k;
}

/* The batch route into a new posterior out (allocated here): P = l^k L L^T +
 * sum_i l^(k-1-i) psi_i psi_i^T / s (the rows' weights as k rank-one updates
 * with forgetting give them), factorised by the jitter policy's blocked
 * Cholesky; b likewise, z = L^{-1} b. */
static int apply_refactor(const rfgp_cfg *c, const post *q, double noise, double s0,
                          const double *Psi, const double *Yw, size_t ldy, size_t k, post *out,
                          double *jitter, gp_error *err)
{
    size_t D = c->D, p = c->p;
    double lam = c->forgetting, lk = pow(lam, (double)k);
    memset(out, 0, sizeof *out);
    double *P = gp_alloc_doubles(D * D, err), *W = gp_alloc_doubles(D * k, err),
           *Yk = gp_alloc_doubles(k * p, err);
    int rc = P && W && Yk ? post_alloc(c, out, err) : GP_ENOMEM;
    if (rc == GP_OK) {
        for (size_t i = 0; i < k; i++) {
            double w = lam == 1.0 ? 1.0 : pow(lam, 0.5 * (double)(k - 1 - i));
            for (size_t j = 0; j < D; j++)
                W[i * D + j] = w * Psi[i * D + j];
            for (size_t o = 0; o < p; o++)
                Yk[o * k + i] = w * Yw[o * ldy + i];
        }
        if (q->n == 0.0) { /* the prior, exactly */
            memset(P, 0, D * D * sizeof *P);
            for (size_t j = 0; j < D; j++)
                P[j * D + j] = lk / s0;
        } else {
            /* l^k L L^T, with the old factor unpacked into the scratch F */
            double *F = gp_alloc_doubles(D * D, err);
            if (F == NULL)
                rc = GP_ENOMEM;
            else {
                gp_unpack_lower(q->L, D, F, D);
                cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (blasint)D, (blasint)D,
                            lk, F, (blasint)D, 0.0, P, (blasint)D);
                free(F);
            }
        }
    }
    if (rc == GP_OK) {
        cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (blasint)D, (blasint)k,
                    1.0 / noise, W, (blasint)D, 1.0, P, (blasint)D);
        gp_symmetrize_from_lower(P, D, D);
        gp_chol_info info = {0};
        rc = gp_cholesky_jitter(P, D, D, &info, err);
        *jitter = info.jitter;
    }
    if (rc == GP_OK) {
        memcpy(out->b, q->b, D * p * sizeof *q->b);
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (blasint)D, (blasint)p,
                    (blasint)k, 1.0 / noise, W, (blasint)D, Yk, (blasint)k, lk, out->b,
                    (blasint)D);
        memcpy(out->z, out->b, D * p * sizeof *q->b);
        cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit,
                    (blasint)D, (blasint)p, 1.0, P, (blasint)D, out->z, (blasint)D);
        gp_pack_lower(P, D, D, out->L);
        out->n = q->n + (double)k;
        out->refactorisations = q->refactorisations + 1.0;
        out->rank_one = q->rank_one;
    }
    if (rc)
        post_free(out);
    free(P);
    free(W);
    free(Yk);
    return rc;
}

/* Working targets of rows start .. start + k of Y (original units, leading
 * dimension ldy) into Yw (k x p). */
static void working_targets(const rfgp_cfg *c, const fmap *m, const double *Y, size_t ldy,
                            size_t start, size_t k, double *Yw)
{
    for (size_t o = 0; o < c->p; o++)
        for (size_t i = 0; i < k; i++)
            Yw[o * k + i] = (Y[o * ldy + start + i] - m->y_mean[o]) / m->y_scale[o];
}

/* Whether the new posterior's arrays are all finite. */
static int post_finite(const rfgp_cfg *c, const post *q)
{
    return gp_all_finite(q->L, packed_len(c->D), NULL) &&
           gp_all_finite(q->z, c->D * c->p, NULL) && gp_all_finite(q->b, c->D * c->p, NULL);
}

/* GP_EDATA unless the rows' working targets are within GP_WORKING_LIMIT and
 * their features finite: with both, the rank-one path (in place, it cannot
 * be undone) stays finite, since its rotations preserve column norms and
 * b grows by at most |psi| GP_WORKING_LIMIT / noise per row. Rows are named
 * as the caller's row i + shift. */
static int check_rows(const rfgp_cfg *c, const double *Psi, const double *Yw, size_t k,
                      long shift, gp_error *err)
{
    int rc = gp_check_working_values(Yw, k, c->p, k, shift, err);
    size_t bad = 0;
    if (rc == GP_OK && !gp_all_finite(Psi, c->D * k, &bad)) {
        char field[GP_ERROR_FIELD_LEN] = "X";
        long row = (long)(bad / c->D) + shift;
        if (row >= 0)
            snprintf(field, sizeof field, "X[%ld]", row);
        rc = gp_error_set(err, GP_EDATA, field,
                          "%s is too far from the data for float64 once standardised: its "
                          "features are not finite",
                          field);
    }
    return rc;
}

/* Rows start .. start + k of (X, Y) (original units) into the posterior q:
 * all or nothing (q is untouched on failure). Errors name row i as the
 * caller's row start + i + shift. */
static int apply_rows(const rfgp_cfg *c, const gp_input_spec *in, const fmap *m, post *q,
                      double noise, double s0, const double *X, size_t ldx, const double *Y,
                      size_t ldy, size_t start, size_t k, long shift, double *jitter,
                      gp_error *err)
{
    if (k == 0)
        return GP_OK;
    size_t D = c->D, count;
    int rc = gp_checked_size(D, k, &count, err);
    if (rc)
        return rc;
    /* two-stage maps learn their own input scale: check_rows' finite features */
    if (in->kind == GP_INPUT_POINT && !c->two_stage &&
        (rc = gp_check_standardised_points(X + start, ldx, k, c->dk, m->x_mean, m->x_scale,
                                           GP_WORKING_LIMIT, (long)start + shift, err)) != GP_OK)
        return rc;
    gp_embed e;
    embed_of(c, in, m, &e);
    gp_embed_work *w = NULL;
    double *Psi = gp_alloc_doubles(count, err), *Yw = gp_alloc_doubles(k * c->p, err);
    double *x = gp_alloc_doubles(D, err), *t = gp_alloc_doubles(c->p, err);
    if (!Psi || !Yw || !x || !t)
        rc = GP_ENOMEM;
    if (rc == GP_OK)
        rc = gp_embed_work_new(&e, k, &w, err);
    if (rc == GP_OK) {
        gp_embed_features_in(&e, w, X, ldx, start, k, Psi);
        working_targets(c, m, Y, ldy, start, k, Yw);
        rc = check_rows(c, Psi, Yw, k, (long)start + shift, err);
    }
    if (rc == GP_OK) {
        if (k >= crossover(c)) {
            post nq;
            double jit = *jitter;
            rc = apply_refactor(c, q, noise, s0, Psi, Yw, k, k, &nq, &jit, err);
            if (rc == GP_OK && !post_finite(c, &nq)) {
                post_free(&nq);
                rc = gp_error_set(err, GP_EDATA, "y",
                                  "the %zu rows would make the model's state non-finite "
                                  "(float64 overflow); the model is unchanged",
                                  k);
            }
            if (rc == GP_OK) {
                post_free(q);
                *q = nq;
                *jitter = jit;
            }
        } else
            apply_rank_one(c, q, noise, Psi, Yw, k, k, x, t);
    }
    gp_embed_work_free(w);
    free(Psi);
    free(Yw);
    free(x);
    free(t);
    return rc;
}

/* ---- the end of the warm-up: widths, features, standardisation, batch fit ---- */

/* The unit draws the widths scale (fixed for the whole selection). */
typedef struct unit_draws {
    double *E, *b1; /* dk x m1, m1: the first stage (points: the only one) */
    double *U, *b2; /* d_in x D, D (two stages) */
} unit_draws;

static void unit_free(unit_draws *u)
{
    free(u->E);
    free(u->b1);
    free(u->U);
    free(u->b2);
}

static int unit_draw(const rfgp_cfg *c, unit_draws *u, gp_error *err)
{
    memset(u, 0, sizeof *u);
    size_t m1 = c->two_stage ? c->d_in : c->D;
    int ok = (u->E = gp_alloc_doubles(c->dk * m1, err)) && (u->b1 = gp_alloc_doubles(m1, err));
    if (ok && c->two_stage)
        ok = (u->U = gp_alloc_doubles(c->d_in * c->D, err)) &&
             (u->b2 = gp_alloc_doubles(c->D, err));
    if (!ok) {
        unit_free(u);
        return GP_ENOMEM;
    }
    gp_embed_draw(c->seed, STREAM_INNER, c->dk, m1, u->E, u->b1);
    if (c->two_stage)
        gp_embed_draw(c->seed, STREAM_OUTER, c->d_in, c->D, u->U, u->b2);
    return GP_OK;
}

/* The map's arrays at widths w (dk) and outer width gamma. */
static void scale_map(const rfgp_cfg *c, const unit_draws *u, const double *w, double gamma,
                      fmap *m)
{
    size_t dk = c->dk, m1 = c->two_stage ? c->d_in : c->D;
    double *W1 = c->two_stage ? m->w_in : m->w_out;
    for (size_t i = 0; i < m1; i++)
        for (size_t k = 0; k < dk; k++)
            W1[i * dk + k] = u->E[i * dk + k] / w[k];
    memcpy(c->two_stage ? m->b_in : m->b_out, u->b1, m1 * sizeof *u->b1);
    if (c->two_stage) {
        for (size_t i = 0; i < c->d_in * c->D; i++)
            m->w_out[i] = u->U[i] / gamma;
        memcpy(m->b_out, u->b2, c->D * sizeof *u->b2);
    }
    memcpy(m->widths, w, dk * sizeof *w);
    m->gamma = gamma;
}

/* What the selection works on: the warm-up buffer and the staged map. */
typedef struct sel_ctx {
    const gp_model *model;
    const rfgp_cfg *c;
    const gp_input_spec *in;
    const double *X; /* n x width, leading dimension ldx */
    size_t ldx, n;
    double *Yw;      /* n x p working targets */
    double *Xs;      /* the heuristics' subsample rows, ns x width (compact) */
    size_t ns;
    unit_draws u;
    fmap *m;         /* staged: stats set, arrays scaled by the selection */
    const gp_fit_request *req; /* progress and cancellation (NULL in observe) */
    double noise0;   /* the noise the selection starts from */
    /* results */
    double *widths;
    double gamma, s0, noise, objective;
    int iterations, evaluations;
} sel_ctx;

static const gp_cancel *ctx_cancel(const sel_ctx *s)
{
    return s->req ? &s->req->cancel : NULL;
}

static int report_progress(const sel_ctx *s, int it, int max, double objective)
{
    if (s->req && s->req->progress &&
        s->req->progress(s->req->progress_ctx, it, max, objective))
        return GP_ECANCELLED;
    return gp_cancel_requested(ctx_cancel(s)) ? GP_ECANCELLED : GP_OK;
}

/* 1 when the kernel's lengthscales are the widths (fixed, or width_selection fixed). */
static int widths_from_kernel(const sel_ctx *s)
{
    return s->c->selection == SEL_FIXED || (s->model->kernel->fixed & GP_FIX_LENGTHSCALE);
}

static void kernel_widths(const gp_kernel *k, size_t dk, double *w)
{
    for (size_t j = 0; j < dk; j++)
        w[j] = exp(k->log_lengthscale[k->n_lengthscale == 1 ? 0 : j]);
}

/* A non-ARD kernel holds one width: the root mean square of the per-dimension ones. */
static void share_widths(const gp_kernel *k, size_t dk, double *w)
{
    if (k->n_lengthscale != 1)
        return;
    double s = 0.0;
    for (size_t j = 0; j < dk; j++)
        s += w[j] * w[j];
    s = sqrt(s / (double)dk);
    for (size_t j = 0; j < dk; j++)
        w[j] = s;
}

/* Inner widths of distributional inputs (§4, pitfall 8): width_k^2 = the
 * average variance of dimension k over the subsample; a dimension without
 * spread (every input a point there) takes the point rule, the median squared
 * difference of the means; both floored at 1e-8 times the spread of the means. */
static int median_inner_widths(sel_ctx *s, double *w, gp_error *err)
{
    size_t dk = s->c->dk, ns = s->ns;
    gp_embed e;
    embed_of(s->c, s->in, s->m, &e);
    double *M = gp_alloc_doubles(dk * ns, err), *V = gp_alloc_doubles(dk * ns, err),
           *row = gp_alloc_doubles(ns, err);
    int rc = M && V && row ? GP_OK : GP_ENOMEM;
    if (rc == GP_OK)
        gp_embed_moments(&e, s->Xs, ns, 0, ns, M, V);
    for (size_t k = 0; rc == GP_OK && k < dk; k++) {
        double mv = 0.0, mm = 0.0, ss = 0.0;
        for (size_t r = 0; r < ns; r++) {
            mv += V[r * dk + k] / (double)ns;
            mm += M[r * dk + k] / (double)ns;
        }
        for (size_t r = 0; r < ns; r++)
            ss += (M[r * dk + k] - mm) * (M[r * dk + k] - mm) / (double)ns;
        double scale = ss > 0.0 ? sqrt(ss) : 1.0, floor2 = 1e-16 * scale * scale;
        double w2 = mv;
        if (!(w2 > floor2)) {
            for (size_t r = 0; r < ns; r++)
                row[r] = M[r * dk + k];
            w2 = gp_embed_median_sq_dist(row, 1, ns, NULL, 0, err);
            if (isnan(w2))
                rc = GP_ENOMEM;
            if (!(w2 > floor2))
                w2 = scale * scale;
        }
        w[k] = sqrt(w2 > floor2 ? w2 : floor2);
    }
    free(M);
    free(V);
    free(row);
    return rc;
}

/* The median heuristics (§4, §7): the widths, and the median squared distance
 * of the embeddings at those widths (*med; two stages). */
static int median_heuristic(sel_ctx *s, double *w, double *med, gp_error *err)
{
    const rfgp_cfg *c = s->c;
    size_t dk = c->dk, ns = s->ns;
    int rc = GP_OK;
    *med = 1.0;
    if (widths_from_kernel(s))
        kernel_widths(s->model->kernel, dk, w);
    else if (!c->two_stage) {
        gp_embed e;
        embed_of(c, s->in, s->m, &e);
        double *Xp = gp_alloc_doubles(dk * (ns ? ns : 1), err);
        if (Xp == NULL)
            return GP_ENOMEM;
        gp_embed_points(&e, s->Xs, ns, 0, ns, Xp);
        double d2 = gp_embed_median_sq_dist(Xp, dk, ns, NULL, 0, err);
        free(Xp);
        if (isnan(d2))
            return GP_ENOMEM;
        for (size_t k = 0; k < dk; k++)
            w[k] = d2 > 0.0 ? sqrt(d2) : 1.0;
    } else {
        rc = median_inner_widths(s, w, err);
        share_widths(s->model->kernel, dk, w);
    }
    if (rc || !c->two_stage)
        return rc;
    /* the outer width: the embeddings' median squared distance (pitfall 9:
     * off-diagonal pairs only) */
    scale_map(c, &s->u, w, 1.0, s->m);
    gp_embed e;
    embed_of(c, s->in, s->m, &e);
    double *Phi = gp_alloc_doubles(c->d_in * (ns ? ns : 1), err);
    if (Phi == NULL)
        return GP_ENOMEM;
    rc = gp_embed_inner(&e, s->Xs, ns, 0, ns, Phi, err);
    double d2 = rc ? NAN : gp_embed_median_sq_dist(Phi, c->d_in, ns, NULL, 0, err);
    free(Phi);
    if (rc == GP_OK && isnan(d2))
        rc = GP_ENOMEM;
    *med = d2 > 0.0 ? d2 : 1.0;
    return rc;
}

/* ---- the primal marginal likelihood and its gradient (§7, option 3) ----
 * Per output q, with P = Psi Psi^T / s + I / s0, b = Psi y / s, z = L^{-1} b,
 * a = P^{-1} b = L^{-T} z and r = y - Psi^T a:
 *   LML_q = -1/2 [y^T y / s - |z|^2 + log|P| + n log s + D log s0 + n log 2 pi]
 *   dLML/dPsi    = (1/s) (sum_q a_q r_q^T - p P^{-1} Psi)
 *   dLML/dlog s  = -1/2 sum_q [-y^T y / s + b^T a + |a|^2 / s0] - p (n - t) / 2
 *   dLML/dlog s0 = 1/2 sum_q |a_q|^2 / s0 - p t / 2,   t = sum(P^{-1} Psi o Psi) / s
 * (t: D - tr(P^{-1}) / s0), and dLML/dPsi goes through the features with the
 * unit draws fixed (embed.h). */
typedef struct ml_prob {
    sel_ctx *s;
    gp_embed e;
    size_t n_ls;   /* 0 (fixed widths), 1 (shared) or dk */
    int free_var, two;
    gp_noise_param np;
    double *yy;    /* p: sum of squared working targets */
    double *Xp;    /* points: dk x n, standardised */
    double *Phi, *Psi, *Sin, *P, *B, *Z, *A, *R, *Q, *F, *T, *gw;
    double *w;     /* dk current widths */
    double gamma, s0, noise;
} ml_prob;

static void ml_free(ml_prob *m)
{
    double *bufs[] = {m->yy, m->Xp, m->Phi, m->Psi, m->Sin, m->P, m->B,
                      m->Z, m->A, m->R, m->Q, m->F, m->T, m->gw, m->w};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    memset(m, 0, sizeof *m); /* m->s NULL: freed (primal_lml_body tests it) */
}

static int ml_init(ml_prob *m, sel_ctx *s, gp_error *err)
{
    memset(m, 0, sizeof *m);
    const rfgp_cfg *c = s->c;
    size_t D = c->D, n = s->n, p = c->p, dk = c->dk, din = c->two_stage ? c->d_in : 1;
    size_t wide = D > din ? D : din;
    m->s = s;
    m->two = c->two_stage;
    embed_of(c, s->in, s->m, &m->e);
    int ok = (m->yy = gp_alloc_doubles(p, err)) && (m->Psi = gp_alloc_doubles(D * n, err)) &&
             (m->Sin = gp_alloc_doubles(D * n, err)) && (m->P = gp_alloc_doubles(D * D, err)) &&
             (m->B = gp_alloc_doubles(D * p, err)) && (m->Z = gp_alloc_doubles(D * p, err)) &&
             (m->A = gp_alloc_doubles(D * p, err)) && (m->R = gp_alloc_doubles(n * p, err)) &&
             (m->Q = gp_alloc_doubles(D * n, err)) && (m->T = gp_alloc_doubles(wide * dk, err)) &&
             (m->gw = gp_alloc_doubles(dk, err)) && (m->w = gp_alloc_doubles(dk, err));
    if (ok && m->two)
        ok = (m->Phi = gp_alloc_doubles(din * n, err)) && (m->F = gp_alloc_doubles(din * n, err));
    if (ok && !m->two && (m->Xp = gp_alloc_doubles(dk * n, err)) != NULL)
        gp_embed_points(&m->e, s->X, s->ldx, 0, n, m->Xp);
    else if (ok && !m->two)
        ok = 0;
    if (!ok) {
        ml_free(m);
        return GP_ENOMEM;
    }
    double power = 0.0;
    for (size_t q = 0; q < p; q++) {
        m->yy[q] = 0.0;
        for (size_t i = 0; i < n; i++)
            m->yy[q] += s->Yw[q * n + i] * s->Yw[q * n + i];
        power += m->yy[q];
    }
    power = n ? power / (double)(n * p) : 1.0;
    m->np.learned = c->noise_learn;
    m->np.floor = 1e-8 * (power > 0.0 ? power : 1.0);
    m->np.start = s->noise0;
    return GP_OK;
}

/* LML at the current widths, gamma, s0 and noise; with grad the sensitivities
 * (g_w: dk, to the log widths). GP_ENOTPD when P cannot be factorised,
 * GP_ECANCELLED when the token asks. */
static int ml_eval(ml_prob *m, double *lml, int grad, double *g_gamma, double *g_s0,
                   double *g_noise, gp_error *err)
{
    sel_ctx *s = m->s;
    const rfgp_cfg *c = s->c;
    size_t D = c->D, n = s->n, p = c->p, dk = c->dk, din = c->d_in;
    double sn = m->noise, t = m->s0;
    scale_map(c, &s->u, m->w, m->gamma, s->m);
    if (m->two) {
        int rc = gp_embed_inner(&m->e, s->X, s->ldx, 0, n, m->Phi, err);
        if (rc)
            return rc;
        gp_embed_map(m->e.w_out, m->e.b_out, din, D, m->Phi, n, m->Psi, m->Sin);
    } else
        gp_embed_map(m->e.w_out, m->e.b_out, dk, D, m->Xp, n, m->Psi, m->Sin);
    if (gp_cancel_requested(ctx_cancel(s)))
        return GP_ECANCELLED;
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (blasint)D, (blasint)n, 1.0 / sn, m->Psi,
                (blasint)D, 0.0, m->P, (blasint)D);
    for (size_t j = 0; j < D; j++)
        m->P[j * D + j] += 1.0 / t;
    gp_symmetrize_from_lower(m->P, D, D);
    int rc = gp_cholesky_jitter_cancellable(m->P, D, D, ctx_cancel(s), NULL, err);
    if (rc)
        return rc;
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (blasint)D, (blasint)p, (blasint)n,
                1.0 / sn, m->Psi, (blasint)D, s->Yw, (blasint)(n ? n : 1), 0.0, m->B, (blasint)D);
    memcpy(m->Z, m->B, D * p * sizeof *m->Z);
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, (blasint)D,
                (blasint)p, 1.0, m->P, (blasint)D, m->Z, (blasint)D);
    double logdet = gp_chol_logdet(m->P, D, D), total = 0.0;
    for (size_t q = 0; q < p; q++) {
        double zz = 0.0;
        for (size_t j = 0; j < D; j++)
            zz += m->Z[q * D + j] * m->Z[q * D + j];
        total += -0.5 * (m->yy[q] / sn - zz + logdet + (double)n * log(sn) +
                         (double)D * log(t) + (double)n * LOG_2PI);
    }
    *lml = total;
    if (!grad)
        return GP_OK;
    memcpy(m->A, m->Z, D * p * sizeof *m->A);
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasTrans, CblasNonUnit, (blasint)D,
                (blasint)p, 1.0, m->P, (blasint)D, m->A, (blasint)D);
    memcpy(m->R, s->Yw, n * p * sizeof *m->R);
    cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, (blasint)n, (blasint)p, (blasint)D, -1.0,
                m->Psi, (blasint)D, m->A, (blasint)D, 1.0, m->R, (blasint)n);
    memcpy(m->Q, m->Psi, D * n * sizeof *m->Q);
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, (blasint)D,
                (blasint)n, 1.0, m->P, (blasint)D, m->Q, (blasint)D);
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasTrans, CblasNonUnit, (blasint)D,
                (blasint)n, 1.0, m->P, (blasint)D, m->Q, (blasint)D);
    double tau = 0.0;
    for (size_t i = 0; i < D * n; i++)
        tau += m->Q[i] * m->Psi[i];
    tau /= sn;
    double gs = -0.5 * (double)p * ((double)n - tau), gt = -0.5 * (double)p * tau;
    for (size_t q = 0; q < p; q++) {
        double ba = 0.0, aa = 0.0;
        for (size_t j = 0; j < D; j++) {
            ba += m->B[q * D + j] * m->A[q * D + j];
            aa += m->A[q * D + j] * m->A[q * D + j];
        }
        gs += -0.5 * (-m->yy[q] / sn + ba + aa / t);
        gt += 0.5 * aa / t;
    }
    *g_noise = gs;
    *g_s0 = gt;
    /* G = (A R^T - p Q) / s into Q, then H = dL/dZ = -Sin o G */
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, (blasint)D, (blasint)n, (blasint)p,
                1.0 / sn, m->A, (blasint)D, m->R, (blasint)n, -(double)p / sn, m->Q, (blasint)D);
    for (size_t i = 0; i < D * n; i++)
        m->Q[i] *= -m->Sin[i];
    memset(m->gw, 0, dk * sizeof *m->gw);
    *g_gamma = 0.0;
    if (!m->two) {
        gp_embed_width_grad_linear(m->e.w_out, dk, D, m->Q, m->Xp, n, m->T, m->gw);
        return GP_OK;
    }
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (blasint)din, (blasint)n, (blasint)D,
                1.0, m->e.w_out, (blasint)din, m->Q, (blasint)D, 0.0, m->F, (blasint)din);
    double gg = 0.0;
    for (size_t i = 0; i < din * n; i++)
        gg -= m->Phi[i] * m->F[i];
    *g_gamma = gg;
    return gp_embed_inner_grad(&m->e, s->X, s->ldx, 0, n, m->F, m->gw, err);
}

/* x = [log widths (n_ls)] [log gamma (two stages)] [log s0 (free_var)] [noise x (learned)] */
static size_t ml_dim(const ml_prob *m)
{
    return m->n_ls + (m->two ? 1 : 0) + (m->free_var ? 1 : 0) + (m->np.learned ? 1 : 0);
}

static void ml_apply(ml_prob *m, const double *x)
{
    size_t i = 0, dk = m->s->c->dk;
    for (size_t k = 0; m->n_ls && k < dk; k++)
        m->w[k] = exp(x[m->n_ls == 1 ? 0 : k]);
    i += m->n_ls;
    if (m->two)
        m->gamma = exp(x[i++]);
    if (m->free_var)
        m->s0 = exp(x[i++]);
    m->noise = gp_noise_param_value(&m->np, m->np.learned ? x[i] : 0.0);
}

static void ml_start(const ml_prob *m, double *x)
{
    size_t i = 0;
    for (size_t k = 0; k < m->n_ls; k++)
        x[i++] = log(m->w[k]);
    if (m->two)
        x[i++] = log(m->gamma);
    if (m->free_var)
        x[i++] = log(m->s0);
    if (m->np.learned)
        x[i++] = gp_noise_param_x0(&m->np);
}

static double ml_objective(void *ctx, const double *x, double *g)
{
    ml_prob *m = ctx;
    ml_apply(m, x);
    double lml, gg, gs0, gn;
    if (ml_eval(m, &lml, 1, &gg, &gs0, &gn, NULL) != GP_OK || !isfinite(lml))
        return INFINITY;
    size_t i = 0, dk = m->s->c->dk;
    if (m->n_ls == 1) {
        double sum = 0.0;
        for (size_t k = 0; k < dk; k++)
            sum += m->gw[k];
        g[i++] = -sum;
    } else
        for (size_t k = 0; k < m->n_ls; k++)
            g[i++] = -m->gw[k];
    if (m->two)
        g[i++] = -gg;
    if (m->free_var)
        g[i++] = -gs0;
    if (m->np.learned)
        g[i++] = -gp_noise_param_grad(&m->np, m->noise, gn);
    return -lml;
}

/* The LML in original units of the warm-up rows at the selected values. */
static double lml_offset(const sel_ctx *s)
{
    double off = 0.0;
    for (size_t q = 0; q < s->c->p; q++)
        off -= (double)s->n * log(s->m->y_scale[q]);
    return off;
}

static int select_ml(sel_ctx *s, gp_error *err)
{
    ml_prob m;
    int rc = ml_init(&m, s, err);
    if (rc)
        return rc;
    const gp_kernel *k = s->model->kernel;
    memcpy(m.w, s->widths, s->c->dk * sizeof *m.w);
    m.gamma = s->gamma;
    m.s0 = s->s0;
    m.noise = s->noise;
    m.n_ls = (k->fixed & GP_FIX_LENGTHSCALE) ? 0 : k->n_lengthscale == 1 ? 1 : s->c->dk;
    m.free_var = !(k->fixed & GP_FIX_VARIANCE);
    size_t dim = ml_dim(&m);
    double *x = gp_alloc_doubles(dim ? dim : 1, err);
    if (x == NULL) {
        ml_free(&m);
        return GP_ENOMEM;
    }
    ml_start(&m, x);
    if (dim > 0 && s->c->max_iterations > 0) {
        gp_driver_options opt;
        gp_driver_default_options(&opt);
        opt.max_iterations = s->c->max_iterations;
        opt.tolerance = s->c->tolerance;
        opt.progress = s->req ? s->req->progress : NULL;
        opt.progress_ctx = s->req ? s->req->progress_ctx : NULL;
        opt.objective_offset = lml_offset(s);
        opt.cancel = ctx_cancel(s);
        gp_driver_result res;
        rc = gp_driver_minimize(ml_objective, &m, x, dim, &opt, &res, err);
        s->iterations = res.iterations;
        s->evaluations = res.evaluations;
    }
    if (rc == GP_OK) {
        ml_apply(&m, x);
        memcpy(s->widths, m.w, s->c->dk * sizeof *m.w);
        s->gamma = m.gamma;
        s->s0 = m.s0;
        s->noise = m.noise;
    }
    free(x);
    ml_free(&m);
    return rc;
}

/* The LML of the warm-up rows at s's values (the fit's reported objective). */
static int selected_lml(sel_ctx *s, double *lml, gp_error *err)
{
    ml_prob m;
    int rc = ml_init(&m, s, err);
    if (rc)
        return rc;
    memcpy(m.w, s->widths, s->c->dk * sizeof *m.w);
    m.gamma = s->gamma;
    m.s0 = s->s0;
    m.noise = s->noise;
    double unused;
    rc = ml_eval(&m, lml, 0, &unused, &unused, &unused, err);
    ml_free(&m);
    return rc;
}

/* ---- closed-form leave-one-out (§4, §7 option 2) ---- */

/* Sum over rows and outputs of the squared leave-one-out residuals of ridge
 * regression on Psi (D x n) with ridge l = s / s0: dual form (n <= D) from
 * (K + l I)^{-1}, e_i = alpha_i / [(K + l I)^{-1}]_ii; primal form from the
 * hat diagonal h_i = psi_i^T (Psi Psi^T + l I)^{-1} psi_i. G is the Gram
 * (Psi^T Psi or Psi Psi^T) the caller computed once per feature map. */
static double loo_score(const sel_ctx *s, const double *Psi, const double *G, double l,
                        gp_error *err)
{
    size_t D = s->c->D, n = s->n, p = s->c->p, m = n <= D ? n : D;
    double *A = gp_alloc_doubles(m * m, err), *Y = gp_alloc_doubles(n * p, err),
           *V = gp_alloc_doubles(n <= D ? n * n : D * n, err), *U = gp_alloc_doubles(D * p, err);
    double score = INFINITY;
    if (!A || !Y || !V || !U)
        goto done;
    memcpy(A, G, m * m * sizeof *A);
    for (size_t j = 0; j < m; j++)
        A[j * m + j] += l;
    if (gp_cholesky_jitter(A, m, m, NULL, NULL) != GP_OK)
        goto done;
    memcpy(Y, s->Yw, n * p * sizeof *Y);
    score = 0.0;
    if (n <= D) {
        gp_chol_solve(A, n, n, Y, p, n); /* alpha */
        memset(V, 0, n * n * sizeof *V);
        for (size_t j = 0; j < n; j++)
            V[j * n + j] = 1.0;
        cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit,
                    (blasint)n, (blasint)n, 1.0, A, (blasint)n, V, (blasint)n);
        for (size_t i = 0; i < n; i++) {
            double dii = 0.0; /* [(K + l I)^{-1}]_ii = |column i of L^{-1}|^2 */
            for (size_t k = i; k < n; k++)
                dii += V[i * n + k] * V[i * n + k];
            for (size_t q = 0; q < p; q++) {
                double e = Y[q * n + i] / dii;
                score += e * e;
            }
        }
    } else {
        memcpy(V, Psi, D * n * sizeof *V);
        cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit,
                    (blasint)D, (blasint)n, 1.0, A, (blasint)D, V, (blasint)D);
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (blasint)D, (blasint)p,
                    (blasint)n, 1.0, V, (blasint)D, Y, (blasint)n, 0.0, U, (blasint)D);
        for (size_t i = 0; i < n; i++) {
            double h = 0.0;
            for (size_t k = 0; k < D; k++)
                h += V[i * D + k] * V[i * D + k];
            for (size_t q = 0; q < p; q++) {
                double yh = 0.0;
                for (size_t k = 0; k < D; k++)
                    yh += V[i * D + k] * U[q * D + k];
                double e = (Y[q * n + i] - yh) / (1.0 - h);
                score += e * e;
            }
        }
    }
done:
    free(A);
    free(Y);
    free(V);
    free(U);
    return score;
}

static const double loo_factors[] = {0.1, 0.2, 1.0 / 3.0, 0.5, 1.0, 2.0, 5.0, 10.0};
static const double loo_ridges[] = {1e-2, 1.0, 1e2};

/* Over the note's grid (§4): median factors {1/10 .. 10} on the squared
 * widths (points) or on gamma^2 (two stages), times the ridges {1e-2, 1, 100}
 * and the ridge of the starting noise; a fixed noise keeps its own ridge only. */
static int select_loocv(sel_ctx *s, double med, gp_error *err)
{
    const rfgp_cfg *c = s->c;
    size_t D = c->D, n = s->n, dk = c->dk, m = n <= D ? n : D;
    size_t nf = sizeof loo_factors / sizeof loo_factors[0];
    double *base = gp_alloc_doubles(dk, err), *w = gp_alloc_doubles(dk, err),
           *Psi = gp_alloc_doubles(D * (n ? n : 1), err), *G = gp_alloc_doubles(m * m, err);
    int rc = base && w && Psi && G ? GP_OK : GP_ENOMEM;
    double ridges[4];
    size_t nr = 0;
    if (c->noise_learn)
        for (size_t r = 0; r < sizeof loo_ridges / sizeof loo_ridges[0]; r++)
            ridges[nr++] = loo_ridges[r];
    ridges[nr++] = s->noise0 / s->s0;
    double best = INFINITY, best_f = 1.0, best_l = ridges[nr - 1];
    if (rc == GP_OK)
        memcpy(base, s->widths, dk * sizeof *base);
    gp_embed e;
    embed_of(c, s->in, s->m, &e);
    for (size_t f = 0; rc == GP_OK && f < nf; f++) {
        double fac = loo_factors[f], gamma = sqrt(fac * med);
        for (size_t k = 0; k < dk; k++)
            w[k] = c->two_stage || widths_from_kernel(s) ? base[k] : base[k] * sqrt(fac);
        scale_map(c, &s->u, w, c->two_stage ? gamma : 1.0, s->m);
        rc = gp_embed_features(&e, s->X, s->ldx, 0, n, Psi, err);
        if (rc)
            break;
        if (n <= D)
            cblas_dsyrk(CblasColMajor, CblasLower, CblasTrans, (blasint)n, (blasint)D, 1.0, Psi,
                        (blasint)D, 0.0, G, (blasint)n);
        else
            cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (blasint)D, (blasint)n, 1.0,
                        Psi, (blasint)D, 0.0, G, (blasint)D);
        gp_symmetrize_from_lower(G, m, m);
        for (size_t r = 0; r < nr; r++) {
            double sc = loo_score(s, Psi, G, ridges[r], err);
            if (sc < best) {
                best = sc;
                best_f = fac;
                best_l = ridges[r];
            }
        }
        s->iterations = (int)f + 1;
        rc = report_progress(s, (int)f + 1, (int)nf, -best);
    }
    if (rc == GP_OK) {
        for (size_t k = 0; k < dk; k++)
            s->widths[k] = c->two_stage || widths_from_kernel(s) ? base[k] : base[k] * sqrt(best_f);
        s->gamma = sqrt(best_f * med);
        if (c->noise_learn)
            s->noise = best_l * s->s0;
    }
    free(base);
    free(w);
    free(Psi);
    free(G);
    return rc;
}

/* ---- the end of the warm-up ---- */

/* What the end of the warm-up produces, committed only when every step (and
 * the rows after it) succeeded: observe is all or nothing. */
typedef struct staged {
    fmap m;
    post q;
    double s0, noise, objective, jitter;
    int iterations, evaluations;
} staged;

static void staged_free(staged *st)
{
    map_free(&st->m);
    post_free(&st->q);
}

/* Rows for the heuristics: all of them up to HEURISTIC_ROWS, else a seeded
 * subsample (the first ns of a partial Fisher-Yates shuffle), copied compact. */
static int gather_subsample(sel_ctx *s, gp_error *err)
{
    size_t n = s->n, ns = n < HEURISTIC_ROWS ? n : HEURISTIC_ROWS, w = s->c->width;
    size_t *idx = malloc((n ? n : 1) * sizeof *idx);
    s->Xs = gp_alloc_doubles((ns ? ns : 1) * w, err);
    if (idx == NULL || s->Xs == NULL) {
        free(idx);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    for (size_t i = 0; i < n; i++)
        idx[i] = i;
    if (ns < n) {
        gp_rng rng;
        gp_rng_derive(&rng, s->c->seed, STREAM_SUBSAMPLE);
        for (size_t i = 0; i < ns; i++) {
            size_t j = i + (size_t)gp_rng_below(&rng, n - i), t = idx[i];
            idx[i] = idx[j];
            idx[j] = t;
        }
    }
    for (size_t r = 0; r < ns; r++)
        for (size_t j = 0; j < w; j++)
            s->Xs[j * ns + r] = s->X[j * s->ldx + idx[r]];
    s->ns = ns;
    free(idx);
    return GP_OK;
}

static int run_selection(sel_ctx *s, gp_error *err)
{
    const rfgp_cfg *c = s->c;
    double med = 1.0;
    int rc = GP_OK;
    if (c->selection == SEL_FIXED) {
        kernel_widths(s->model->kernel, c->dk, s->widths);
        s->gamma = c->outer_width > 0 ? c->outer_width : 1.0;
        return GP_OK;
    }
    rc = median_heuristic(s, s->widths, &med, err);
    s->gamma = c->outer_width > 0 && c->selection == SEL_ML ? c->outer_width
                                                           : sqrt(c->median_factor * med);
    if (rc == GP_OK && c->selection == SEL_LOOCV)
        rc = select_loocv(s, med, err);
    else if (rc == GP_OK && c->selection == SEL_ML && s->n > 0)
        rc = select_ml(s, err);
    return rc;
}

/* The selection's context on the warm-up buffer: the staged map with the
 * standardisation fixed from the buffer, the working targets, the unit draws
 * and the heuristics' subsample. */
/* Row i of the warm-up buffer is the caller's row i + shift (the rows of
 * earlier calls come first). */
static int sel_prepare(const gp_model *model, const rfgp_impl *im, const gp_fit_request *req,
                       long shift, staged *st, sel_ctx *s, gp_error *err)
{
    const rfgp_cfg *c = &im->c;
    size_t n = im->n_buf, p = c->p;
    memset(st, 0, sizeof *st);
    *s = (sel_ctx){.model = model, .c = c, .in = &model->input, .X = im->buf_x,
                   .ldx = c->warmup ? c->warmup : 1, .n = n, .m = &st->m, .req = req,
                   .noise0 = model->noise_variance, .s0 = exp(model->kernel->log_variance)};
    s->noise = s->noise0;
    int rc = map_alloc(c, &st->m, err);
    if (rc == GP_OK && !(s->widths = gp_alloc_doubles(c->dk, err)))
        rc = GP_ENOMEM;
    if (rc == GP_OK && !(s->Yw = gp_alloc_doubles((n ? n : 1) * p, err)))
        rc = GP_ENOMEM;
    if (rc == GP_OK) {
        /* the standardisation, from the buffer (n = warmup: its leading dimension) */
        int stand = model->standardize && n > 0;
        for (size_t k = 0; k < c->dk; k++) {
            st->m.x_mean[k] = 0.0;
            st->m.x_scale[k] = 1.0;
        }
        if (stand && !c->two_stage)
            gp_column_stats(im->buf_x, n, c->dk, st->m.x_mean, st->m.x_scale);
        for (size_t q = 0; q < p; q++) {
            st->m.y_mean[q] = 0.0;
            st->m.y_scale[q] = 1.0;
        }
        if (stand)
            gp_column_stats(im->buf_y, n, p, st->m.y_mean, st->m.y_scale);
        working_targets(c, &st->m, im->buf_y, s->ldx, 0, n, s->Yw);
        /* the fit's rule on the buffer: no column whose spread float64
         * cannot hold (its scale would overflow every variance) */
        rc = gp_check_standardisable(im->buf_y, n, p, s->ldx, stand, 1, shift, err);
        if (rc == GP_OK && model->input.kind == GP_INPUT_POINT && !c->two_stage)
            rc = gp_check_standardisable(im->buf_x, n, c->dk, s->ldx, stand, 0, shift, err);
    }
    if (rc == GP_OK) {
        rc = unit_draw(c, &s->u, err);
    }
    if (rc == GP_OK)
        rc = gather_subsample(s, err);
    return rc;
}

static void sel_release(sel_ctx *s)
{
    unit_free(&s->u);
    free(s->widths);
    free(s->Yw);
    free(s->Xs);
}

static int warmup_end(gp_model *model, const rfgp_impl *im, const gp_fit_request *req,
                      long shift, staged *st, gp_error *err)
{
    const rfgp_cfg *c = &im->c;
    size_t n = im->n_buf;
    sel_ctx s;
    int rc = sel_prepare(model, im, req, shift, st, &s, err);
    if (rc == GP_OK)
        rc = run_selection(&s, err);
    if (rc == GP_OK) {
        scale_map(c, &s.u, s.widths, s.gamma, &st->m);
        rc = post_alloc(c, &st->q, err);
    }
    if (rc == GP_OK) {
        post_prior(c, &st->q, s.s0);
        rc = apply_rows(c, &model->input, &st->m, &st->q, s.noise, s.s0, im->buf_x, s.ldx,
                        im->buf_y, s.ldx, 0, n, shift, &st->jitter, err);
    }
    st->objective = 0.0;
    if (rc == GP_OK && n > 0 && (rc = selected_lml(&s, &st->objective, err)) == GP_OK)
        st->objective += lml_offset(&s);
    /* selected_lml scaled the map's arrays again: the same values, the same bits */
    if (rc == GP_OK && c->selection != SEL_ML && c->selection != SEL_LOOCV)
        rc = report_progress(&s, 1, 1, st->objective);
    st->s0 = s.s0;
    st->noise = s.noise;
    st->iterations = s.iterations;
    st->evaluations = s.evaluations;
    sel_release(&s);
    if (rc) {
        staged_free(st);
        if (rc == GP_ECANCELLED)
            gp_error_set(err, GP_ECANCELLED, NULL, "fit cancelled");
    }
    return rc;
}

/* Per output, tau_j in original units (§2, §8.2, §8.13). */
static void set_thresholds(const gp_model *model, rfgp_impl *im)
{
    const rfgp_cfg *c = &im->c;
    im->always_asks = 0;
    for (size_t q = 0; q < c->p; q++) {
        double ys = im->map.y_scale[q], lnoise = log(model->noise_variance * ys * ys);
        if (c->gate_absolute) {
            im->threshold[q] = c->gate_tau;
            if (c->gate_tau <= lnoise)
                im->always_asks = 1;
        } else
            im->threshold[q] = lnoise + log1p(c->kappa);
    }
}

static void commit(gp_model *model, rfgp_impl *im, staged *st)
{
    const rfgp_cfg *c = &im->c;
    gp_kernel *k = model->kernel;
    k->log_variance = log(st->s0);
    for (size_t j = 0; j < k->n_lengthscale; j++)
        k->log_lengthscale[j] = log(st->m.widths[j]);
    model->noise_variance = st->noise;
    if (!c->two_stage) {
        memcpy(model->x_mean, st->m.x_mean, c->dk * sizeof *model->x_mean);
        memcpy(model->x_scale, st->m.x_scale, c->dk * sizeof *model->x_scale);
    }
    if (c->p == 1) { /* the common statistics, as the other one-output models report them */
        model->y_mean = st->m.y_mean[0];
        model->y_scale = st->m.y_scale[0];
    }
    model->diag.objective = st->objective;
    model->diag.iterations = st->iterations;
    model->diag.evaluations = st->evaluations;
    model->diag.converged = 1;
    model->diag.jitter = st->jitter;
    map_free(&im->map);
    post_free(&im->post);
    im->map = st->m;
    im->post = st->q;
    memset(st, 0, sizeof *st);
    im->online = 1;
    free(im->buf_x);
    free(im->buf_y);
    im->buf_x = im->buf_y = NULL;
    im->n_buf = 0;
    set_thresholds(model, im);
}

/* Rows 0 .. k of X (leading dimension ldx) and Y (ldy), original units: into
 * the warm-up buffer while it fills, then (after its end, in the same call)
 * into the posterior. All or nothing. */
static int take_rows(gp_model *model, const double *X, size_t ldx, const double *Y, size_t ldy,
                     size_t k, const gp_fit_request *req, gp_error *err)
{
    rfgp_impl *im = model->impl;
    const rfgp_cfg *c = &im->c;
    size_t take = 0;
    int ended = 0;
    staged st;
    if (!im->online) {
        take = c->warmup - im->n_buf < k ? c->warmup - im->n_buf : k;
        for (size_t j = 0; take > 0 && j < c->width; j++)
            memcpy(im->buf_x + j * c->warmup + im->n_buf, X + j * ldx, take * sizeof *X);
        for (size_t q = 0; take > 0 && q < c->p; q++)
            memcpy(im->buf_y + q * c->warmup + im->n_buf, Y + q * ldy, take * sizeof *Y);
        im->n_buf += take;
        if (im->n_buf < c->warmup) {
            model->n_train += take;
            return GP_OK;
        }
        /* the buffer holds earlier calls' rows, then this call's first `take` */
        int rc = warmup_end(model, im, req, -(long)(im->n_buf - take), &st, err);
        if (rc) {
            im->n_buf -= take;
            return rc;
        }
        ended = 1;
    }
    fmap *m = ended ? &st.m : &im->map;
    post *q = ended ? &st.q : &im->post;
    double noise = ended ? st.noise : model->noise_variance;
    double s0 = ended ? st.s0 : exp(model->kernel->log_variance), jitter = model->diag.jitter;
    int rc = apply_rows(c, &model->input, m, q, noise, s0, X, ldx, Y, ldy, take, k - take, 0,
                        ended ? &st.jitter : &jitter, err);
    if (rc) {
        if (ended) {
            staged_free(&st);
            im->n_buf -= take;
        }
        return rc;
    }
    if (ended)
        commit(model, im, &st);
    else
        model->diag.jitter = jitter;
    model->n_train += k;
    return GP_OK;
}

/* ---- method_info ---- */

static void set_info(gp_model *model)
{
    const rfgp_impl *im = model->impl;
    const rfgp_cfg *c = &im->c;
    gp_model_info_string(model, "state", im->online ? "online" : "warmup");
    gp_model_info_number(model, "features", (double)c->D);
    if (c->two_stage)
        gp_model_info_number(model, "inner_features", (double)c->d_in);
    gp_model_info_string(model, "width_selection", selection_names[c->selection]);
    gp_model_info_number(model, "warmup", (double)c->warmup);
    gp_model_info_string(model, "gate", c->gate_absolute ? "absolute" : "relative");
    if (!im->online)
        return;
    if (c->two_stage)
        gp_model_info_number(model, "outer_width", im->map.gamma);
    gp_model_info_number(model, "noise", model->noise_variance);
    gp_model_info_number(model, "prior_variance", exp(model->kernel->log_variance));
    gp_model_info_number(model, "refactorisations", im->post.refactorisations);
    gp_model_info_number(model, "rank_one_updates", im->post.rank_one);
    gp_model_info_number(model, "refactor_batch", (double)crossover(c));
    gp_model_info_string(model, "always_asks", im->always_asks ? "true" : "false");
}

/* ---- fit and observe ---- */

static const gp_option_value *given_option(const gp_fit_request *req, const char *name)
{
    for (size_t i = 0; i < req->n_options; i++)
        if (strcmp(req->options[i].name, name) == 0)
            return &req->options[i];
    return NULL;
}

static int selection_from_name(const char *s)
{
    for (int i = 0; i <= SEL_FIXED; i++)
        if (s && strcmp(s, selection_names[i]) == 0)
            return i;
    return SEL_MEDIAN;
}

/* The outputs: the rows' columns, or the option for a model without rows. */
static int read_outputs(const gp_fit_request *req, size_t *p, gp_error *err)
{
    const gp_option_value *o = given_option(req, "outputs");
    size_t from_y = req->n_outputs ? req->n_outputs : 1;
    *p = o ? (size_t)o->number : from_y;
    if (o && (req->n > 0 || req->n_outputs > 1) && *p != from_y)
        return gp_error_set(err, GP_EINVAL, "options.outputs",
                            "options.outputs is %zu but y has %zu column%s", *p, from_y,
                            from_y == 1 ? "" : "s");
    return GP_OK;
}

/* The fit's memory before anything is allocated, against the budget an exact
 * fit of max_train_points points has (as ssgp): the packed factor and two
 * D x D matrices of a re-factorisation, the maps, the buffer and its features. */
static int size_guard(const gp_fit_request *req, const rfgp_cfg *c, gp_error *err)
{
    double cap = (double)gp_fit_point_cap(req), D = (double)c->D, w = (double)c->warmup;
    double need = 2.5 * D * D + D * (double)(c->two_stage ? c->d_in : c->dk) +
                  w * (D + (double)(c->width + c->p)) +
                  (c->two_stage ? 3.0 * (double)c->d_in * (w < 256 ? w : 256) : 0.0) +
                  (w > D ? D : w) * (w > D ? D : w);
    if (need > cap * cap)
        return gp_error_set(err, GP_ETOOBIG, "options.features",
                            "rfgp with %.0f features needs %.1f GB of workspace, above the "
                            "budget of an exact fit of max_train_points = %.0f points (%.1f GB): "
                            "use fewer features or a shorter warm-up, or raise "
                            "--max-train-points",
                            D, need * 8e-9, cap, cap * cap * 8e-9);
    return GP_OK;
}

static int read_cfg(const gp_fit_request *req, rfgp_cfg *c, gp_error *err)
{
    const gp_method *m = &gp_method_rfgp;
    memset(c, 0, sizeof *c);
    int rc = read_outputs(req, &c->p, err);
    if (rc)
        return rc;
    c->two_stage = gp_embed_two_stage(&req->input);
    c->dk = req->input.kind == GP_INPUT_POINT ? req->d : gp_input_point_dim(&req->input);
    c->width = req->d;
    c->D = (size_t)gp_option_number(m, req, "features");
    c->d_in = c->two_stage ? (size_t)gp_option_number(m, req, "inner_features") : 0;
    c->warmup = (size_t)gp_option_number(m, req, "warmup");
    c->selection = selection_from_name(gp_option_string(m, req, "width_selection"));
    c->median_factor = gp_option_number(m, req, "median_factor");
    c->outer_width = gp_option_number(m, req, "outer_width");
    c->forgetting = gp_option_number(m, req, "forgetting");
    c->refactor_batch = gp_option_string(m, req, "refactor_batch")
                            ? 0.0
                            : floor(gp_option_number(m, req, "refactor_batch"));
    /* a number given is an absolute tau; absent or "relative", the relative rule */
    const gp_option_value *gate = given_option(req, "gate_threshold");
    c->gate_absolute = gate != NULL && gate->string == NULL;
    c->gate_tau = c->gate_absolute ? gate->number : 0.0;
    c->kappa = gp_option_number(m, req, "gate_kappa");
    c->max_iterations = (int)gp_option_number(m, req, "max_iterations");
    c->tolerance = gp_option_number(m, req, "tolerance");
    c->noise_learn = !req->noise_fixed;
    c->seed = req->seed;
    const gp_kernel *k = req->kernel;
    if (k->n_active != k->input_dim)
        return gp_error_set(err, GP_EUNSUPPORTED, "kernel.active_dims",
                            "rfgp's kernel sees every input dimension (no active_dims)");
    if (c->warmup == 0 && c->selection != SEL_FIXED)
        return gp_error_set(err, GP_EINVAL, "options.warmup",
                            "warmup 0 needs width_selection fixed: the widths are chosen from "
                            "the warm-up rows");
    if (c->selection == SEL_FIXED && c->two_stage && !(c->outer_width > 0.0))
        return gp_error_set(err, GP_EINVAL, "options.outer_width",
                            "width_selection fixed with %s inputs needs outer_width",
                            gp_input_kind_name(req->input.kind));
    return size_guard(req, c, err);
}

static int impl_new(const rfgp_cfg *c, rfgp_impl **out, gp_error *err)
{
    rfgp_impl *im = calloc(1, sizeof *im);
    if (im == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    im->c = *c;
    size_t cx = 0, cy = 0;
    int rc = gp_checked_size(c->warmup, c->width, &cx, err);
    if (rc == GP_OK)
        rc = gp_checked_size(c->warmup, c->p, &cy, err);
    if (rc == GP_OK && (!(im->threshold = gp_alloc_doubles(c->p, err)) ||
                        !(im->buf_x = gp_alloc_doubles(cx ? cx : 1, err)) ||
                        !(im->buf_y = gp_alloc_doubles(cy ? cy : 1, err))))
        rc = GP_ENOMEM;
    if (rc) {
        impl_free(im);
        return rc;
    }
    *out = im;
    return GP_OK;
}

static int rfgp_fit_body(const gp_fit_request *req, gp_model **out, gp_error *err)
{
    *out = NULL;
    if (gp_cancel_requested(&req->cancel))
        return gp_error_set(err, GP_ECANCELLED, NULL, "fit cancelled");
    rfgp_cfg c;
    gp_model *model = NULL;
    int rc = read_cfg(req, &c, err);
    if (rc == GP_OK)
        rc = gp_model_new(&gp_method_rfgp, req, &model, err);
    if (rc)
        return rc;
    /* statistics come from the warm-up buffer when it is full */
    model->n_train = 0;
    model->n_outputs = c.p;
    for (size_t j = 0; j < model->input_dim; j++) {
        model->x_mean[j] = 0.0;
        model->x_scale[j] = 1.0;
    }
    model->y_mean = 0.0;
    model->y_scale = 1.0;
    model->noise_variance = req->noise_given ? req->noise_variance : DEFAULT_NOISE;
    rfgp_impl *im = NULL;
    rc = impl_new(&c, &im, err);
    model->impl = im;
    if (rc == GP_OK)
        rc = take_rows(model, req->X, req->n, req->y, req->n, req->n, req, err);
    if (rc) {
        gp_model_free(model);
        return rc;
    }
    set_info(model);
    *out = model;
    return GP_OK;
}

static int rfgp_fit(const gp_fit_request *req, gp_model **out, gp_error *err)
{
    gp_blas_serial_begin(); /* results independent of the BLAS thread count */
    int rc = rfgp_fit_body(req, out, err);
    gp_blas_serial_end();
    return rc;
}

static int rfgp_observe_body(gp_model *model, const double *X, const double *Y, size_t k,
                        gp_error *err)
{
    int rc = take_rows(model, X, k, Y, k, k, NULL, err);
    if (rc == GP_OK)
        set_info(model);
    return rc;
}

static int rfgp_observe(gp_model *model, const double *X, const double *Y, size_t k,
                        gp_error *err)
{
    gp_blas_serial_begin(); /* results independent of the BLAS thread count */
    int rc = rfgp_observe_body(model, X, Y, k, err);
    gp_blas_serial_end();
    return rc;
}

/* ---- predict and sample ---- */

/* v <- L^{-1} v for each of the b columns of V (D x b): one packed triangular
 * solve per point, so a point's numbers never depend on its batch. */
static void whiten(const rfgp_impl *im, double *V, size_t b)
{
    size_t D = im->c.D;
    for (size_t i = 0; i < b; i++)
        cblas_dtpsv(CblasColMajor, CblasLower, CblasNoTrans, CblasNonUnit, (blasint)D,
                    im->post.L, V + i * D, 1);
}

static double dot(const double *a, const double *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* Means, variances and the gate of b points (whitened columns of V) from
 * point `start` of the request. */
static void predict_points(const gp_model *model, const gp_predict_request *req, const double *V,
                           size_t start, size_t b, gp_prediction *out)
{
    const rfgp_impl *im = model->impl;
    size_t D = im->c.D, p = im->c.p, m = req->m;
    double noise = model->noise_variance;
    for (size_t i = 0; i < b; i++) {
        const double *v = V + i * D;
        double vv = dot(v, v, D);
        int ask = 0;
        for (size_t q = 0; q < p; q++) {
            double ys = im->map.y_scale[q], ys2 = ys * ys;
            out->mean[q * m + start + i] = dot(v, im->post.z + q * D, D) * ys + im->map.y_mean[q];
            out->variance[q * m + start + i] = (vv + (req->include_noise ? noise : 0.0)) * ys2;
            ask |= log((vv + noise) * ys2) >= im->threshold[q];
        }
        if (out->ask_oracle)
            out->ask_oracle[start + i] = (unsigned char)ask;
    }
}

/* The latent covariance V^T V (m x m), per output times its scale squared. */
static void predict_covariance(const gp_model *model, const gp_predict_request *req,
                               const double *V, gp_prediction *out)
{
    const rfgp_impl *im = model->impl;
    size_t D = im->c.D, p = im->c.p, m = req->m;
    double *C0 = out->covariance;
    cblas_dsyrk(CblasColMajor, CblasLower, CblasTrans, (blasint)m, (blasint)D, 1.0, V,
                (blasint)D, 0.0, C0, (blasint)m);
    gp_symmetrize_from_lower(C0, m, m);
    for (size_t q = p; q-- > 0;) {
        double ys = im->map.y_scale[q], ys2 = ys * ys, *C = out->covariance + q * m * m;
        for (size_t i = 0; i < m * m; i++)
            C[i] = C0[i] * ys2;
        for (size_t i = 0; i < m; i++) {
            if (req->include_noise)
                C[i * m + i] += model->noise_variance * ys2;
            out->variance[q * m + i] = C[i * m + i];
        }
    }
}

static int rfgp_predict_body(const gp_model *model, const gp_predict_request *req, gp_prediction *out,
                        gp_error *err)
{
    const rfgp_impl *im = model->impl;
    size_t D = im->c.D, m = req->m;
    if (m == 0)
        return GP_OK;
    size_t block = req->full_covariance ? m : gp_predict_block_rows(D, m), count;
    int rc = gp_checked_size(D, block, &count, err);
    if (rc)
        return rc;
    gp_embed e;
    embed_of(&im->c, &model->input, &im->map, &e);
    gp_embed_work *w = NULL;
    double *V = gp_alloc_doubles(count, err);
    rc = V ? gp_embed_work_new(&e, block, &w, err) : GP_ENOMEM;
    for (size_t start = 0; rc == GP_OK && start < m; start += block) {
        size_t b = m - start < block ? m - start : block;
        gp_embed_features_in(&e, w, req->X, m, start, b, V);
        whiten(im, V, b);
        predict_points(model, req, V, start, b, out);
    }
    if (rc == GP_OK && req->full_covariance)
        predict_covariance(model, req, V, out);
    gp_embed_work_free(w);
    free(V);
    return rc;
}

static int rfgp_predict(const gp_model *model, const gp_predict_request *req, gp_prediction *out,
                        gp_error *err)
{
    gp_blas_serial_begin(); /* results independent of the BLAS thread count */
    int rc = rfgp_predict_body(model, req, out, err);
    gp_blas_serial_end();
    return rc;
}

static int rfgp_sample_body(const gp_model *model, const gp_sample_request *req, double *samples,
                       gp_error *err)
{
    const rfgp_impl *im = model->impl;
    size_t D = im->c.D, p = im->c.p, m = req->m, S = req->n_samples, ws;
    if (m == 0 || S == 0)
        return GP_OK;
    int rc = gp_checked_size(D, S, &ws, err);
    if (rc)
        return rc;
    size_t block = gp_predict_block_rows(D, m);
    gp_embed e;
    embed_of(&im->c, &model->input, &im->map, &e);
    gp_embed_work *w = NULL;
    double *W = gp_alloc_doubles(ws, err), *Psi = gp_alloc_doubles(D * block, err);
    rc = W && Psi ? gp_embed_work_new(&e, block, &w, err) : GP_ENOMEM;
    gp_rng rng, noise;
    gp_rng_seed(&rng, req->seed);
    gp_rng_derive(&noise, req->seed, STREAM_SAMPLE_NOISE);
    double sd = sqrt(model->noise_variance);
    /* one block holds every point: their features serve every output */
    if (rc == GP_OK && block == m)
        gp_embed_features_in(&e, w, req->X, m, 0, m, Psi);
    for (size_t q = 0; rc == GP_OK && q < p; q++) {
        /* weight draws w = L^{-T} (z_q + e): N(P^{-1} b_q, P^{-1}) */
        gp_rng_normal_fill(&rng, W, D * S);
        for (size_t s = 0; s < S; s++) {
            double *ws_ = W + s * D;
            for (size_t j = 0; j < D; j++)
                ws_[j] += im->post.z[q * D + j];
            cblas_dtpsv(CblasColMajor, CblasLower, CblasTrans, CblasNonUnit, (blasint)D,
                        im->post.L, ws_, 1);
        }
        double *out = samples + q * m * S, ys = im->map.y_scale[q], ym = im->map.y_mean[q];
        for (size_t start = 0; start < m; start += block) {
            size_t b = m - start < block ? m - start : block;
            if (block < m)
                gp_embed_features_in(&e, w, req->X, m, start, b, Psi);
            cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, (blasint)b, (blasint)S,
                        (blasint)D, 1.0, Psi, (blasint)D, W, (blasint)D, 0.0, out + start,
                        (blasint)m);
        }
        for (size_t i = 0; i < m * S; i++) {
            double f = out[i] + (req->include_noise ? sd * gp_rng_normal(&noise) : 0.0);
            out[i] = f * ys + ym;
        }
    }
    gp_embed_work_free(w);
    free(W);
    free(Psi);
    return rc;
}

static int rfgp_sample(const gp_model *model, const gp_sample_request *req, double *samples,
                       gp_error *err)
{
    gp_blas_serial_begin(); /* results independent of the BLAS thread count */
    int rc = rfgp_sample_body(model, req, samples, err);
    gp_blas_serial_end();
    return rc;
}

/* ---- the marginal likelihood for tests (rfgp.h) ---- */

static int primal_lml_body(const gp_fit_request *req, const double *x, double *lml, double *g,
                       gp_error *err)
{
    rfgp_cfg c;
    gp_model *model = NULL;
    int rc = read_cfg(req, &c, err);
    c.warmup = req->n;
    if (rc == GP_OK)
        rc = gp_model_new(&gp_method_rfgp, req, &model, err);
    if (rc)
        return rc;
    model->n_outputs = c.p;
    model->noise_variance = req->noise_given ? req->noise_variance : DEFAULT_NOISE;
    rfgp_impl *im = NULL;
    staged st;
    sel_ctx s;
    ml_prob m;
    memset(&m, 0, sizeof m);
    memset(&s, 0, sizeof s);
    memset(&st, 0, sizeof st);
    rc = impl_new(&c, &im, err);
    model->impl = im;
    if (rc == GP_OK) {
        for (size_t j = 0; j < c.width; j++)
            memcpy(im->buf_x + j * c.warmup, req->X + j * req->n, req->n * sizeof *req->X);
        for (size_t q = 0; q < c.p; q++)
            memcpy(im->buf_y + q * c.warmup, req->y + q * req->n, req->n * sizeof *req->y);
        im->n_buf = req->n;
        rc = sel_prepare(model, im, NULL, 0, &st, &s, err);
    }
    if (rc == GP_OK)
        rc = ml_init(&m, &s, err);
    if (rc == GP_OK) {
        size_t dk = c.dk, i = dk;
        for (size_t k = 0; k < dk; k++)
            m.w[k] = exp(x[k]);
        m.gamma = c.two_stage ? exp(x[i++]) : 1.0;
        m.s0 = exp(x[i++]);
        m.noise = exp(x[i]);
        double gg, gs0, gn;
        rc = ml_eval(&m, lml, g != NULL, &gg, &gs0, &gn, err);
        if (rc == GP_OK && g) {
            memcpy(g, m.gw, dk * sizeof *g);
            i = dk;
            if (c.two_stage)
                g[i++] = gg;
            g[i++] = gs0;
            g[i] = gn;
        }
    }
    if (m.s)
        ml_free(&m);
    sel_release(&s);
    staged_free(&st);
    gp_model_free(model);
    return rc;
}

int gp_rfgp_primal_lml(const gp_fit_request *req, const double *x, double *lml, double *g,
                       gp_error *err)
{
    gp_blas_serial_begin();
    int rc = primal_lml_body(req, x, lml, g, err);
    gp_blas_serial_end();
    return rc;
}

/* ---- export / import ---- */

static int put_pair(gp_state *st, const char *name, const double *a, const double *b, size_t n,
                    gp_error *err)
{
    double *v = gp_alloc_doubles(2 * n, err);
    if (v == NULL)
        return GP_ENOMEM;
    memcpy(v, a, n * sizeof *a);
    memcpy(v + n, b, n * sizeof *b);
    return gp_state_put_owned(st, name, n, 2, v, err);
}

static int export_buffer(const rfgp_impl *im, gp_state *st, gp_error *err)
{
    const rfgp_cfg *c = &im->c;
    size_t n = im->n_buf;
    double *x = gp_alloc_doubles(n * c->width, err), *y = gp_alloc_doubles(n * c->p, err);
    if (x == NULL || y == NULL) {
        free(x);
        free(y);
        return GP_ENOMEM;
    }
    for (size_t j = 0; j < c->width; j++)
        memcpy(x + j * n, im->buf_x + j * c->warmup, n * sizeof *x);
    for (size_t q = 0; q < c->p; q++)
        memcpy(y + q * n, im->buf_y + q * c->warmup, n * sizeof *y);
    int rc = gp_state_put_owned(st, "warmup_x", n, c->width, x, err);
    if (rc == GP_OK)
        rc = gp_state_put_owned(st, "warmup_y", n, c->p, y, err);
    else
        free(y);
    return rc;
}

static int export_online(const rfgp_impl *im, gp_state *st, gp_error *err)
{
    const rfgp_cfg *c = &im->c;
    const fmap *m = &im->map;
    size_t D = c->D, m1 = c->two_stage ? c->d_in : c->dk;
    double counters[3] = {im->post.n, im->post.refactorisations, im->post.rank_one};
    int rc = GP_OK;
    if (c->two_stage) {
        rc = gp_state_put(st, "w_in", c->dk, c->d_in, m->w_in, err);
        if (rc == GP_OK)
            rc = gp_state_put(st, "b_in", c->d_in, 1, m->b_in, err);
    }
    if (rc == GP_OK)
        rc = gp_state_put(st, "w_out", m1, D, m->w_out, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "b_out", D, 1, m->b_out, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "widths", c->dk, 1, m->widths, err);
    if (rc == GP_OK)
        rc = gp_state_put_scalar(st, "outer_width", m->gamma, err);
    if (rc == GP_OK)
        rc = put_pair(st, "x_stats", m->x_mean, m->x_scale, c->dk, err);
    if (rc == GP_OK)
        rc = put_pair(st, "output_stats", m->y_mean, m->y_scale, c->p, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "factor_packed", packed_len(D), 1, im->post.L, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "z", D, c->p, im->post.z, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "b", D, c->p, im->post.b, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "counters", 3, 1, counters, err);
    return rc;
}

static int rfgp_export(const gp_model *model, gp_state *st, gp_error *err)
{
    const rfgp_impl *im = model->impl;
    double cfg[CFG_LEN], state[2] = {(double)im->online, (double)im->n_buf};
    cfg_encode(&im->c, cfg);
    int rc = gp_state_put(st, "rfgp_config", CFG_LEN, 1, cfg, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "rfgp_state", 2, 1, state, err);
    if (rc == GP_OK && !im->online && im->n_buf > 0)
        rc = export_buffer(im, st, err);
    if (rc == GP_OK && im->online)
        rc = export_online(im, st, err);
    return rc;
}

static int get_copy(const gp_state *st, const char *name, size_t rows, size_t cols, double *out,
                    gp_error *err)
{
    const double *p;
    int rc = gp_state_get(st, name, rows, cols, &p, err);
    if (rc == GP_OK)
        memcpy(out, p, rows * cols * sizeof *p);
    return rc;
}

static int import_online(rfgp_impl *im, const gp_state *st, gp_error *err)
{
    const rfgp_cfg *c = &im->c;
    fmap *m = &im->map;
    size_t D = c->D, m1 = c->two_stage ? c->d_in : c->dk;
    const double *xs, *ys;
    double counters[3];
    int rc = map_alloc(c, m, err);
    if (rc == GP_OK)
        rc = post_alloc(c, &im->post, err);
    if (rc == GP_OK && c->two_stage && (rc = get_copy(st, "w_in", c->dk, c->d_in, m->w_in, err)) == 0)
        rc = get_copy(st, "b_in", c->d_in, 1, m->b_in, err);
    if (rc == GP_OK)
        rc = get_copy(st, "w_out", m1, D, m->w_out, err);
    if (rc == GP_OK)
        rc = get_copy(st, "b_out", D, 1, m->b_out, err);
    if (rc == GP_OK)
        rc = get_copy(st, "widths", c->dk, 1, m->widths, err);
    if (rc == GP_OK)
        rc = gp_state_get_scalar(st, "outer_width", &m->gamma, err);
    if (rc == GP_OK && (rc = gp_state_get(st, "x_stats", c->dk, 2, &xs, err)) == 0) {
        memcpy(m->x_mean, xs, c->dk * sizeof *xs);
        memcpy(m->x_scale, xs + c->dk, c->dk * sizeof *xs);
    }
    if (rc == GP_OK && (rc = gp_state_get(st, "output_stats", c->p, 2, &ys, err)) == 0) {
        memcpy(m->y_mean, ys, c->p * sizeof *ys);
        memcpy(m->y_scale, ys + c->p, c->p * sizeof *ys);
    }
    if (rc == GP_OK)
        rc = get_copy(st, "factor_packed", packed_len(D), 1, im->post.L, err);
    if (rc == GP_OK)
        rc = get_copy(st, "z", D, c->p, im->post.z, err);
    if (rc == GP_OK)
        rc = get_copy(st, "b", D, c->p, im->post.b, err);
    if (rc == GP_OK && (rc = get_copy(st, "counters", 3, 1, counters, err)) == 0) {
        im->post.n = counters[0];
        im->post.refactorisations = counters[1];
        im->post.rank_one = counters[2];
    }
    const double *col = im->post.L;
    for (size_t j = 0; rc == GP_OK && j < D; col += D - j, j++)
        if (!(col[0] > 0.0) || !isfinite(col[0]))
            rc = gp_error_set(err, GP_EDATA, "factor_packed", "corrupt Cholesky factor");
    for (size_t q = 0; rc == GP_OK && q < c->p; q++)
        if (!(m->y_scale[q] > 0.0) || !isfinite(m->y_scale[q]))
            rc = gp_error_set(err, GP_EDATA, "output_stats", "corrupt output scale");
    return rc;
}

static int import_buffer(rfgp_impl *im, const gp_state *st, gp_error *err)
{
    const rfgp_cfg *c = &im->c;
    size_t n = im->n_buf;
    const double *x, *y;
    if (n == 0)
        return GP_OK;
    int rc = gp_state_get(st, "warmup_x", n, c->width, &x, err);
    if (rc == GP_OK)
        rc = gp_state_get(st, "warmup_y", n, c->p, &y, err);
    if (rc)
        return rc;
    for (size_t j = 0; j < c->width; j++)
        memcpy(im->buf_x + j * c->warmup, x + j * n, n * sizeof *x);
    for (size_t q = 0; q < c->p; q++)
        memcpy(im->buf_y + q * c->warmup, y + q * n, n * sizeof *y);
    return GP_OK;
}

static int rfgp_import(gp_model *model, const gp_state *st, gp_error *err)
{
    const double *v, *s;
    rfgp_cfg c;
    int rc = gp_state_get(st, "rfgp_config", CFG_LEN, 1, &v, err);
    if (rc == GP_OK)
        rc = cfg_decode(v, &c, err);
    if (rc == GP_OK)
        rc = gp_state_get(st, "rfgp_state", 2, 1, &s, err);
    if (rc)
        return rc;
    if (c.p != model->n_outputs || c.width != model->input_dim ||
        c.dk != gp_input_point_dim(&model->input) ||
        c.two_stage != gp_embed_two_stage(&model->input) ||
        !(s[0] == 0.0 || s[0] == 1.0) || !is_count(s[1], 1e15) ||
        (s[0] == 1.0 ? s[1] != 0.0 : s[1] >= (double)c.warmup))
        return gp_error_set(err, GP_EDATA, "rfgp_config", "configuration does not match the model");
    rfgp_impl *im = NULL;
    rc = impl_new(&c, &im, err);
    if (rc)
        return rc;
    im->online = s[0] == 1.0;
    im->n_buf = (size_t)s[1];
    rc = im->online ? import_online(im, st, err) : import_buffer(im, st, err);
    if (rc) {
        impl_free(im);
        return rc;
    }
    if (im->online) {
        free(im->buf_x);
        free(im->buf_y);
        im->buf_x = im->buf_y = NULL;
        im->n_buf = 0;
    }
    model->impl = im;
    if (im->online)
        set_thresholds(model, im);
    set_info(model);
    return GP_OK;
}

/* ---- the online interface and the options ---- */

static void rfgp_online_status(const gp_model *model, gp_online_status *st)
{
    const rfgp_impl *im = model->impl;
    st->n = model->n_train;
    st->warmup = !im->online;
    st->warmup_target = im->c.warmup;
    st->has_threshold = im->online;
    st->threshold = im->online ? im->threshold : NULL;
    st->kappa = im->c.gate_absolute ? NAN : im->c.kappa;
    st->always_asks = im->online && im->always_asks;
}

static int rfgp_check_option(const char *name, const gp_value *v, size_t d, const char *field,
                             gp_error *err)
{
    if (strcmp(name, "input") != 0)
        return gp_error_set(err, GP_EINVAL, field, "unknown option");
    gp_input_spec spec;
    int rc = gp_input_spec_parse(v, field, &spec, err);
    if (rc == GP_OK && spec.kind == GP_INPUT_POINT && spec.dim != 0 && d != 0 && spec.dim != d) {
        char f[GP_ERROR_FIELD_LEN];
        snprintf(f, sizeof f, "%s.dim", field);
        rc = gp_error_set(err, GP_EDATA, f, "%s is %zu but X has %zu columns", f, spec.dim, d);
    }
    return rc;
}

static const gp_method_ops rfgp_ops = {
    .fit = rfgp_fit,
    .predict = rfgp_predict,
    .sample = rfgp_sample,
    .export_impl = rfgp_export,
    .import_impl = rfgp_import,
    .free_impl = impl_free,
    .check_option = rfgp_check_option,
    .observe = rfgp_observe,
    .online_status = rfgp_online_status,
};

static const gp_info_spec rfgp_info[] = {
    {"state", GP_INFO_STRING, "\"warmup\" while the first rows are buffered, then \"online\""},
    {"features", GP_INFO_NUMBER, "D, the random features of the regression"},
    {"inner_features", GP_INFO_NUMBER, "D_in, the inner features (distributional inputs)"},
    {"width_selection", GP_INFO_STRING, "how the widths were (or will be) chosen"},
    {"warmup", GP_INFO_NUMBER, "n0, the rows of the warm-up"},
    {"gate", GP_INFO_STRING, "\"relative\" or \"absolute\": how the gate's threshold is set"},
    {"outer_width", GP_INFO_NUMBER,
     "gamma, the chosen width of the Gaussian kernel on embeddings (distributional inputs)"},
    {"noise", GP_INFO_NUMBER, "the noise variance s in working units"},
    {"prior_variance", GP_INFO_NUMBER, "s0, the weights' prior variance (the kernel's variance)"},
    {"refactorisations", GP_INFO_NUMBER,
     "batches applied by re-factorising the precision (the warm-up's included)"},
    {"rank_one_updates", GP_INFO_NUMBER, "rows applied by a rank-one (Givens) update"},
    {"refactor_batch", GP_INFO_NUMBER,
     "the batch size from which an update re-factorises (auto: D / 3)"},
    {"always_asks", GP_INFO_STRING,
     "\"true\" when an absolute gate_threshold is at or below the log noise of an output, so "
     "every prediction asks (§8.2)"},
};

/* rfgp cannot predict before `warmup` rows: a warm-up of about half the
 * rows ends inside the fit, and the rest go through the online update as an
 * observe of them would. */
static const gp_option_setting rfgp_quick[] = {
    {"max_iterations", 8}, {"warmup", 20}, {"features", 64}};

const gp_method gp_method_rfgp = {
    .name = "rfgp",
    .summary = "Random-feature GP that learns online (KJIT): Bayesian linear regression on "
               "random Fourier features of points, or two-stage features of distributions "
               "(Gaussians, samples, EP messages); O(D^2) Givens updates per observation, an "
               "uncertainty gate, several outputs sharing one factor",
    .objective_name = "log_marginal_likelihood",
    .options = rfgp_options,
    .n_options = N_OPTIONS,
    .kernels = rfgp_kernels,
    .n_kernels = sizeof rfgp_kernels / sizeof rfgp_kernels[0],
    .composite_kernels = 0,
    .iterations_option = "max_iterations",
    .restarts_option = NULL,
    .info = rfgp_info,
    .n_info = sizeof rfgp_info / sizeof rfgp_info[0],
    .multi_output = 1,
    .starts_empty = 1,
    .input_kinds = (1u << GP_INPUT_GAUSSIAN) | (1u << GP_INPUT_SAMPLES) | (1u << GP_INPUT_MESSAGES),
    .gate = 1,
    .quick = rfgp_quick,
    .n_quick = sizeof rfgp_quick / sizeof rfgp_quick[0],
    .ops = &rfgp_ops,
};
