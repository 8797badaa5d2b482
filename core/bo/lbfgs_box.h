/* gpserve core: L-BFGS on a box (minimises; only the suggestion engine uses it).
 *
 * Projected L-BFGS: at each iterate the variables at a bound whose gradient
 * pushes outwards are held (the active set); the quasi-Newton direction of
 * the other ones (two-loop recursion over the stored pairs, the held
 * components zeroed; steepest descent when that is no descent direction)
 * is searched along the projected path P(x + a d) by backtracking from a
 * step of at most max_step in any coordinate until the Armijo condition
 * f(P(x + a d)) <= f(x) + c1 g^T (P(x + a d) - x) holds. A pair (s, y) is
 * stored when s^T y > 1e-10 |s| |y|. It stops when the projected gradient
 * max_j |P(x_j - g_j) - x_j| is at most grad_tol max(1, |f|), the
 * objective changed by at most rel_tol relatively, the line search found no
 * decrease, or a limit was reached. Deterministic: the same start gives the
 * same bits. */
#ifndef GP_BO_LBFGS_BOX_H
#define GP_BO_LBFGS_BOX_H

#include <stddef.h>

#include "core/base/error.h"
#include "core/optim/optim.h"

/* x (n entries) is clamped into [lo, hi] and updated in place to the best
 * point found; lo/hi NULL mean 0 and 1 (the unit cube of core/bo/space.h).
 * opt: max_iterations, memory, grad_tol, rel_tol, max_evaluations and
 * cancel as for gp_lbfgs_minimize (zeroed fields: its defaults); max_step
 * <= 0 means 0.25. Returns GP_OK (see result), GP_ECANCELLED, GP_ENOMEM, or
 * GP_ENOTPD when the objective is not finite at the start. */
int gp_lbfgs_minimize_box(gp_objective_fn fn, void *ctx, double *x, size_t n, const double *lo,
                          const double *hi, const gp_lbfgs_options *opt, double max_step,
                          gp_optim_result *result, gp_error *err);

#endif
