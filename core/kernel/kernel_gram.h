/* Kernel matrices of many pairs (kernel_gram.c): Gram and cross-covariance
 * blocks, points prepared for many cross blocks, and the contractions of their
 * gradients. core/kernel/kernel.h includes this header, so its callers see
 * these too; the kernel itself is declared there (here only by name). */
#ifndef GP_KERNEL_GRAM_H
#define GP_KERNEL_GRAM_H

#include <stddef.h>

#include "core/base/cancel.h"
#include "core/base/error.h"

typedef struct gp_kernel gp_kernel;

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

#endif
