/* gpserve core: the search space's encoding (see space.h). */
#include "core/bo/space.h"

#include <math.h>
#include <stdio.h>

/* Integer values and bounds must be exact integers of a double (|v| < 2^53). */
#define INTEGER_LIMIT 9007199254740992.0

size_t gp_bo_space_dim(const gp_bo_space *s)
{
    size_t D = 0;
    for (size_t i = 0; i < s->n_params; i++)
        D += s->params[i].type == GP_BO_CATEGORICAL ? s->params[i].n_values : 1;
    return D;
}

static int is_integer(double v)
{
    return isfinite(v) && fabs(v) < INTEGER_LIMIT && v == floor(v);
}

static int check_param(const gp_bo_param *p, size_t i, gp_error *err)
{
    char field[GP_ERROR_FIELD_LEN];
    snprintf(field, sizeof field, "parameters[%zu].bounds", i);
    switch (p->type) {
    case GP_BO_DOUBLE:
        if (!isfinite(p->lo) || !isfinite(p->hi) || !(p->lo < p->hi))
            return gp_error_set(err, GP_EINVAL, field, "bounds need finite lo < hi (got %g, %g)",
                                p->lo, p->hi);
        if (p->log_scale && !(p->lo > 0.0))
            return gp_error_set(err, GP_EINVAL, field, "a log-scaled parameter needs lo > 0");
        return GP_OK;
    case GP_BO_INTEGER:
        if (!is_integer(p->lo) || !is_integer(p->hi) || !(p->lo < p->hi))
            return gp_error_set(err, GP_EINVAL, field,
                                "an integer parameter needs integer bounds lo < hi (got %g, %g)",
                                p->lo, p->hi);
        if (p->log_scale && !(p->lo >= 1.0))
            return gp_error_set(err, GP_EINVAL, field, "a log-scaled integer needs lo >= 1");
        return GP_OK;
    case GP_BO_CATEGORICAL:
        if (p->n_values < 2 || p->n_values > GP_BO_MAX_DIM) {
            snprintf(field, sizeof field, "parameters[%zu].values", i);
            return gp_error_set(err, GP_EINVAL, field,
                                "a categorical parameter needs 2 to %d values (got %zu)",
                                GP_BO_MAX_DIM, p->n_values);
        }
        return GP_OK;
    }
    snprintf(field, sizeof field, "parameters[%zu].type", i);
    return gp_error_set(err, GP_EINVAL, field, "unknown parameter type %d", (int)p->type);
}

int gp_bo_space_check(const gp_bo_space *s, gp_error *err)
{
    if (s == NULL || s->n_params == 0 || s->params == NULL)
        return gp_error_set(err, GP_EINVAL, "parameters", "the search space has no parameter");
    size_t D = 0;
    for (size_t i = 0; i < s->n_params; i++) {
        int rc = check_param(&s->params[i], i, err);
        if (rc != GP_OK)
            return rc;
        D += s->params[i].type == GP_BO_CATEGORICAL ? s->params[i].n_values : 1;
        if (D > GP_BO_MAX_DIM)
            return gp_error_set(err, GP_EINVAL, "parameters",
                                "the encoded search space has more than %d columns "
                                "(one per double or integer, one per categorical value)",
                                GP_BO_MAX_DIM);
    }
    return GP_OK;
}

/* The interval a numeric parameter is encoded on, in its (log) units:
 * integers own [k - 0.5, k + 0.5] each. */
static void numeric_ends(const gp_bo_param *p, double *a, double *b)
{
    double lo = p->lo, hi = p->hi;
    if (p->type == GP_BO_INTEGER)
        lo -= 0.5, hi += 0.5;
    *a = p->log_scale ? log(lo) : lo;
    *b = p->log_scale ? log(hi) : hi;
}

static double encode_numeric(const gp_bo_param *p, double v)
{
    double a, b;
    numeric_ends(p, &a, &b);
    double t = p->log_scale ? log(v) : v;
    return fmin(1.0, fmax(0.0, (t - a) / (b - a)));
}

static double decode_numeric(const gp_bo_param *p, double u)
{
    double a, b;
    numeric_ends(p, &a, &b);
    if (isnan(u))
        u = 0.5;
    u = fmin(1.0, fmax(0.0, u));
    double t = a + u * (b - a);
    double v = p->log_scale ? exp(t) : t;
    if (p->type == GP_BO_INTEGER)
        v = round(v);
    return fmin(p->hi, fmax(p->lo, v));
}

int gp_bo_encode(const gp_bo_space *s, const double *value, double *u, gp_error *err)
{
    size_t c = 0;
    for (size_t i = 0; i < s->n_params; i++) {
        const gp_bo_param *p = &s->params[i];
        double v = value[i];
        char field[GP_ERROR_FIELD_LEN];
        snprintf(field, sizeof field, "parameters[%zu]", i);
        if (p->type == GP_BO_CATEGORICAL) {
            if (!is_integer(v) || v < 0.0 || v >= (double)p->n_values)
                return gp_error_set(err, GP_EDATA, field, "not one of the %zu values (index %g)",
                                    p->n_values, v);
            for (size_t k = 0; k < p->n_values; k++)
                u[c + k] = (double)k == v ? 1.0 : 0.0;
            c += p->n_values;
            continue;
        }
        if (!isfinite(v) || v < p->lo || v > p->hi)
            return gp_error_set(err, GP_EDATA, field, "%g is outside the bounds [%g, %g]", v,
                                p->lo, p->hi);
        if (p->type == GP_BO_INTEGER && !is_integer(v))
            return gp_error_set(err, GP_EDATA, field, "%g is not an integer", v);
        u[c++] = encode_numeric(p, v);
    }
    return GP_OK;
}

/* The index of the largest of n values (the first of equal ones; NaN never wins). */
static size_t argmax(const double *u, size_t n)
{
    size_t best = 0;
    for (size_t k = 1; k < n; k++)
        if (u[k] > u[best] || (isnan(u[best]) && !isnan(u[k])))
            best = k;
    return best;
}

void gp_bo_decode(const gp_bo_space *s, const double *u, double *value)
{
    size_t c = 0;
    for (size_t i = 0; i < s->n_params; i++) {
        const gp_bo_param *p = &s->params[i];
        if (p->type == GP_BO_CATEGORICAL) {
            value[i] = (double)argmax(u + c, p->n_values);
            c += p->n_values;
        } else {
            value[i] = decode_numeric(p, u[c++]);
        }
    }
}

void gp_bo_snap(const gp_bo_space *s, const double *u, double *u_snapped)
{
    size_t c = 0;
    for (size_t i = 0; i < s->n_params; i++) {
        const gp_bo_param *p = &s->params[i];
        if (p->type == GP_BO_CATEGORICAL) {
            size_t k = argmax(u + c, p->n_values);
            for (size_t j = 0; j < p->n_values; j++)
                u_snapped[c + j] = j == k ? 1.0 : 0.0;
            c += p->n_values;
        } else {
            u_snapped[c] = encode_numeric(p, decode_numeric(p, u[c]));
            c++;
        }
    }
}
