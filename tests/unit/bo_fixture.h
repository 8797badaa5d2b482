/* Helpers shared by the suggestion engine's tests (test_bo_suggest.c,
 * test_bo_thompson.c): an exact model with a Matern 5/2 ARD kernel fitted on
 * encoded points, and the test functions. Header-only (static inline);
 * include after cmocka.h. */
#ifndef GP_BO_FIXTURE_H
#define GP_BO_FIXTURE_H

#include <math.h>
#include <stdlib.h>

#include "core/bo/space.h"
#include "core/methods/registry.h"
#include "core/model/model.h"

/* An exact (or `method`) model on n points U (D x n, point-major) and y,
 * Matern 5/2 with ARD, standardised, hyperparameters by the method's fit. */
static inline gp_model *bo_fit_method(const char *method, const double *U, const double *y,
                                      size_t n, size_t D, gp_kernel_type type)
{
    const gp_method *m = gp_method_find(method);
    assert_non_null(m);
    double *X = malloc(n * D * sizeof *X);
    assert_non_null(X);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < D; j++)
            X[i + n * j] = U[i * D + j];
    gp_kernel *k = NULL;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, type, D, 1, NULL, 0, &err), GP_OK);
    gp_fit_request req;
    memset(&req, 0, sizeof req);
    req.X = X, req.y = y, req.n = n, req.d = D, req.kernel = k;
    req.standardize = 1;
    req.seed = 1;
    gp_model *model = NULL;
    int rc = gp_model_fit(m, &req, &model, &err);
    if (rc != GP_OK)
        fail_msg("fit failed: %s (%s)", err.message, gp_status_name(rc));
    gp_kernel_free(k);
    free(X);
    return model;
}

static inline gp_model *bo_fit(const double *U, const double *y, size_t n, size_t D)
{
    return bo_fit_method("exact", U, y, n, D, GP_KERNEL_MATERN52);
}

/* Branin on [-5, 10] x [0, 15]; its minimum is 0.397887357729739. */
#define BRANIN_MIN 0.397887357729739
static inline double branin(const double *x)
{
    const double pi = 3.14159265358979323846;
    double b = 5.1 / (4 * pi * pi), c = 5 / pi, t = 1 / (8 * pi);
    double a = x[1] - b * x[0] * x[0] + c * x[0] - 6;
    return a * a + 10 * (1 - t) * cos(x[0]) + 10;
}

static const gp_bo_param BRANIN_PARAMS[] = {{GP_BO_DOUBLE, -5.0, 10.0, 0, 0},
                                            {GP_BO_DOUBLE, 0.0, 15.0, 0, 0}};
static const gp_bo_space BRANIN_SPACE = {2, BRANIN_PARAMS};

static inline double branin_u(const double *u)
{
    double x[2];
    gp_bo_decode(&BRANIN_SPACE, u, x);
    return branin(x);
}

#endif
