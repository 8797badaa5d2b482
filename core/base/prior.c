/* Prior densities and the bound map (prior.h). */
#include "core/base/prior.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "core/base/rng.h"

static const char *const type_names[GP_PRIOR_TYPE_COUNT] = {
    "none", "lognormal", "gamma", "normal", "halfcauchy", "uniform",
};

const char *gp_prior_type_name(gp_prior_type type)
{
    return (unsigned)type < GP_PRIOR_TYPE_COUNT ? type_names[type] : NULL;
}

int gp_prior_type_from_name(const char *name)
{
    for (int t = GP_PRIOR_LOGNORMAL; t < GP_PRIOR_TYPE_COUNT; t++)
        if (name && strcmp(name, type_names[t]) == 0)
            return t;
    return -1;
}

void gp_prior_param_names(gp_prior_type type, const char **a, const char **b)
{
    *a = *b = NULL;
    switch (type) {
    case GP_PRIOR_LOGNORMAL:
    case GP_PRIOR_NORMAL:
        *a = "loc";
        *b = "scale";
        break;
    case GP_PRIOR_GAMMA:
        *a = "shape";
        *b = "rate";
        break;
    case GP_PRIOR_HALFCAUCHY:
        *a = "scale";
        break;
    case GP_PRIOR_UNIFORM:
        *a = "low";
        *b = "high";
        break;
    default:
        break;
    }
}

static int bad(gp_error *err, const char *field, const char *name, const char *what)
{
    char f[GP_ERROR_FIELD_LEN];
    size_t n = strlen(field);
    if (n + 1 + strlen(name) < sizeof f) {
        memcpy(f, field, n);
        f[n] = '.';
        strcpy(f + n + 1, name);
    } else
        strcpy(f, "priors");
    return gp_error_set(err, GP_EINVAL, f, "%s must be %s", f, what);
}

int gp_prior_check(const gp_prior *p, const char *field, gp_error *err)
{
    const char *na, *nb;
    gp_prior_param_names(p->type, &na, &nb);
    if (na == NULL)
        return gp_error_set(err, GP_EINVAL, field, "%s has no prior type", field);
    if (!isfinite(p->a))
        return bad(err, field, na, "a finite number");
    if (nb && !isfinite(p->b))
        return bad(err, field, nb, "a finite number");
    switch (p->type) {
    case GP_PRIOR_LOGNORMAL:
    case GP_PRIOR_NORMAL:
        return p->b > 0 ? GP_OK : bad(err, field, nb, "positive");
    case GP_PRIOR_GAMMA:
        if (!(p->a > 0))
            return bad(err, field, na, "positive");
        return p->b > 0 ? GP_OK : bad(err, field, nb, "positive");
    case GP_PRIOR_HALFCAUCHY:
        return p->a > 0 ? GP_OK : bad(err, field, na, "positive");
    case GP_PRIOR_UNIFORM:
        if (!(p->a >= 0))
            return bad(err, field, na, "at least 0");
        return p->b > p->a ? GP_OK : bad(err, field, nb, "greater than low");
    default:
        return gp_error_set(err, GP_EINVAL, field, "%s has no prior type", field);
    }
}

#define HALF_LOG_2PI 0.91893853320467274178

double gp_prior_log_density(const gp_prior *p, double t, double *dt)
{
    double d = 0.0, lp = 0.0, x, z;
    switch (p->type) {
    case GP_PRIOR_LOGNORMAL: /* density of x: the normal of t times 1/x */
        z = (t - p->a) / p->b;
        lp = -0.5 * z * z - log(p->b) - HALF_LOG_2PI - t;
        d = -z / p->b - 1.0;
        break;
    case GP_PRIOR_NORMAL: /* density of t itself */
        z = (t - p->a) / p->b;
        lp = -0.5 * z * z - log(p->b) - HALF_LOG_2PI;
        d = -z / p->b;
        break;
    case GP_PRIOR_GAMMA:
        x = exp(t);
        lp = p->a * log(p->b) - gp_log_gamma(p->a) + (p->a - 1.0) * t - p->b * x;
        d = (p->a - 1.0) - p->b * x;
        break;
    case GP_PRIOR_HALFCAUCHY:
        z = exp(t) / p->a;
        lp = log(2.0 / (3.14159265358979323846 * p->a)) - log1p(z * z);
        d = -2.0 * z * z / (1.0 + z * z);
        break;
    case GP_PRIOR_UNIFORM:
        x = exp(t);
        lp = x >= p->a && x <= p->b ? -log(p->b - p->a) : -INFINITY;
        break;
    default:
        break;
    }
    if (dt)
        *dt = d;
    return lp;
}

int gp_prior_support(const gp_prior *p, double *lo, double *hi)
{
    *lo = 0.0;
    *hi = INFINITY;
    if (p->type != GP_PRIOR_UNIFORM)
        return 0;
    *lo = p->a;
    *hi = p->b;
    return 1;
}

double gp_bound_to_t(double u, double lo, double hi, double *dt_du)
{
    double w = hi - lo;
    /* the logistic written so that neither branch overflows */
    double s = u >= 0 ? 1.0 / (1.0 + exp(-u)) : exp(u) / (1.0 + exp(u));
    double t = lo + w * s;
    if (t > hi)
        t = hi;
    if (dt_du)
        *dt_du = w * s * (1.0 - s);
    return t;
}

double gp_bound_to_u(double t, double lo, double hi)
{
    double w = hi - lo, f = (t - lo) / w;
    if (!(f > 1e-9))
        f = 1e-9;
    if (!(f < 1.0 - 1e-9))
        f = 1.0 - 1e-9;
    return log(f / (1.0 - f));
}
