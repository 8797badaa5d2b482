/* Predict, sample and parts of a fitted "hkd" model: what core/methods/hkd/predict.c shares with
 * the other files of the method. */
#ifndef GP_METHODS_HKD_PREDICT_H
#define GP_METHODS_HKD_PREDICT_H

#include "core/methods/hkd/internal.h"

int hkd_predict(const gp_model *model, const gp_predict_request *req, gp_prediction *out,
                gp_error *err);

int hkd_sample(const gp_model *model, const gp_sample_request *req, double *samples,
               gp_error *err);

size_t hkd_parts(const gp_model *model);

void hkd_part_name(const gp_model *model, size_t i, char *buf, size_t len);

#endif
