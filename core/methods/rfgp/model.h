/* rfgp: the model's state (the posterior, the feature map), predict and sample (model.c). */
#ifndef GP_METHODS_RFGP_MODEL_H
#define GP_METHODS_RFGP_MODEL_H

#include "core/methods/rfgp/internal.h"

size_t rfgp_packed_len(size_t D);
int rfgp_post_alloc(const rfgp_cfg *c, post *q, gp_error *err);
void rfgp_post_free(post *q);
void rfgp_post_prior(const rfgp_cfg *c, post *q, double s0);
int rfgp_map_alloc(const rfgp_cfg *c, fmap *m, gp_error *err);
void rfgp_map_free(fmap *m);
int rfgp_impl_new(const rfgp_cfg *c, rfgp_impl **out, gp_error *err);
void rfgp_impl_free(void *p);
void rfgp_embed_of(const rfgp_cfg *c, const gp_input_spec *in, const fmap *m, gp_embed *e);
void rfgp_set_thresholds(const gp_model *model, rfgp_impl *im);
int rfgp_predict(const gp_model *model, const gp_predict_request *req, gp_prediction *out,
                 gp_error *err);
int rfgp_sample(const gp_model *model, const gp_sample_request *req, double *samples,
                gp_error *err);

#endif
