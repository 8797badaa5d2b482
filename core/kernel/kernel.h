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
 * several. Core computes it on any number (the scikit-learn fixtures check
 * that form, and a stored model decodes as it was); the API refuses a fit
 * whose periodic leaf sees more than one column (api/kernel_json.c), and a
 * product of one-column periodic leaves is the positive definite form over
 * several inputs.
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

/* The Gram and cross matrices and their gradient contractions: kernel_gram.h,
 * included here. The flat encoding: kernel_codec.h; spectral densities:
 * kernel_spectral.h. */
#include "core/kernel/kernel_gram.h"

#endif
