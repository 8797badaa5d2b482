/* The common part of a model's state (persist.c): gp_model_export and
 * gp_model_import are declared in model.h; this header holds what the rest
 * of core/model shares with them. */
#ifndef GP_MODEL_PERSIST_H
#define GP_MODEL_PERSIST_H

#include "core/base/error.h"
#include "core/model/model.h"

/* What a non-Gaussian model's predictions need beside the method's state
 * (its Gauss-Hermite rule), computed once by a fit and by an import rather
 * than by every prediction. */
int gp_model_prepare_likelihood(gp_model *model, gp_error *err);

#endif
