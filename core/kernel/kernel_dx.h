/* Gradients of a kernel with respect to its first input (kernel_dx.c): what
 * a posterior's gradient in x needs (gp_model_predict_grad, and through it
 * the acquisition optimiser of core/bo). Every leaf type, ARD, active_dims
 * and sum/product trees of any depth; x in the units the kernel reads (the
 * model's working units).
 *
 * With r_i = (x_i - z_i) / l_i over a leaf's seen dimensions and k(r^2):
 *   d k / d x_i = 2 (dk/dr^2) (x_i - z_i) / l_i^2         stationary leaves
 *   d k / d x_i = dk/dd (x_i - z_i) / d                    periodic (d = |x - z|)
 *   d k / d x_i = s2 z_i                                   linear
 *   0                                                      white (x is never z_i's point)
 * At x = z_i the stationary and periodic gradients are 0 (their limit).
 * matern12 (s2 exp(-r)) is not differentiable there: its gradient jumps
 * from -s2 to s2 along each direction, and 0 is returned (the mean of the
 * one-sided limits), which the values of an acquisition never see but a
 * line search landing on a training point exactly does.
 *
 * Kernel values are computed as gp_kernel_eval computes them, so kx[i] is
 * gp_kernel_eval(k, x, Z_i, 0) bit for bit. */
#ifndef GP_KERNEL_DX_H
#define GP_KERNEL_DX_H

#include <stddef.h>

#include "core/base/error.h"
#include "core/kernel/kernel.h"

/* kx[i] = k(x, Z_i) (never `same`) and dk[i + j lddk] = d k(x, Z_i) / d x_j
 * for the n points Z (input_dim x n, point-major) and every input dimension
 * j (dimensions no leaf sees get 0). kx may be NULL. GP_ENOMEM only (the
 * scratch of a tree: depth x input_dim doubles). */
int gp_kernel_cross_dx(const gp_kernel *k, const double *x, const double *Z, size_t n,
                       double *kx, double *dk, size_t lddk, gp_error *err);

/* The same contracted with c weight columns, without the n x input_dim
 * matrix: G[j + r input_dim] = sum_i W[i + r ldw] d k(x, Z_i) / d x_j
 * (G input_dim x c, overwritten). The sum over i runs in index order. */
int gp_kernel_cross_dx_contract(const gp_kernel *k, const double *x, const double *Z, size_t n,
                                const double *W, size_t ldw, size_t c, double *G,
                                gp_error *err);

/* k(x, x) (as gp_kernel_diag) into *kxx (may be NULL) and its gradient
 * g[j] = d k(x, x) / d x_j, both arguments moving: 0 for stationary,
 * periodic and white leaves, 2 s2 x_j for linear ones, through the tree's
 * sums and products. */
int gp_kernel_diag_dx(const gp_kernel *k, const double *x, double *kxx, double *g,
                      gp_error *err);

#endif
