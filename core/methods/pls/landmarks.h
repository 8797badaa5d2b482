/* pls: landmarks, the eigenbasis of K_ZZ and the features (§5.2 A2-A3). */
#ifndef GP_METHODS_PLS_LANDMARKS_H
#define GP_METHODS_PLS_LANDMARKS_H

#include "core/methods/pls/internal.h"

/* A2-A3: landmarks (greedy under the fitted kernel, or k-means snapped to
 * the data / random, seeded by the fit seed), the eigenbasis, Phi_X. */
int pls_build_basis(gp_model *model, const pls_settings *set, fit_data *D, pls_impl **out,
                    gp_error *err);
/* The [D] amplitude (pls_laplace_amplitude) on the first basis, then landmarks,
 * eigenbasis and features again under the rescaled kernel (the greedy
 * order is scale-free; the features are rebuilt rather than rescaled so a
 * refit from the stored kernel gives the same numbers). */
int pls_amplitude_rebuild(gp_model *model, const pls_settings *set, const gp_lik *lik, fit_data *D,
                          pls_impl **im, double *log_c, gp_error *err);

#endif
