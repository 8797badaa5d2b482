/* Method "ssgp" over rows read in chunks (core/features/rff_rows.h): what
 * core/methods/ssgp/rows.c shares with the fit. */
#ifndef GP_METHODS_SSGP_ROWS_H
#define GP_METHODS_SSGP_ROWS_H

#include "core/features/rff_rows.h"
#include "core/methods/ssgp/internal.h"
#include "core/model/rows_sync.h"

/* What a fit over rows does not take: a mean other than zero (422 naming
 * "mean"). */
int ssgp_rows_refused(const gp_fit_request *req, gp_error *err);

/* The population variance of each working input the kernel sees (columns
 * dims[0 .. d) standardised by units) over every row of every process: two
 * passes, one reduction of d numbers each (gp_rows_column_moments); what
 * `auto` reads the spread from (gp_features_spread_var). */
int ssgp_rows_column_var(gp_rows_sync *sync, const gp_model *units, const size_t *dims,
                         size_t d, double *var, gp_error *err);

/* The impl's Phi^T y and y^T y (for observe) from the last evaluation of
 * stream, the one at the fitted values. */
void ssgp_rows_cache_targets(ssgp_impl *im, const gp_rff_rows *stream);

#endif
