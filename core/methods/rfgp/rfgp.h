/* gpserve core: the random-feature GP that learns online (method "rfgp",
 * docs/methods/kernel-jit-online.md: KJIT's streaming Bayesian linear
 * regression on random Fourier features, with an uncertainty gate).
 *
 * The model is Bayesian linear regression on D features psi(x) (§2, §7):
 * w ~ N(0, s0 I) per output, s0 the rbf kernel's variance, y = w^T psi(x) + e
 * with noise s (the request's noise variance, 1e-4 in working units when not
 * given: KJIT's value). The precision P = Psi Psi^T / s + I / s0 is shared by
 * the p outputs and kept as its lower Cholesky factor L (packed), with the
 * whitened right-hand side z = L^{-1} b (D x p, b = Psi Y / s) instead of the
 * posterior mean: a new row (psi / sd, y / sd) is rotated into [L | z] by
 * Givens rotations (the recursive-least-squares QR update, O(D^2 + D p), never
 * Sherman-Morrison, pitfall 4), and a batch of rows at or above
 * `refactor_batch` re-factorises P (dsyrk + the blocked Cholesky) from b.
 * Predict: v = L^{-1} psi, mean v^T z, latent variance v^T v, plus s for y.
 *
 * Inputs: points (one stage of random Fourier features of the rbf kernel), or
 * distributions (option "input": gaussian, samples, messages; the two-stage
 * features of §3, core/methods/rfgp/embed.h).
 *
 * Warm-up (§4, pitfall 15): the first `warmup` rows are only buffered; when
 * the buffer is full the widths are chosen (median heuristic, leave-one-out,
 * type-II ML or fixed), the features drawn from the fit's seed and kept as
 * arrays (pitfall 10), the standardisation fixed from the buffer, the buffer
 * fitted as a batch, and the model goes online. Rows beyond the warm-up,
 * at fit or by gp_model_observe, are applied the same way.
 *
 * The gate (§2, §8.2, §8.13): a prediction asks for the true answer
 * (ask_oracle) when log var_y >= tau_j for some output j, tau_j from
 * `gate_threshold` (absolute, original units) or relative: log(s s_j^2) +
 * log(1 + gate_kappa). */
#ifndef GP_RFGP_H
#define GP_RFGP_H

#include "core/model/model.h"

extern const gp_method gp_method_rfgp;

/* For the gradient tests: the primal log marginal likelihood (working units,
 * summed over the outputs) of the rows of req taken as a warm-up buffer, with
 * the unit draws of req->seed, at x = [log widths (d_k), log gamma (two stages
 * only), log s0, log s], and its gradient g (same layout; NULL: none). */
int gp_rfgp_primal_lml(const gp_fit_request *req, const double *x, double *lml, double *g,
                       gp_error *err);

#endif
