/* Mean functions: see core/model/mean.h. */
#include "core/model/mean.h"

#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/linalg/linalg.h"

static const char *const mean_names[GP_MEAN_COUNT] = {"zero", "constant", "linear"};

const char *gp_mean_name(gp_mean_type t)
{
    return (unsigned)t < GP_MEAN_COUNT ? mean_names[t] : NULL;
}

int gp_mean_from_name(const char *name, gp_mean_type *t)
{
    for (int i = 0; name && i < GP_MEAN_COUNT; i++)
        if (strcmp(name, mean_names[i]) == 0) {
            *t = (gp_mean_type)i;
            return 0;
        }
    return -1;
}

size_t gp_mean_n_coef(gp_mean_type t, size_t d)
{
    return t == GP_MEAN_CONSTANT ? 1 : t == GP_MEAN_LINEAR ? 1 + d : 0;
}

void gp_mean_basis(gp_mean_type t, const double *P, size_t d, size_t n, double *H)
{
    if (t == GP_MEAN_ZERO)
        return;
    for (size_t i = 0; i < n; i++)
        H[i] = 1.0;
    if (t == GP_MEAN_LINEAR)
        for (size_t j = 0; j < d; j++)
            for (size_t i = 0; i < n; i++)
                H[(1 + j) * n + i] = P[i * d + j];
}

double gp_mean_at(gp_mean_type t, const double *beta, const double *x, size_t d)
{
    if (t == GP_MEAN_ZERO)
        return 0.0;
    double m = beta[0];
    if (t == GP_MEAN_LINEAR)
        for (size_t j = 0; j < d; j++)
            m += beta[1 + j] * x[j];
    return m;
}

void gp_mean_add_original(gp_mean_type t, const double *beta, const double *X, size_t n,
                          size_t d, const double *x_mean, const double *x_scale, double scale,
                          double *out)
{
    if (t == GP_MEAN_ZERO)
        return;
    for (size_t i = 0; i < n; i++) {
        double m = beta[0];
        if (t == GP_MEAN_LINEAR)
            for (size_t j = 0; j < d; j++)
                m += beta[1 + j] * ((X[j * n + i] - x_mean[j]) / x_scale[j]);
        out[i] += scale * m;
    }
}

void gp_mean_original(gp_mean_type t, const double *beta, size_t d, const double *x_mean,
                      const double *x_scale, double y_mean, double y_scale, double *c)
{
    if (t == GP_MEAN_ZERO)
        return;
    double b0 = beta[0];
    if (t == GP_MEAN_LINEAR)
        for (size_t j = 0; j < d; j++) {
            b0 -= beta[1 + j] * x_mean[j] / x_scale[j];
            c[1 + j] = y_scale * beta[1 + j] / x_scale[j];
        }
    c[0] = y_mean + y_scale * b0;
}

int gp_mean_solve_normal(double *G, double *b, size_t p, gp_error *err)
{
    double top = 0.0;
    for (size_t i = 0; i < p; i++)
        top = fmax(top, G[i * p + i]);
    double ridge = 1e-10 * top + 1e-300;
    for (size_t i = 0; i < p; i++)
        G[i * p + i] += ridge;
    if (!isfinite(top) ||
        LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)p, G, (lapack_int)p) != 0 ||
        LAPACKE_dpotrs(LAPACK_COL_MAJOR, 'L', (lapack_int)p, 1, G, (lapack_int)p, b,
                       (lapack_int)p) != 0)
        return gp_error_set(err, GP_ENOTPD, "mean",
                            "the mean's normal equations are not positive definite");
    return GP_OK;
}

int gp_mean_export(gp_mean_type t, const double *beta, size_t d, gp_state *st, gp_error *err)
{
    if (t == GP_MEAN_ZERO)
        return GP_OK;
    int rc = gp_state_put_scalar(st, "mean_type", (double)t, err);
    return rc ? rc : gp_state_put(st, "mean_coef", gp_mean_n_coef(t, d), 1, beta, err);
}

int gp_mean_import(const gp_state *st, size_t d, gp_mean_type *t, double **beta, gp_error *err)
{
    *t = GP_MEAN_ZERO;
    *beta = NULL;
    if (gp_state_find(st, "mean_type") == NULL)
        return GP_OK;
    double v;
    const double *c;
    int rc = gp_state_get_scalar(st, "mean_type", &v, err);
    if (rc == GP_OK && !(v == GP_MEAN_CONSTANT || v == GP_MEAN_LINEAR))
        rc = gp_error_set(err, GP_EDATA, "mean_type", "unknown mean type %g", v);
    size_t p = rc ? 0 : gp_mean_n_coef((gp_mean_type)v, d);
    if (rc == GP_OK)
        rc = gp_state_get(st, "mean_coef", p, 1, &c, err);
    if (rc == GP_OK && !gp_all_finite(c, p, NULL))
        rc = gp_error_set(err, GP_EDATA, "mean_coef", "corrupt mean coefficients");
    if (rc == GP_OK && (*beta = gp_alloc_doubles(p, err)) == NULL)
        rc = GP_ENOMEM;
    if (rc)
        return rc;
    memcpy(*beta, c, p * sizeof *c);
    *t = (gp_mean_type)v;
    return GP_OK;
}
