/* Helpers shared by the method tests (test_ssgp.c, test_sgpr.c): building a
 * fit request, fitting, predicting and reading a model's info, failing the
 * test with the error on the way. Header-only (static inline), as
 * api_testutil.h, so that nothing else links it; include after cmocka.h. */
#ifndef GP_METHOD_TESTUTIL_H
#define GP_METHOD_TESTUTIL_H

#include <stdio.h>
#include <string.h>

#include "core/model/model.h"

static inline void fit_request(gp_fit_request *req, const double *X, const double *y,
                               size_t n, size_t d, const gp_kernel *k,
                               const gp_option_value *opts, size_t n_opts)
{
    memset(req, 0, sizeof *req);
    req->X = X;
    req->y = y;
    req->n = n;
    req->d = d;
    req->kernel = k;
    req->standardize = 1;
    req->seed = 1;
    req->options = opts;
    req->n_options = n_opts;
}

static inline gp_model *fit_ok(const gp_method *m, const gp_fit_request *req, const char *what)
{
    gp_model *model = NULL;
    gp_error err;
    int rc = gp_model_fit(m, req, &model, &err);
    if (rc != GP_OK)
        fail_msg("%s: fit failed: %s (%s, field '%s')", what, err.message, gp_status_name(rc),
                 err.field);
    assert_non_null(model);
    return model;
}

static inline void predict_ok(const gp_model *model, const double *Xs, size_t m, size_t d,
                              int include_noise, double *mu, double *var, double *cov)
{
    gp_predict_request pr = {.X = Xs, .m = m, .d = d, .include_noise = include_noise,
                             .full_covariance = cov != NULL};
    gp_prediction out = {.mean = mu, .variance = var, .covariance = cov};
    gp_error err;
    int rc = gp_model_predict(model, &pr, &out, &err);
    if (rc != GP_OK)
        fail_msg("predict failed: %s (%s)", err.message, gp_status_name(rc));
}

static inline const gp_info_item *find_info(const gp_model *model, const char *key)
{
    for (size_t i = 0; i < model->diag.n_info && i < GP_MODEL_INFO_MAX; i++)
        if (model->diag.info[i].key && strcmp(model->diag.info[i].key, key) == 0)
            return &model->diag.info[i];
    return NULL;
}

/* Names coordinate i of the vector (kernel log-parameters, log s2, Z) that
 * the inducing-point gradient tests vary; np kernel parameters. */
static inline void name_theta_s2_z(const gp_kernel *k, size_t np, size_t i, char *buf, size_t len)
{
    if (i < np)
        gp_kernel_param_name(k, i, buf, len);
    else if (i == np)
        snprintf(buf, len, "log s2");
    else
        snprintf(buf, len, "Z[%zu]", i - np - 1);
}

#endif
