/* gpserve core: random Fourier features of points and of distributions, the
 * feature map of rfgp (docs/methods/kernel-jit-online.md §3, §6, §7 "Input
 * kinds").
 *
 * Points (one stage): psi(x) = sqrt(2/D) cos(W^T x + b), W (d x D) the
 * kernel's spectral draws divided by the lengthscales, b ~ U[0, 2 pi).
 *
 * Distributions (two stages, §3):
 *   inner  phi(r) = sqrt(2/D_in) E_{a~r} cos(W_in^T a + b_in)     (D_in)
 *          in closed form for a Gaussian N(m, V):
 *            cos(w^T m + b) exp(-w^T V w / 2)                     (§3)
 *          the average over its points for an empirical sample, and for a
 *          tuple of messages the Gaussian of their stacked moments (§6,
 *          pitfall 7: moment matching, gp_input_message_moments);
 *   outer  psi(r) = sqrt(2/D) cos(W_out^T phi(r) + b_out)          (D)
 *          W_out = U / gamma: a Gaussian kernel of width gamma on the
 *          embeddings.
 * Every map is a block of rows at a time through dgemm (or, per_point,
 * gp_dot_columns); the feature matrix
 * is D x n (one column per row of X), the layout the rank-one updates and the
 * dsyrk of the precision read. */
#ifndef GP_FEATURES_EMBED_H
#define GP_FEATURES_EMBED_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/error.h"
#include "core/model/inputs.h"

typedef struct gp_embed {
    gp_input_spec input; /* what a row of X is (its encoded width: gp_input_width) */
    size_t dk;           /* the inner space: gp_input_point_dim(&input) */
    size_t d_in;         /* inner features (two stages); 0 for points */
    size_t d_out;        /* D, the features the regression sees */
    const double *w_in;  /* dk x d_in (two stages) */
    const double *b_in;  /* d_in */
    const double *w_out; /* d_in x D (two stages) or dk x D (points) */
    const double *b_out; /* D */
    /* Points only (NULL: none): x is standardised as (x - x_mean) / x_scale
     * before the map. */
    const double *x_mean, *x_scale;
    /* 1: every product of the maps is gp_dot_columns (a row's features do
     * not depend on the other rows of the call: the prediction path); 0:
     * dgemm (the fit and the online update, whose bits stay BLAS's). */
    int per_point;
} gp_embed;

/* Rows per block of the maps (bounds their scratch memory). */
#define GP_EMBED_BLOCK 256

/* 1 when the input kind goes through two stages (every kind but points). */
int gp_embed_two_stage(const gp_input_spec *s);

/* Psi (D x n, leading dimension D) of rows start .. start + n of X (column-
 * major, ldx rows, the encoded width columns). GP_ENOMEM only. */
int gp_embed_features(const gp_embed *e, const double *X, size_t ldx, size_t start, size_t n,
                      double *Psi, gp_error *err);

/* The scratch of gp_embed_features for blocks of up to `rows` rows (at most
 * GP_EMBED_BLOCK), allocated once: with it the map cannot fail (an online
 * update that must be all or nothing computes its features after every
 * allocation). */
typedef struct gp_embed_work gp_embed_work;
int gp_embed_work_new(const gp_embed *e, size_t rows, gp_embed_work **out, gp_error *err);
void gp_embed_work_free(gp_embed_work *w);
void gp_embed_features_in(const gp_embed *e, gp_embed_work *w, const double *X, size_t ldx,
                          size_t start, size_t n, double *Psi);

/* Two stages: the inner embeddings Phi (d_in x n) of rows start .. start + n. */
int gp_embed_inner(const gp_embed *e, const double *X, size_t ldx, size_t start, size_t n,
                   double *Phi, gp_error *err);

/* The cosine map of m-dimensional inputs: Out (D x n) = sqrt(2/D) cos(W^T In
 * + b) for W (m x D), In (m x n); Sin (may be NULL) gets sqrt(2/D) sin(...). */
void gp_embed_map(const double *W, const double *b, size_t m, size_t D, const double *In,
                  size_t n, double *Out, double *Sin);

/* The inputs a points map sees: Xp (dk x n, one column per row) of rows
 * start .. start + n, standardised when e->x_mean is set. */
void gp_embed_points(const gp_embed *e, const double *X, size_t ldx, size_t start, size_t n,
                     double *Xp);

/* Moments of the distributions of rows start .. start + n as Gaussians in the
 * inner space: M and V (dk x n each; V the diagonal of the covariance;
 * samples: their mean and population variance; messages: moment-matched). */
void gp_embed_moments(const gp_embed *e, const double *X, size_t ldx, size_t start, size_t n,
                      double *M, double *V);

/* ---- gradients (type-II ML over log widths, with fixed unit draws) ---- */

/* g[k] -= sum_i W[k, i] (H In^T)[i, k]: the sensitivity to log width k of
 * inputs divided by their widths, Z = W^T In, given H = dL/dZ (m x n, W dk x
 * m, In dk x n). g (dk) is added to; T (m x dk) is scratch. */
void gp_embed_width_grad_linear(const double *W, size_t dk, size_t m, const double *H,
                                const double *In, size_t n, double *T, double *g);

/* Two stages: g[k] += dL/dlog w_k for the inner widths w (W_in = U_in /
 * diag(w)), given F = dL/dPhi (d_in x n) for rows start .. start + n of X.
 * GP_ENOMEM only. */
int gp_embed_inner_grad(const gp_embed *e, const double *X, size_t ldx, size_t start, size_t n,
                        const double *F, double *g, gp_error *err);

/* ---- the width heuristics (§4, §7, pitfalls 8 and 9) ---- */

/* The median of the squared distances between distinct columns of A (m x n),
 * over the columns `rows` picks (n_rows of them; NULL: all n). 0 when fewer
 * than two. */
double gp_embed_median_sq_dist(const double *A, size_t m, size_t n, const size_t *rows,
                               size_t n_rows, gp_error *err);

/* The k-th smallest of the n values v (0-based; v reordered). */
double gp_select_kth(double *v, size_t n, size_t k);

/* Draws of the unit features: W (m x D) standard normal and b (D) uniform on
 * [0, 2 pi), from the stream gp_rng_derive(seed, stream). */
void gp_embed_draw(uint64_t seed, uint64_t stream, size_t m, size_t D, double *W, double *b);

#endif
