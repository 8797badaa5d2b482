/* The bound of method "hkd": what core/methods/hkd/bound.c shares with the other files of the
 * method. */
#ifndef GP_METHODS_HKD_BOUND_H
#define GP_METHODS_HKD_BOUND_H

#include "core/methods/hkd/internal.h"

void hkd_work_free(hkd_work *w);

int hkd_work_alloc(hkd_work *w, const hkd_impl *im, size_t n, double cache_bytes, int grad,
                   gp_error *err);
/* The buffers of a mean's basis of p columns (none for p 0), after hkd_work_alloc. */
int hkd_work_alloc_mean(hkd_work *w, const hkd_impl *im, size_t p, gp_error *err);

void hkd_features_from(const hkd_impl *im, const double *E, size_t b, double *Phi, size_t ldp,
                       double *K);

const double *hkd_chunk_features(const hkd_impl *im, const hkd_data *data, hkd_work *w,
                                 size_t start, size_t b, int with_kernel, size_t *ldp);

int hkd_evaluate(hkd_impl *im, const hkd_data *data, hkd_work *w, double s2, double tol,
                 int max_it, hkd_terms *terms, gp_error *err);

#endif
