/* gpserve core: Stein variational gradient descent, defined in core/optim/svgd.c. */
#ifndef GP_OPTIM_SVGD_H
#define GP_OPTIM_SVGD_H

#include <stddef.h>

#include "core/base/error.h"
#include "core/optim/optim.h"

/* ---- SVGD (Stein variational gradient descent) particle step ----
 *
 * n particles in R^d held as the rows of an n x d column-major matrix P, with
 * the scores G (n x d, grad log p at each particle; for a posterior, the
 * log-likelihood gradient plus the prior score). The direction
 *   phi_i = (1/Z_i) sum_j k(p_i, p_j) [ attraction * g_j
 *                                       + repulsion * (p_i - p_j) / h ]
 * with the RBF particle kernel k = exp(-sum_k (p_ik - p_jk)^2 / (2 h_k)),
 * Z_i = n (standard SVGD), the row sum sum_j k(p_i, p_j) (the functional
 * kernel learning variant, docs/methods/stein-random-features.md §2.4) or a given divisor, and h from
 * the median rule:
 *   TOTAL    one h = median over pairs a != b of ||p_a - p_b||^2 (docs/methods/stein-random-features.md §2.2a:
 *            the right rule for sampling a known density in any dimension)
 *   PER_DIM  h_k = median over all ordered pairs (a = b included) of
 *            (p_ak - p_bk)^2, the authors' code (docs/methods/stein-random-features.md §2.2); collapses the
 *            particles above a few dimensions when sampling a density
 * times bandwidth_scale, clamped at min_bandwidth. The bandwidth is a
 * constant of each step (recomputed from the particles every call). The
 * kernel and the two sums are formed with BLAS level 3 (an n x n matrix).
 * The PER_DIM medians (one task per dimension) and the kernel's exp loop
 * (column ranges fixed by n) run through gp_parallel_for; the result is the
 * same bit for bit for any gp_parallel_set_threads. */
typedef enum gp_svgd_bandwidth {
    GP_SVGD_BANDWIDTH_TOTAL = 0,
    GP_SVGD_BANDWIDTH_PER_DIM
} gp_svgd_bandwidth;

typedef struct gp_svgd_options {
    gp_svgd_bandwidth bandwidth; /* default TOTAL */
    double bandwidth_scale;      /* default 1 */
    double min_bandwidth;        /* default 1e-12 */
    double attraction;           /* weight of the score term (annealing), default 1 */
    double repulsion;            /* weight of the kernel-gradient term, default 1 */
    int normalize_rowsum;        /* 0: divide by n (default); 1: by the kernel row sum */
    double divisor;              /* > 0: Z_i = divisor for every particle, overriding n and
                                    normalize_rowsum (msrfr pools M components' particles
                                    and divides by M, docs/methods/stein-random-features.md §4.2); default 0 */
} gp_svgd_options;

void gp_svgd_default_options(gp_svgd_options *opt);

/* Workspace for n particles in d dimensions (the n x n kernel, pair buffers). */
typedef struct gp_svgd_work gp_svgd_work;
int gp_svgd_work_new(size_t n, size_t d, gp_svgd_work **out, gp_error *err);
void gp_svgd_work_free(gp_svgd_work *w);

/* phi (n x d) = the direction above. h (1 entry for TOTAL, d for PER_DIM; may
 * be NULL) receives the bandwidths used. */
void gp_svgd_direction(const double *P, const double *G, size_t n, size_t d,
                       const gp_svgd_options *opt, gp_svgd_work *w, double *phi, double *h);

/* Cyclic annealing of the attraction (D'Angelo and Fortuin 2021, docs/methods/stein-random-features.md §2.3):
 * gamma_t = ((t mod (T/c)) / (T/c))^power for t = 0..T-1, with 0^0 = 1 (so
 * power 0 means no annealing). T/c is rounded down and at least 1. */
double gp_svgd_anneal(int t, int iterations, int cycles, double power);

/* The step of the authors' code (docs/methods/stein-random-features.md §2.3): Adam on the ascent direction phi
 * with decoupled weight decay,
 *   P <- P + lr * mhat / (sqrt(vhat) + eps) - lr * weight_decay * P,
 * the Adam moments kept in adam (n*d entries, gp_adam_init). */
void gp_svgd_adam_step(gp_adam *adam, double *P, const double *phi, double lr,
                       double weight_decay);

/* Median of the multiset {x_ab = (v_a - v_b)^2 : pairs} over n finite values
 * v (a stride apart), as numpy's median (mean of the two middle values for an
 * even count): with_self = 1 takes all n^2 ordered pairs (the n zeros of
 * a = b included), 0 the n(n-1)/2 unordered pairs a < b. Exact, in
 * O(n log n): the values are sorted into buf and the middle pair differences
 * found by counting, never listing the pairs. buf holds n doubles.
 * Helper of the PER_DIM rule, exposed for tests. */
double gp_median_pair_sqdiff(const double *v, size_t n, size_t stride, int with_self,
                             double *buf);

#endif
