/* gpserve core: fantasies of the suggestion engine (kriging believer).
 *
 * Points that are pending (active trials) or already chosen in a batch are
 * told to a copy of each model as observations at the model's own posterior
 * mean there (Ginsbourger et al. 2010, "kriging believer"): the posterior
 * mean stays what it was, and the variance near those points shrinks, so the
 * next point goes elsewhere. Told together or one by one gives the same
 * model (a fantasy at the mean moves no other mean). */
#ifndef GP_BO_FANTASY_H
#define GP_BO_FANTASY_H

#include <stddef.h>

#include "core/base/error.h"
#include "core/model/model.h"

/* A copy of model (gp_model_export then gp_model_import: every number the
 * model holds), *out owned by the caller (gp_model_free). */
int gp_bo_model_copy(const gp_model *model, gp_model **out, gp_error *err);

/* Observe the k points U (input_dim x k, point-major) at model's posterior
 * mean (gp_model_predict_grad) with gp_model_observe; the means into
 * believed (k entries, may be NULL). GP_EUNSUPPORTED naming "model.method"
 * for a method that does not update online. */
int gp_bo_observe_believed(gp_model *model, const double *U, size_t k, double *believed,
                           gp_error *err);

/* The same targets for the caller: model's posterior mean at the k points
 * into mean (k entries). */
int gp_bo_posterior_means(const gp_model *model, const double *U, size_t k, double *mean,
                          gp_error *err);

#endif
