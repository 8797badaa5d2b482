/* Random Fourier features of points and distributions: core/methods/rfgp/embed.h
 * (docs/methods/kernel-jit-online.md §3). */
#include "core/methods/rfgp/embed.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/rng.h"
#include "core/linalg/fastmath.h"
#include "core/linalg/linalg.h"

#define TWO_PI 6.283185307179586

int gp_embed_two_stage(const gp_input_spec *s)
{
    return s->kind != GP_INPUT_POINT;
}

/* entry j of row i of the column-major X with ldx rows */
#define XR(j, i) X[(size_t)(j) * ldx + (i)]

/* C (p x q, leading dimension p) = A^T X for A (k x p) and X (k x q):
 * dgemm, or per_point gp_dot_columns (each entry gp_dot's bits, whatever q). */
static void product_tn(int per_point, const double *A, size_t p, const double *X, size_t q,
                       size_t k, double *C)
{
    if (per_point)
        gp_dot_columns(A, k, p, X, k, q, k, C, p);
    else
        cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, (blasint)p, (blasint)q, (blasint)k,
                    1.0, A, (blasint)k, X, (blasint)k, 0.0, C, (blasint)p);
}

static void embed_map(int per_point, const double *W, const double *b, size_t m, size_t D,
                      const double *In, size_t n, double *Out, double *Sin)
{
    product_tn(per_point, W, D, In, n, m, Out);
    double scale = sqrt(2.0 / (double)D);
    for (size_t r = 0; r < n; r++) {
        double *z = Out + r * D;
        for (size_t i = 0; i < D; i++)
            z[i] += b[i];
    }
    if (Sin) {
        gp_sincos_scaled(Out, Sin, D * n, scale);
        return;
    }
    /* the sines are not wanted: a column at a time through a small scratch */
    double s[GP_EMBED_BLOCK];
    for (size_t off = 0; off < D * n; off += GP_EMBED_BLOCK) {
        size_t len = D * n - off < GP_EMBED_BLOCK ? D * n - off : GP_EMBED_BLOCK;
        gp_sincos_scaled(Out + off, s, len, scale);
    }
}

void gp_embed_map(const double *W, const double *b, size_t m, size_t D, const double *In,
                  size_t n, double *Out, double *Sin)
{
    embed_map(0, W, b, m, D, In, n, Out, Sin);
}

void gp_embed_points(const gp_embed *e, const double *X, size_t ldx, size_t start, size_t n,
                     double *Xp)
{
    size_t d = e->dk;
    for (size_t k = 0; k < d; k++) {
        double mu = e->x_mean ? e->x_mean[k] : 0.0, sc = e->x_scale ? e->x_scale[k] : 1.0;
        for (size_t r = 0; r < n; r++)
            Xp[r * d + k] = (XR(k, start + r) - mu) / sc;
    }
}

void gp_embed_moments(const gp_embed *e, const double *X, size_t ldx, size_t start, size_t n,
                      double *M, double *V)
{
    const gp_input_spec *s = &e->input;
    size_t d = e->dk;
    for (size_t r = 0; r < n; r++) {
        size_t i = start + r;
        double *m = M + r * d, *v = V + r * d;
        switch (s->kind) {
        case GP_INPUT_GAUSSIAN:
            for (size_t k = 0; k < d; k++) {
                m[k] = XR(k, i);
                v[k] = s->full_covariance ? XR(d + k * d + k, i) : XR(d + k, i);
            }
            break;
        case GP_INPUT_SAMPLES: {
            size_t S = s->samples;
            for (size_t k = 0; k < d; k++) {
                double mu = 0.0, ss = 0.0;
                for (size_t t = 0; t < S; t++)
                    mu += XR(t * d + k, i);
                mu /= (double)S;
                for (size_t t = 0; t < S; t++) {
                    double dv = XR(t * d + k, i) - mu;
                    ss += dv * dv;
                }
                m[k] = mu;
                v[k] = ss / (double)S;
            }
            break;
        }
        case GP_INPUT_MESSAGES:
            gp_input_message_moments(s, X, ldx, i, m, v);
            break;
        default:
            for (size_t k = 0; k < d; k++) {
                m[k] = XR(k, i);
                v[k] = 0.0;
            }
        }
    }
}

/* ---- the inner embeddings ---- */

typedef struct inner_work {
    double *M, *V;  /* dk x b */
    double *A, *Q;  /* d_in x b */
    double *S;      /* d_in x b: sines */
    double *W2;     /* dk x d_in: W_in squared (diagonal covariances) */
    double *T;      /* d_in x dk: gradient scratch */
} inner_work;

static void inner_work_free(inner_work *w)
{
    free(w->M);
    free(w->V);
    free(w->A);
    free(w->Q);
    free(w->S);
    free(w->W2);
    free(w->T);
    memset(w, 0, sizeof *w);
}

static int inner_work_new(const gp_embed *e, size_t b, inner_work *w, gp_error *err)
{
    memset(w, 0, sizeof *w);
    size_t dk = e->dk, din = e->d_in;
    w->M = gp_alloc_doubles(dk * b, err);
    w->V = gp_alloc_doubles(dk * b, err);
    w->A = gp_alloc_doubles(din * b, err);
    w->Q = gp_alloc_doubles(din * b, err);
    w->S = gp_alloc_doubles(din * b, err);
    w->W2 = gp_alloc_doubles(dk * din, err);
    w->T = gp_alloc_doubles(dk * din, err);
    if (!w->M || !w->V || !w->A || !w->Q || !w->S || !w->W2 || !w->T) {
        inner_work_free(w);
        return GP_ENOMEM;
    }
    for (size_t i = 0; i < dk * din; i++)
        w->W2[i] = e->w_in[i] * e->w_in[i];
    return GP_OK;
}

/* A = W_in^T M + b_in (d_in x b) */
static void inner_phase(const gp_embed *e, const double *M, size_t b, double *A)
{
    size_t din = e->d_in;
    product_tn(e->per_point, e->w_in, din, M, b, e->dk, A);
    for (size_t r = 0; r < b; r++)
        for (size_t i = 0; i < din; i++)
            A[r * din + i] += e->b_in[i];
}

/* Q = w^T V w / 2 per (feature, row): diagonal V from w->V, full V from X. */
static void inner_quadratic(const gp_embed *e, const double *X, size_t ldx, size_t start,
                            size_t b, inner_work *w)
{
    size_t dk = e->dk, din = e->d_in;
    if (!e->input.full_covariance && e->per_point) {
        product_tn(1, w->W2, din, w->V, b, dk, w->Q);
        for (size_t i = 0; i < din * b; i++)
            w->Q[i] *= 0.5;
        return;
    }
    if (!e->input.full_covariance) {
        cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, (blasint)din, (blasint)b,
                    (blasint)dk, 0.5, w->W2, (blasint)dk, w->V, (blasint)dk, 0.0, w->Q,
                    (blasint)din);
        return;
    }
    for (size_t r = 0; r < b; r++) {
        /* the row's covariance (column-major dk x dk) read straight from X */
        double *q = w->Q + r * din;
        for (size_t i = 0; i < din; i++) {
            const double *wi = e->w_in + i * dk;
            double acc = 0.0;
            for (size_t c = 0; c < dk; c++) {
                double vc = 0.0;
                for (size_t k = 0; k < dk; k++)
                    vc += XR(dk + c * dk + k, start + r) * wi[k];
                acc += wi[c] * vc;
            }
            q[i] = 0.5 * acc;
        }
    }
}

/* The terms of b rows from start, Gaussian kinds (and messages), shared by the
 * map and its gradient: the moments in w->M, w->V, Q = w^T V w / 2 in w->Q,
 * and of the phase A = W_in^T M + b_in, c0 cos(A) in A and c0 sin(A) in w->S
 * (c0 = sqrt(2/d_in)). */
static void gaussian_terms(const gp_embed *e, const double *X, size_t ldx, size_t start,
                           size_t b, inner_work *w, double *A)
{
    size_t din = e->d_in;
    gp_embed_moments(e, X, ldx, start, b, w->M, w->V);
    inner_phase(e, w->M, b, A);
    inner_quadratic(e, X, ldx, start, b, w);
    gp_sincos_scaled(A, w->S, din * b, sqrt(2.0 / (double)din));
}

/* Phi (d_in x b) of b rows from start, Gaussian kinds (and messages). */
static void inner_gaussian(const gp_embed *e, const double *X, size_t ldx, size_t start, size_t b,
                           inner_work *w, double *Phi)
{
    size_t din = e->d_in;
    gaussian_terms(e, X, ldx, start, b, w, Phi);
    for (size_t i = 0; i < din * b; i++)
        Phi[i] *= exp(-w->Q[i]);
}

/* Point t of each of b sampled rows from start into w->M, its phase's
 * c0 cos into w->A and c0 sin into w->S (c0 = sqrt(2/d_in) / S): the map's
 * and the gradient's shared step. */
static void sample_terms(const gp_embed *e, const double *X, size_t ldx, size_t start, size_t b,
                         size_t t, inner_work *w)
{
    size_t din = e->d_in, dk = e->dk;
    for (size_t r = 0; r < b; r++)
        for (size_t k = 0; k < dk; k++)
            w->M[r * dk + k] = XR(t * dk + k, start + r);
    inner_phase(e, w->M, b, w->A);
    gp_sincos_scaled(w->A, w->S, din * b, sqrt(2.0 / (double)din) / (double)e->input.samples);
}

/* Phi of an empirical sample: the average over its points of the cosines. */
static void inner_samples(const gp_embed *e, const double *X, size_t ldx, size_t start, size_t b,
                          inner_work *w, double *Phi)
{
    size_t din = e->d_in, S = e->input.samples;
    memset(Phi, 0, din * b * sizeof *Phi);
    for (size_t t = 0; t < S; t++) {
        sample_terms(e, X, ldx, start, b, t, w);
        for (size_t i = 0; i < din * b; i++)
            Phi[i] += w->A[i];
    }
}

static void inner_block(const gp_embed *e, inner_work *w, const double *X, size_t ldx,
                        size_t start, size_t b, double *Phi)
{
    if (e->input.kind == GP_INPUT_SAMPLES)
        inner_samples(e, X, ldx, start, b, w, Phi);
    else
        inner_gaussian(e, X, ldx, start, b, w, Phi);
}

int gp_embed_inner(const gp_embed *e, const double *X, size_t ldx, size_t start, size_t n,
                   double *Phi, gp_error *err)
{
    size_t blk = n < GP_EMBED_BLOCK ? n : GP_EMBED_BLOCK;
    inner_work w;
    if (n == 0)
        return GP_OK;
    if (inner_work_new(e, blk, &w, err))
        return GP_ENOMEM;
    for (size_t off = 0; off < n; off += blk) {
        size_t b = n - off < blk ? n - off : blk;
        inner_block(e, &w, X, ldx, start + off, b, Phi + off * e->d_in);
    }
    inner_work_free(&w);
    return GP_OK;
}

struct gp_embed_work {
    size_t block;     /* rows per block */
    inner_work inner; /* two stages */
    double *In;       /* m x GP_EMBED_BLOCK: the inner embeddings or the points */
};

void gp_embed_work_free(gp_embed_work *w)
{
    if (w == NULL)
        return;
    inner_work_free(&w->inner);
    free(w->In);
    free(w);
}

int gp_embed_work_new(const gp_embed *e, size_t rows, gp_embed_work **out, gp_error *err)
{
    *out = NULL;
    gp_embed_work *w = calloc(1, sizeof *w);
    if (w == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    int two = gp_embed_two_stage(&e->input);
    size_t m = two ? e->d_in : e->dk;
    w->block = rows < 1 ? 1 : rows > GP_EMBED_BLOCK ? GP_EMBED_BLOCK : rows;
    w->In = gp_alloc_doubles(m * w->block, err);
    if (w->In == NULL || (two && inner_work_new(e, w->block, &w->inner, err))) {
        gp_embed_work_free(w);
        return GP_ENOMEM;
    }
    *out = w;
    return GP_OK;
}

void gp_embed_features_in(const gp_embed *e, gp_embed_work *w, const double *X, size_t ldx,
                          size_t start, size_t n, double *Psi)
{
    int two = gp_embed_two_stage(&e->input);
    size_t D = e->d_out, m = two ? e->d_in : e->dk;
    for (size_t off = 0; off < n; off += w->block) {
        size_t b = n - off < w->block ? n - off : w->block;
        if (two)
            inner_block(e, &w->inner, X, ldx, start + off, b, w->In);
        else
            gp_embed_points(e, X, ldx, start + off, b, w->In);
        embed_map(e->per_point, e->w_out, e->b_out, m, D, w->In, b, Psi + off * D, NULL);
    }
}

int gp_embed_features(const gp_embed *e, const double *X, size_t ldx, size_t start, size_t n,
                      double *Psi, gp_error *err)
{
    if (n == 0)
        return GP_OK;
    gp_embed_work *w;
    int rc = gp_embed_work_new(e, n, &w, err);
    if (rc)
        return rc;
    gp_embed_features_in(e, w, X, ldx, start, n, Psi);
    gp_embed_work_free(w);
    return GP_OK;
}

/* ---- gradients ---- */

void gp_embed_width_grad_linear(const double *W, size_t dk, size_t m, const double *H,
                                const double *In, size_t n, double *T, double *g)
{
    /* T = H In^T (m x dk) */
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, (blasint)m, (blasint)dk, (blasint)n,
                1.0, H, (blasint)m, In, (blasint)dk, 0.0, T, (blasint)m);
    for (size_t k = 0; k < dk; k++) {
        double s = 0.0;
        for (size_t i = 0; i < m; i++)
            s += W[i * dk + k] * T[k * m + i];
        g[k] -= s;
    }
}

/* Gaussian kinds: dPhi/dA = -c0 sin(A) e^{-Q}, dPhi/dQ = -Phi, with
 * dA/dlog w_k = -W_in[k, i] m_k and dQ/dlog w_k = -W_in[k, i] (V W_in[:, i])_k
 * (docs/methods/kernel-jit-online.md §7, "As implemented"). */
static void inner_grad_gaussian(const gp_embed *e, const double *X, size_t ldx, size_t start,
                                size_t b, const double *F, inner_work *w, double *g)
{
    size_t din = e->d_in, dk = e->dk;
    gaussian_terms(e, X, ldx, start, b, w, w->A); /* A: c0 cos, S: c0 sin */
    for (size_t i = 0; i < din * b; i++) {
        double eq = exp(-w->Q[i]);
        w->S[i] = -F[i] * w->S[i] * eq; /* dL/dA */
        w->A[i] = F[i] * w->A[i] * eq;  /* dL/dPhi * Phi = -dL/dQ */
    }
    gp_embed_width_grad_linear(e->w_in, dk, din, w->S, w->M, b, w->T, g);
    if (!e->input.full_covariance) {
        /* sum_i W_in[k,i]^2 (C V^T)[i,k] with C = F o Phi */
        double *T = w->T;
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, (blasint)din, (blasint)dk,
                    (blasint)b, 1.0, w->A, (blasint)din, w->V, (blasint)dk, 0.0, T,
                    (blasint)din);
        for (size_t k = 0; k < dk; k++) {
            double s = 0.0;
            for (size_t i = 0; i < din; i++)
                s += w->W2[i * dk + k] * T[k * din + i];
            g[k] += s;
        }
        return;
    }
    for (size_t r = 0; r < b; r++) {
        const double *C = w->A + r * din;
        for (size_t i = 0; i < din; i++) {
            const double *wi = e->w_in + i * dk;
            for (size_t k = 0; k < dk; k++) {
                double vk = 0.0;
                for (size_t c = 0; c < dk; c++)
                    vk += XR(dk + c * dk + k, start + r) * wi[c];
                g[k] += C[i] * wi[k] * vk;
            }
        }
    }
}

static void inner_grad_samples(const gp_embed *e, const double *X, size_t ldx, size_t start,
                               size_t b, const double *F, inner_work *w, double *g)
{
    size_t din = e->d_in, dk = e->dk, S = e->input.samples;
    for (size_t t = 0; t < S; t++) {
        sample_terms(e, X, ldx, start, b, t, w);
        for (size_t i = 0; i < din * b; i++)
            w->S[i] = -F[i] * w->S[i];
        gp_embed_width_grad_linear(e->w_in, dk, din, w->S, w->M, b, w->T, g);
    }
}

int gp_embed_inner_grad(const gp_embed *e, const double *X, size_t ldx, size_t start, size_t n,
                        const double *F, double *g, gp_error *err)
{
    size_t blk = n < GP_EMBED_BLOCK ? n : GP_EMBED_BLOCK;
    inner_work w;
    if (n == 0)
        return GP_OK;
    if (inner_work_new(e, blk, &w, err))
        return GP_ENOMEM;
    for (size_t off = 0; off < n; off += blk) {
        size_t b = n - off < blk ? n - off : blk;
        const double *Fb = F + off * e->d_in;
        if (e->input.kind == GP_INPUT_SAMPLES)
            inner_grad_samples(e, X, ldx, start + off, b, Fb, &w, g);
        else
            inner_grad_gaussian(e, X, ldx, start + off, b, Fb, &w, g);
    }
    inner_work_free(&w);
    return GP_OK;
}

/* ---- heuristics ---- */

double gp_select_kth(double *v, size_t n, size_t k)
{
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        /* median of three as the pivot */
        size_t mid = lo + (hi - lo) / 2;
        double a = v[lo], b = v[mid], c = v[hi];
        double pivot = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        size_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot)
                i++;
            while (v[j] > pivot)
                j--;
            if (i <= j) {
                double t = v[i];
                v[i] = v[j];
                v[j] = t;
                i++;
                if (j == 0)
                    break;
                j--;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return v[k];
    }
    return v[k];
}

double gp_embed_median_sq_dist(const double *A, size_t m, size_t n, const size_t *rows,
                               size_t n_rows, gp_error *err)
{
    size_t cnt = rows ? n_rows : n;
    (void)n;
    if (cnt < 2)
        return 0.0;
    size_t pairs = cnt * (cnt - 1) / 2;
    double *dist = gp_alloc_doubles(pairs, err);
    if (dist == NULL)
        return NAN;
    size_t at = 0;
    for (size_t a = 0; a < cnt; a++) {
        const double *xa = A + (rows ? rows[a] : a) * m;
        for (size_t b = a + 1; b < cnt; b++) {
            const double *xb = A + (rows ? rows[b] : b) * m;
            double s = 0.0;
            for (size_t k = 0; k < m; k++)
                s += (xa[k] - xb[k]) * (xa[k] - xb[k]);
            dist[at++] = s;
        }
    }
    /* the median of an even count: the mean of the two middle values */
    double hi = gp_select_kth(dist, pairs, pairs / 2), med = hi;
    if (pairs % 2 == 0) {
        double lo = dist[0];
        for (size_t i = 1; i < pairs / 2; i++)
            lo = dist[i] > lo ? dist[i] : lo;
        med = 0.5 * (lo + hi);
    }
    free(dist);
    return med;
}

void gp_embed_draw(uint64_t seed, uint64_t stream, size_t m, size_t D, double *W, double *b)
{
    gp_rng rng;
    gp_rng_derive(&rng, seed, stream);
    gp_rng_normal_fill(&rng, W, m * D);
    for (size_t i = 0; i < D; i++)
        b[i] = TWO_PI * gp_rng_uniform(&rng);
}
