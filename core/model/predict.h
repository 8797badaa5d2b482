/* Predictions and samples of a model (predict.c): the public calls are
 * declared in model.h; this header holds what the rest of core/model
 * (observe) shares with them. */
#ifndef GP_MODEL_PREDICT_H
#define GP_MODEL_PREDICT_H

#include <stddef.h>

#include "core/base/error.h"
#include "core/model/model.h"

/* GP_EDATA naming the first bad cell of the m points X (d columns, the
 * model's input encoding): a dimension mismatch, a non-finite value, a
 * value beyond the working limit, or what the input kind refuses. */
int gp_model_check_inputs(const gp_model *model, const double *X, size_t m, size_t d,
                          gp_error *err);
/* The mean function on the m points X (caller's units) into shift:
 * y_scale h(x_w)^T beta, what predictions add back and observe subtracts. */
void gp_model_mean_shift(const gp_model *model, const double *X, size_t m, double *shift);

#endif
