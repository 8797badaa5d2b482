/* gpserve core: mean functions of a Gaussian-likelihood model,
 *   m(x) = b0            (constant)
 *   m(x) = b0 + w^T x    (linear),
 * in the model's working units: x standardised (x - x_mean) / x_scale, and
 * m added to the latent f in standardised targets, so a prediction in the
 * caller's units is y_mean + y_scale (f(x_w) + h(x_w)^T beta) with the basis
 * row h(x_w) = (1, x_w). The coefficients beta (1 or 1 + d) are the model's
 * (gp_model.mean_coef); how a method learns them is its own (exact and sgpr
 * profile them by generalised least squares inside the objective,
 * docs/design/numerics.md "Mean functions"). A zero mean has no basis and
 * no coefficients: every model fitted without one is what it always was. */
#ifndef GP_MODEL_MEAN_H
#define GP_MODEL_MEAN_H

#include <stddef.h>

#include "core/base/error.h"
#include "core/base/state.h"

typedef enum gp_mean_type { GP_MEAN_ZERO = 0, GP_MEAN_CONSTANT, GP_MEAN_LINEAR } gp_mean_type;
#define GP_MEAN_COUNT 3

/* "zero", "constant", "linear"; NULL for a value out of range. */
const char *gp_mean_name(gp_mean_type t);
/* 0 and *t set, or -1 for an unknown name. */
int gp_mean_from_name(const char *name, gp_mean_type *t);
/* The coefficient count p: 0, 1 or 1 + d. */
size_t gp_mean_n_coef(gp_mean_type t, size_t d);

/* H (n x p, column-major) of the n working-unit points P (point-major,
 * d x n): column 0 all ones, column 1 + j the j-th coordinate. */
void gp_mean_basis(gp_mean_type t, const double *P, size_t d, size_t n, double *H);
/* h(x)^T beta at one working-unit point x (d coordinates). */
double gp_mean_at(gp_mean_type t, const double *beta, const double *x, size_t d);
/* out[i] += scale * h(x_i)^T beta for the n points of X (column-major n x d,
 * the caller's units) standardised by x_mean / x_scale on the fly. */
void gp_mean_add_original(gp_mean_type t, const double *beta, const double *X, size_t n,
                          size_t d, const double *x_mean, const double *x_scale, double scale,
                          double *out);
/* The mean in the caller's units, y = c0 + sum_j c_j x_j (c: p entries):
 * c0 = y_mean + y_scale (b0 - sum_j w_j x_mean_j / x_scale_j),
 * c_j = y_scale w_j / x_scale_j. */
void gp_mean_original(gp_mean_type t, const double *beta, size_t d, const double *x_mean,
                      const double *x_scale, double y_mean, double y_scale, double *c);

/* The generalised least-squares coefficients from the normal equations
 * G beta = b (G p x p symmetric positive semi-definite, lower triangle
 * read, overwritten): a relative ridge of 1e-10 of G's largest diagonal
 * keeps a basis column that vanishes (a constant input) at coefficient 0
 * instead of failing. GP_ENOTPD when even that cannot be factorised. */
int gp_mean_solve_normal(double *G, double *b, size_t p, gp_error *err);

/* State arrays "mean_type" and "mean_coef", written only for a non-zero
 * mean (zero-mean states keep their bytes); import reads them back (absent:
 * zero mean, *beta NULL), checking the count against d. */
int gp_mean_export(gp_mean_type t, const double *beta, size_t d, gp_state *st, gp_error *err);
int gp_mean_import(const gp_state *st, size_t d, gp_mean_type *t, double **beta, gp_error *err);

#endif
