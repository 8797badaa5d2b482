/* gpserve core: acquisition functions (see acquisition.h). */
#include "core/bo/acquisition.h"

#include <math.h>
#include <string.h>

#include "core/bo/normal.h"

static const char *const NAMES[] = {"log_ei", "ucb", "pi", "thompson", "max_variance"};
#define N_KINDS (sizeof NAMES / sizeof NAMES[0])

const char *gp_acq_name(gp_acq_kind k)
{
    return (size_t)k < N_KINDS ? NAMES[k] : "unknown";
}

int gp_acq_parse(const char *name, gp_acq_kind *out)
{
    for (size_t i = 0; name != NULL && i < N_KINDS; i++)
        if (strcmp(name, NAMES[i]) == 0) {
            *out = (gp_acq_kind)i;
            return GP_OK;
        }
    return GP_EINVAL;
}

/* The standard deviation and d sd / du (into dsd, D entries) with the
 * variance floored; the floor's gradient is 0. */
static double sd_and_grad(const gp_acq_posterior *p, double floor, size_t D, double *dsd)
{
    double var = p->var;
    int floored = !(var > floor);
    if (floored)
        var = floor;
    double sd = sqrt(var);
    for (size_t j = 0; dsd != NULL && j < D; j++)
        dsd[j] = floored ? 0.0 : p->dvar[j] / (2.0 * sd);
    return sd;
}

/* z = (a mu + b) / sd and dz = (a dmu - z dsd) / sd into grad (accumulated
 * with weight w after the caller's f'(z)). */
static void add_chain(double w, double a, double z, double sd, const double *dmean,
                      const double *dsd, size_t D, double *grad)
{
    for (size_t j = 0; j < D; j++)
        grad[j] += w * (a * dmean[j] - z * dsd[j]) / sd;
}

static double ei_or_pi(const gp_acq_spec *spec, const gp_acq_posterior *p, size_t D,
                       double *grad)
{
    double s = spec->maximize ? 1.0 : -1.0;
    double dsd[GP_BO_MAX_DIM];
    double sd = sd_and_grad(p, spec->var_floor, D, grad ? dsd : NULL);
    double z = s * (p->mean - spec->best) / sd, df;
    if (spec->kind == GP_ACQ_PI) {
        double v = gp_log_ndtr(z, &df);
        if (grad) {
            memset(grad, 0, D * sizeof *grad);
            add_chain(df, s, z, sd, p->dmean, dsd, D, grad);
        }
        return v;
    }
    /* log EI = log h(z) + log sd: d/du = h'/h dz + dsd / sd */
    double v = gp_log_h(z, &df) + log(sd);
    if (grad) {
        memset(grad, 0, D * sizeof *grad);
        add_chain(df, s, z, sd, p->dmean, dsd, D, grad);
        for (size_t j = 0; j < D; j++)
            grad[j] += dsd[j] / sd;
    }
    return v;
}

double gp_acq_value(const gp_acq_spec *spec, const gp_acq_posterior *p, size_t D, double *grad)
{
    double s = spec->maximize ? 1.0 : -1.0;
    switch (spec->kind) {
    case GP_ACQ_LOG_EI:
    case GP_ACQ_PI:
        return ei_or_pi(spec, p, D, grad);
    case GP_ACQ_UCB: {
        double dsd[GP_BO_MAX_DIM], rb = sqrt(spec->beta);
        double sd = sd_and_grad(p, spec->var_floor, D, grad ? dsd : NULL);
        for (size_t j = 0; grad != NULL && j < D; j++)
            grad[j] = s * p->dmean[j] + rb * dsd[j];
        return s * p->mean + rb * sd;
    }
    case GP_ACQ_MAX_VARIANCE: {
        int floored = !(p->var > spec->var_floor);
        double var = floored ? spec->var_floor : p->var;
        for (size_t j = 0; grad != NULL && j < D; j++)
            grad[j] = floored ? 0.0 : p->dvar[j] / var;
        return log(var);
    }
    case GP_ACQ_THOMPSON:
        break;
    }
    for (size_t j = 0; grad != NULL && j < D; j++)
        grad[j] = 0.0;
    return NAN;
}

double gp_acq_log_feasibility(double limit, const gp_acq_posterior *p, double var_floor,
                              size_t D, double *grad)
{
    double dsd[GP_BO_MAX_DIM], df;
    double sd = sd_and_grad(p, var_floor, D, grad ? dsd : NULL);
    double z = (limit - p->mean) / sd;
    double v = gp_log_ndtr(z, &df);
    if (grad)
        add_chain(df, -1.0, z, sd, p->dmean, dsd, D, grad);
    return v;
}
