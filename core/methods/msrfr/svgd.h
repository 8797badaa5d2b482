/* The SVGD run of method "msrfr": what core/methods/msrfr/svgd.c shares with the other files of
 * the method. */
#ifndef GP_METHODS_MSRFR_SVGD_H
#define GP_METHODS_MSRFR_SVGD_H

#include "core/methods/msrfr/internal.h"

const char *msrfr_bandwidth_name(int bw);

int msrfr_fit_rows(const gp_fit_request *req, const msrfr_settings *set, const gp_spectral *sp,
                   const double *X, const double *y, size_t n, gp_kernel *k, msrfr_impl *im,
                   const progress_span *span, const msrfr_mean *mean, run_result *res,
                   int *iterations, gp_error *err);

#endif
