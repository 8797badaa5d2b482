/* See scores.h. */
#include "bench/support/scores.h"

#include <math.h>
#include <stdlib.h>

#define TWO_PI 6.283185307179586476925286766559

int gp_test_scores_compute(const gp_model *model, const gp_dataset *test, gp_test_scores *s,
                           gp_error *err)
{
    double *mean = malloc(test->n * sizeof(double));
    double *var = malloc(test->n * sizeof(double));
    if (mean == NULL || var == NULL) {
        free(mean);
        free(var);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    gp_predict_request pr = {.X = test->X, .m = test->n, .d = test->d, .include_noise = 1};
    gp_prediction out = {.mean = mean, .variance = var};
    int rc = gp_model_predict(model, &pr, &out, err);
    if (rc == GP_OK) {
        double se = 0.0, nl = 0.0;
        for (size_t i = 0; i < test->n; i++) {
            double e = test->y[i] - mean[i];
            se += e * e;
            nl += 0.5 * log(TWO_PI * var[i]) + e * e / (2.0 * var[i]);
        }
        s->rmse = sqrt(se / (double)test->n);
        s->nlpd = nl / (double)test->n;
        s->clamped = out.clamped;
    }
    free(mean);
    free(var);
    return rc;
}
