/* Benchmark support: test-set scores of a fitted model.
 *
 * RMSE and mean NLPD per test point in original units, the NLPD from the
 * Gaussian with the observation variance (include_noise = 1). Shared by the
 * regression benchmarks so that every method is scored the same way. */
#ifndef GP_BENCH_SCORES_H
#define GP_BENCH_SCORES_H

#include <stddef.h>

#include "bench/support/dataset.h"
#include "core/base/error.h"
#include "core/model/model.h"

typedef struct gp_test_scores {
    double rmse, nlpd;
    size_t clamped; /* variances clamped at 0 by predict */
} gp_test_scores;

int gp_test_scores_compute(const gp_model *model, const gp_dataset *test, gp_test_scores *s,
                           gp_error *err);

#endif
