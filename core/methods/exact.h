/* gpserve core: exact GP regression (method "exact").
 *
 * Hyperparameters maximise the log marginal likelihood (LML) with analytic
 * gradients and L-BFGS, with optional seeded random restarts. The fit caches the
 * Cholesky factor L of K + s2 I (+ jitter) and alpha = (K + s2 I)^{-1} y, so a
 * prediction is a kernel row plus a triangular solve. Memory: one N x N matrix
 * during the fit and one (the factor) per fitted model; N is capped by
 * max_train_points (default 20000). */
#ifndef GP_EXACT_H
#define GP_EXACT_H

#include <stddef.h>

#include "core/model/model.h"

extern const gp_method gp_method_exact;

#endif
