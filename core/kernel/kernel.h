/* gpserve core: covariance kernels.
 *
 * A kernel is a tree: leaves are the base kernels, inner nodes are sums and
 * products of any depth. Every leaf has a variance sigma^2 and, where it applies,
 * lengthscales (one, or one per seen dimension with ARD), the rq alpha and the
 * periodic period. All hyperparameters are stored as natural logarithms; the
 * flat parameter vector and every gradient are in that log space.
 *
 * With r^2 = sum_i ((x_i - z_i)/l_i)^2 over the kernel's dimensions and
 * d = ||x - z||:
 *   rbf       s2 exp(-r^2/2)
 *   matern12  s2 exp(-r)
 *   matern32  s2 (1 + sqrt3 r) exp(-sqrt3 r)
 *   matern52  s2 (1 + sqrt5 r + 5 r^2/3) exp(-sqrt5 r)
 *   rq        s2 (1 + r^2/(2 alpha))^(-alpha)
 *   periodic  s2 exp(-2 sin^2(pi d / p) / l^2)          (always one lengthscale)
 *   linear    s2 x^T z
 *   white     s2 [same point]
 * `periodic` uses the Euclidean distance of all its dimensions, as scikit-learn
 * does; that is positive definite on one dimension but not in general on
 * several, so give it one column with active_dims.
 * `white` is nonzero only between a point and itself (the diagonal of a
 * training Gram matrix, or a test point's own variance), never between two
 * different points that happen to be equal: the convention of scikit-learn and
 * GPflow, and what makes it a noise term rather than a covariance.
 *
 * Points are contiguous vectors of the full input dimension; a leaf with
 * active_dims reads only those coordinates. */
#ifndef GP_KERNEL_H
#define GP_KERNEL_H

#include <stddef.h>

#include "core/base/cancel.h"
#include "core/base/error.h"
#include "core/base/rng.h"

typedef enum gp_kernel_type {
    GP_KERNEL_RBF = 0,
    GP_KERNEL_MATERN12,
    GP_KERNEL_MATERN32,
    GP_KERNEL_MATERN52,
    GP_KERNEL_RQ,
    GP_KERNEL_PERIODIC,
    GP_KERNEL_LINEAR,
    GP_KERNEL_WHITE,
    GP_KERNEL_SUM,
    GP_KERNEL_PRODUCT,
    GP_KERNEL_TYPE_COUNT
} gp_kernel_type;

/* Bits of gp_kernel.fixed: which of a leaf's hyperparameter groups are held. */
enum {
    GP_FIX_VARIANCE = 1u << 0,
    GP_FIX_LENGTHSCALE = 1u << 1,
    GP_FIX_ALPHA = 1u << 2,
    GP_FIX_PERIOD = 1u << 3,
    GP_FIX_ALL = 0xFu
};

typedef struct gp_kernel {
    gp_kernel_type type;
    size_t input_dim;       /* dimension of the points the kernel is given */
    size_t *active_dims;    /* owned; NULL means all input_dim dimensions */
    size_t n_active;        /* dimensions seen (= input_dim when active_dims is NULL) */
    int ard;                /* one lengthscale per seen dimension */
    double log_variance;
    double *log_lengthscale; /* owned; n_lengthscale entries */
    size_t n_lengthscale;    /* 0 for linear/white, 1 without ARD or for periodic */
    double log_alpha;        /* rq only */
    double log_period;       /* periodic only */
    unsigned fixed;          /* GP_FIX_* bits */
    struct gp_kernel **terms; /* owned; sum/product only */
    size_t n_terms;
} gp_kernel;

/* Name <-> type ("rbf", "matern32", "sum", ...). Returns -1 / NULL when unknown. */
int gp_kernel_type_from_name(const char *name);
const char *gp_kernel_type_name(gp_kernel_type type);

/* New leaf with every hyperparameter 1 (log 0). active_dims (n_active entries,
 * each < input_dim, no repeats) is copied; pass NULL/0 for all dimensions. */
int gp_kernel_leaf(gp_kernel **out, gp_kernel_type type, size_t input_dim, int ard,
                   const size_t *active_dims, size_t n_active, gp_error *err);
/* New sum/product taking ownership of terms (n_terms >= 1, all with the same
 * input_dim). On failure the terms are still the caller's. */
int gp_kernel_composite(gp_kernel **out, gp_kernel_type type, gp_kernel **terms, size_t n_terms,
                        gp_error *err);
int gp_kernel_copy(gp_kernel **out, const gp_kernel *k, gp_error *err);
void gp_kernel_free(gp_kernel *k);

/* Flat parameter vector: leaves in depth-first order, each contributing
 * log_variance, log_lengthscale[0..n_lengthscale), log_alpha (rq), log_period
 * (periodic). All parameters, fixed ones included. */
size_t gp_kernel_n_params(const gp_kernel *k);
void gp_kernel_get_params(const gp_kernel *k, double *theta);
void gp_kernel_set_params(gp_kernel *k, const double *theta);
/* free[i] = 1 when parameter i is optimised, 0 when fixed. */
void gp_kernel_free_mask(const gp_kernel *k, unsigned char *free_mask);
/* Path-like name of parameter i, e.g. "terms[1].lengthscale[2]", "variance", "alpha". */
void gp_kernel_param_name(const gp_kernel *k, size_t i, char *buf, size_t len);

/* k(x, z); same = 1 when x and z are the same point (see `white`). */
double gp_kernel_eval(const gp_kernel *k, const double *x, const double *z, int same);
/* k(x, z) returned, and d k / d theta_i (log space) for every parameter written
 * to grad (gp_kernel_n_params entries). */
double gp_kernel_eval_grad(const gp_kernel *k, const double *x, const double *z, int same,
                           double *grad);
/* k(x, x). */
double gp_kernel_diag(const gp_kernel *k, const double *x);

/* Gram blocks. Points are the columns of column-major matrices: X is
 * input_dim x n, Z is input_dim x m.
 * K (n x m, leading dimension ldk) = k(X_i, Z_j), never `same`. */
void gp_kernel_cross(const gp_kernel *k, const double *X, size_t n, const double *Z, size_t m,
                     double *K, size_t ldk);
/* Points prepared once for many cross-covariance calls: each leaf's scaled
 * view of X (d x n, point-major), so that a prediction does not rescale the
 * training set every time. X must outlive the object; it is valid only for the
 * kernel (and parameter values) it was made with. Results are bit-identical to
 * gp_kernel_cross. */
typedef struct gp_kernel_points gp_kernel_points;
int gp_kernel_points_new(const gp_kernel *k, const double *X, size_t n, gp_kernel_points **out,
                         gp_error *err);
void gp_kernel_points_free(gp_kernel_points *p);
/* K (n x m) = k(X_i, Z_j) for the prepared X. */
void gp_kernel_cross_points(const gp_kernel *k, const gp_kernel_points *Xp, const double *Z,
                            size_t m, double *K, size_t ldk);
/* K (n x n) = k(X_i, X_j), full symmetric, `same` on the diagonal. */
void gp_kernel_gram(const gp_kernel *k, const double *X, size_t n, double *K, size_t ldk);
/* The same, polling cancel (may be NULL) before every column of every task and
 * every band of the mirror copy: GP_OK, or GP_ECANCELLED with K unfinished. */
int gp_kernel_gram_cancellable(const gp_kernel *k, const double *X, size_t n, double *K,
                               size_t ldk, const gp_cancel *cancel);
/* grad_i = sum_{a,b} W_ab d k(X_a, X_b) / d theta_i for symmetric W (n x n): the
 * contraction tr(W dK/dtheta) that the LML gradient needs, computed pair by pair
 * so that no dK/dtheta matrix is ever stored. Only W's lower triangle (with
 * diagonal) is read. grad has gp_kernel_n_params entries. */
void gp_kernel_gram_grad_contract(const gp_kernel *k, const double *X, size_t n, const double *W,
                                  size_t ldw, double *grad);
/* The same, polling cancel before every column: GP_OK, or GP_ECANCELLED with
 * grad meaningless. */
int gp_kernel_gram_grad_contract_cancellable(const gp_kernel *k, const double *X, size_t n,
                                             const double *W, size_t ldw, double *grad,
                                             const gp_cancel *cancel);

/* The cross-covariance contraction the inducing-point bounds need (sgpr,
 * renyi): for one stationary leaf (rbf, matern12/32/52, rq; any lengthscales
 * and active_dims) and W (n x m, leading dimension ldw),
 *   grad_p  = sum_{i,j} W_ij d k(X_i, Z_j) / d theta_p        (log space)
 *   gz[:,j] = sum_i     W_ij d k(X_i, Z_j) / d Z_j            (input_dim x m)
 * X is input_dim x n and Z input_dim x m, point-major; gz may be NULL. The
 * results overwrite grad (gp_kernel_n_params entries) and gz. Pairs are
 * never `same`. For a symmetric W over (Z, Z) the Z-gradient of
 * sum_ij W_ij k(Z_i, Z_j) is 2 gz (both arguments move). Column ranges run
 * through gp_parallel_for and are summed in a fixed order, so the result is
 * the same for any thread count. GP_EUNSUPPORTED for other kernels,
 * GP_ENOMEM when the scaled points cannot be allocated. */
int gp_kernel_cross_grad_contract(const gp_kernel *k, const double *X, size_t n, const double *Z,
                                  size_t m, const double *W, size_t ldw, double *grad,
                                  double *gz, gp_error *err);

/* The same contraction for a block stored the other way round whose kernel
 * values are known: K and W are m x n (leading dimensions ldk, ldw), with
 * K[j + i ldk] = k(Z_j, X_i) (as gp_kernel_cross(k, Z, m, X, n, K, ldk)
 * writes it) and W[j + i ldw] the weight of that pair. The derivative
 * factors are taken from the known values (rbf needs no exp at all), which
 * is where the inducing-point bounds spend their kernel time. Same kernels,
 * outputs and determinism as gp_kernel_cross_grad_contract (tasks over
 * ranges of X, each with its own gz, summed in task order). */
int gp_kernel_cross_grad_contract_known(const gp_kernel *k, const double *X, size_t n,
                                        const double *Z, size_t m, const double *K, size_t ldk,
                                        const double *W, size_t ldw, double *grad, double *gz,
                                        gp_error *err);

/* Self-describing flat encoding of the whole tree (structure, active dims, fixed
 * bits and parameter values) as doubles, for export; decoding gives back an
 * identical kernel. gp_kernel_encode writes nothing when out is NULL and
 * returns the length needed. */
size_t gp_kernel_encode(const gp_kernel *k, double *out);
int gp_kernel_decode(const double *code, size_t len, gp_kernel **out, gp_error *err);

/* ---- spectral densities (stationary kernels with a known spectral measure) ----
 * For inputs scaled by their lengthscales (x~ = x / l), the normalised spectral
 * density (k(tau) = E_omega[cos(omega^T tau)] with k(0) = 1) of
 *   rbf:       N(0, I_d)
 *   matern-nu: multivariate Student-t, 2 nu degrees of freedom, unit scale:
 *              p(omega) ~ (2 nu + ||omega||^2)^(-(nu + d/2))
 * (one joint d-dimensional density, not a product of 1-D densities). */
typedef enum gp_spectral_family {
    GP_SPECTRAL_NONE = 0,
    GP_SPECTRAL_GAUSSIAN,
    GP_SPECTRAL_STUDENT_T
} gp_spectral_family;

typedef struct gp_spectral {
    gp_spectral_family family;
    double nu; /* Matern smoothness (0.5, 1.5, 2.5); 0 for the Gaussian */
} gp_spectral;

/* The spectral density of a leaf kernel type; GP_EUNSUPPORTED for the others. */
int gp_kernel_spectral(gp_kernel_type type, gp_spectral *out, gp_error *err);
/* count draws of omega in R^d, written row-wise into the column-major count x d
 * matrix out. Gaussian: z ~ N(0, I); Student-t: z * sqrt(2nu / u), u ~ chi2(2nu). */
void gp_spectral_sample(const gp_spectral *s, size_t d, size_t count, gp_rng *rng, double *out);
/* Normalised log density at one frequency omega (length d). */
double gp_spectral_log_density(const gp_spectral *s, size_t d, const double *omega);
/* Score grad_omega log p(omega) into score (length d). */
void gp_spectral_score(const gp_spectral *s, size_t d, const double *omega, double *score);

#endif
