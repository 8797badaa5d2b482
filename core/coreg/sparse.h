/* gpserve core: the sparse coregionalised bounds of sgpr and svgp
 * (docs/design/multioutput.md, "The computation").
 *
 * Latent functions g_l, l = 0..L-1, with kernel k_{q(l)}, share the inducing
 * inputs Z (m points); output j is f_j = sum_l A[j,l] g_l. The latents are
 * ordered q-major: for each q, its `per_q` columns (the R columns of W_q, then,
 * with kappa, one per output carrying sqrt(kappa_q[j])), so q(l) = l / per_q
 * and cov(f_i, f_j) = sum_q B_q[i,j] k_q exactly. Only the M observed entries
 * a = (row[a], out[a]) of y enter; output j has noise variance s_j.
 *
 * Whitening. With Kuu_q + jitter = L_q L_q^T and aw_q(x) = L_q^{-1} k_q(Z, x),
 * every entry a has a column v_a of V (K x M, K = L m): block l is
 * A[out_a, l] aw_{q(l)}(x_{row a}), so Q = V^T V is the Nystrom covariance of
 * the entries, and kd_a = sum_l A[out_a,l]^2 k_{q(l)}(x, x) their prior
 * variance. Both bounds are functions of (V, kd, the entries' noises) plus,
 * for svgp, q(g) = N(mq, Lq Lq^T) over the whitened g = L^{-1} u (K
 * dimensions, one joint Gaussian over every latent, so that the collapsed
 * optimum is reachable: at mq = B^{-1} V Lambda^{-1} y, S = B^{-1} the svgp
 * ELBO equals sgpr's bound exactly).
 *
 *   sgpr: F = log N(y; 0, V^T V + Lambda) - sum_a (kd_a - |v_a|^2) / (2 lambda_a)
 *   svgp: F = sum_a E_{N(mu_a, var_a)} log N(y_a; f, lambda_a) - KL(q || N(0, I)),
 *         mu_a = v_a . mq, var_a = kd_a - |v_a|^2 + |Lq^T v_a|^2
 *
 * Gradients: each bound gives G = dF/dV, dF/dkd_a and dF/dlambda_a
 * (sparse_bound.c derives them); the chain back to A, the kernels and Z is
 * shared: dF/dA[j,l] = sum_{a in j} G_la . aw + 2 A[j,l] kdiag_q dF/dkd_a,
 * dF/daw_q(x_i) = sum_{a at row i} sum_{l of q} A[out_a,l] G_la, and from
 * there dF/dKuf_q = L_q^{-T} dF/daw_q, dF/dKuu_q = L_q^{-T} sym(Phi(-dF/daw_q
 * Aw_q^T)) L_q^{-1} (Phi: lower triangle with half diagonal), contracted by
 * gp_inducing_contract. Cost O(M K^2 + K^3) per evaluation. */
#ifndef GP_COREG_SPARSE_H
#define GP_COREG_SPARSE_H

#include <stddef.h>

#include "core/base/error.h"
#include "core/kernel/kernel.h"

/* What the bounds are evaluated at (working units, X and Z point-major). */
typedef struct gp_coreg_sparse_at {
    size_t p, q, per_q;                /* outputs, kernels, latents per kernel */
    const gp_kernel *const *kernels;   /* q */
    const double *A;                   /* p x L, L = q per_q, column-major */
    const double *noise;               /* p */
    const double *Z;                   /* d x m */
    size_t m;
} gp_coreg_sparse_at;

/* The data: n rows X (d x n), the M observed entries (row, out) and their
 * working targets y. weight multiplies svgp's expected log-likelihood (0
 * means 1): N / batch for a minibatch's unbiased estimate. */
typedef struct gp_coreg_sparse_data {
    const double *X;
    size_t n, d;
    size_t M;
    const size_t *row, *out;
    const double *y;
    double weight;
} gp_coreg_sparse_data;

/* Gradient outputs (each may be NULL). */
typedef struct gp_coreg_sparse_grad {
    double *kernel; /* q x n_kparams: dF/dtheta_q (log space) */
    double *A;      /* p x L */
    double *noise;  /* p: dF/ds_j (natural units) */
    double *z;      /* d x m */
    double *mean;   /* svgp: K */
    double *chol;   /* svgp: K x K, lower (upper zeroed) */
} gp_coreg_sparse_grad;

/* The whitened posterior of the K = L m inducing values: g = L^{-1} u ~
 * N(mt, C); what prediction needs besides the parameters. */
typedef struct gp_coreg_sparse_post {
    size_t m, K;
    double *mt; /* K */
    double *C;  /* K x K, full symmetric */
} gp_coreg_sparse_post;

/* sgpr's collapsed bound; post (may be NULL) receives the optimal q
 * (allocated here, gp_coreg_sparse_post_free). */
int gp_coreg_sgpr_bound(const gp_coreg_sparse_at *at, const gp_coreg_sparse_data *data,
                        double *F, const gp_coreg_sparse_grad *grad,
                        gp_coreg_sparse_post *post, gp_error *err);

/* svgp's ELBO at q = N(mq, Lq Lq^T) (K and K x K lower); *kl (may be NULL)
 * its KL part. */
int gp_coreg_svgp_elbo(const gp_coreg_sparse_at *at, const gp_coreg_sparse_data *data,
                       const double *mq, const double *Lq, double *F, double *kl,
                       const gp_coreg_sparse_grad *grad, gp_error *err);

/* One natural-gradient step of size `step` on q (mq, Lq updated in place)
 * from the entries of data at its weight: in the natural parameters
 * (S^{-1} m, -S^{-1}/2) the Gaussian likelihood's optimum of the batch is
 * (w V Lambda^{-1} y, I + w V Lambda^{-1} V^T), and the step moves a
 * fraction `step` towards it (step 1 on the full batch lands on sgpr's
 * optimal q). GP_ENOTPD (q unchanged) when the new precision is not positive
 * definite. */
int gp_coreg_svgp_natgrad(const gp_coreg_sparse_at *at, const gp_coreg_sparse_data *data,
                          double step, double *mq, double *Lq, gp_error *err);

void gp_coreg_sparse_post_free(gp_coreg_sparse_post *p);

/* The L_q factors (q blocks m x m, upper zeroed) of Kuu_q + jitter at Z. */
int gp_coreg_sparse_kuu(const gp_coreg_sparse_at *at, double *Lq_all, gp_error *err);

#endif
