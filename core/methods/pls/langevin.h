/* pls: the particle samplers, projected unadjusted and Metropolis-adjusted
 * Langevin steps (§5.2 A4 (iii)). */
#ifndef GP_METHODS_PLS_LANGEVIN_H
#define GP_METHODS_PLS_LANGEVIN_H

#include "core/methods/pls/internal.h"

double pls_mean_of(const double *x, size_t n);
/* The J particles of the potential V(a) = -log p(y | s Phi^T a + off) + |a|^2 / 2
 * into im->A; off (n, NULL: none) is a mean's latent offset h(x)^T beta. */
int pls_sample_particles(pls_impl *im, const gp_lik *lik, const double *Phi, size_t n,
                         const double *y, const double *off, const pls_settings *set,
                         const gp_fit_request *req, int iteration_base, int max_total,
                         sampler_out *so, gp_error *err);

#endif
