/* The multiclass softmax likelihood (core/likelihood/softmax.h).
 *
 * Every per-draw quantity is formed from the shifted latents f_c - max_k f_k,
 * so no exp overflows and log-sum-exp keeps its digits for any spread of the
 * latent means. Work arrays are GP_SOFTMAX_MAX_CLASSES long on the stack:
 * nothing per point allocates. */
#include "core/likelihood/softmax.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* 1 - 2^-53, the largest double below 1. */
#define PROB_MAX (1.0 - 0x1p-53)

int gp_softmax_classes(const double *y, size_t n, size_t *classes, gp_error *err)
{
    double top = -1.0;
    size_t distinct = 0;
    unsigned char seen[GP_SOFTMAX_MAX_CLASSES] = {0};
    for (size_t i = 0; i < n; i++) {
        double v = y[i];
        if (isfinite(v) && v >= 0.0 && v == floor(v) && v < GP_SOFTMAX_MAX_CLASSES) {
            if (v > top)
                top = v;
            distinct += !seen[(size_t)v];
            seen[(size_t)v] = 1;
            continue;
        }
        char field[GP_ERROR_FIELD_LEN];
        snprintf(field, sizeof field, "y[%zu]", i);
        return gp_error_set(err, GP_EDATA, field,
                            "%s = %.17g: a softmax label must be a class number, an integer in "
                            "0..%d",
                            field, v, GP_SOFTMAX_MAX_CLASSES - 1);
    }
    if (distinct < 2)
        return gp_error_set(err, GP_EDATA, "y",
                            "softmax needs labels of at least two classes (0..C-1); %s",
                            n ? "all are one class" : "there are none");
    *classes = (size_t)top + 1;
    return GP_OK;
}

int gp_softmax_mc_init(gp_softmax_mc *mc, size_t C, size_t S, gp_error *err)
{
    mc->C = C;
    mc->S = S;
    mc->e = NULL;
    if (C < 2 || C > GP_SOFTMAX_MAX_CLASSES)
        return gp_error_set(err, GP_EINVAL, "classes", "softmax takes 2 to %d classes, not %zu",
                            GP_SOFTMAX_MAX_CLASSES, C);
    if (S < 2 || S > GP_SOFTMAX_MAX_DRAWS || S % 2)
        return gp_error_set(err, GP_EINVAL, "draws",
                            "softmax Monte Carlo takes an even number of draws, 2 to %d, not %zu",
                            GP_SOFTMAX_MAX_DRAWS, S);
    mc->e = malloc(S * C * sizeof *mc->e);
    if (mc->e == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "no memory for %zu x %zu softmax draws", S, C);
    gp_rng rng;
    gp_rng_seed(&rng, GP_SOFTMAX_SEED);
    size_t half = S / 2 * C;
    gp_rng_normal_fill(&rng, mc->e, half);
    /* Antithetic halves: every odd moment of the draws is exactly 0, so the
     * estimate has no first-order error in sqrt(var). */
    for (size_t i = 0; i < half; i++)
        mc->e[half + i] = -mc->e[i];
    return GP_OK;
}

void gp_softmax_mc_free(gp_softmax_mc *mc)
{
    free(mc->e);
    mc->e = NULL;
}

/* f = mu + sd e for one draw; x[c] = exp(f_c - max f) and the return is
 * log sum_c exp(f_c) (the log-sum-exp); *sum gets sum_c x[c]. */
static double draw_softmax(size_t C, const double *mu, const double *sd, const double *e,
                           double *f, double *x, double *sum)
{
    double mx = -INFINITY;
    for (size_t c = 0; c < C; c++) {
        f[c] = mu[c] + sd[c] * e[c];
        if (f[c] > mx)
            mx = f[c];
    }
    double s = 0.0;
    for (size_t c = 0; c < C; c++) {
        x[c] = exp(f[c] - mx);
        s += x[c];
    }
    *sum = s;
    return mx + log(s);
}

static void standard_deviations(size_t C, const double *var, double *sd)
{
    for (size_t c = 0; c < C; c++)
        sd[c] = var[c] > 0.0 ? sqrt(var[c]) : 0.0;
}

double gp_softmax_expected(const gp_softmax_mc *mc, size_t y, const double *mu, const double *var,
                           double *dmu, double *dvar)
{
    size_t C = mc->C, S = mc->S;
    double sd[GP_SOFTMAX_MAX_CLASSES], f[GP_SOFTMAX_MAX_CLASSES], x[GP_SOFTMAX_MAX_CLASSES];
    double gm[GP_SOFTMAX_MAX_CLASSES] = {0}, gv[GP_SOFTMAX_MAX_CLASSES] = {0};
    standard_deviations(C, var, sd);
    double total = 0.0, sum;
    for (size_t s = 0; s < S; s++) {
        const double *e = mc->e + s * C;
        double lse = draw_softmax(C, mu, sd, e, f, x, &sum);
        total += f[y] - lse;
        if (dmu == NULL && dvar == NULL)
            continue;
        for (size_t c = 0; c < C; c++) {
            /* d log softmax(f)_y / d f_c = [c = y] - p_c, and f_c moves with
             * var_c through sd_c e_c (the reparameterisation). */
            double p = x[c] / sum, g = (c == y ? 1.0 : 0.0) - p;
            gm[c] += g;
            gv[c] += sd[c] > 0.0 ? g * e[c] : -p * (1.0 - p);
        }
    }
    double inv = 1.0 / (double)S;
    for (size_t c = 0; c < C; c++) {
        if (dmu)
            dmu[c] = gm[c] * inv;
        /* d f_c / d var_c = e_c / (2 sd_c); at var_c = 0 the Price limit E[d2] / 2. */
        if (dvar)
            dvar[c] = sd[c] > 0.0 ? gv[c] * inv / (2.0 * sd[c]) : 0.5 * gv[c] * inv;
    }
    return total * inv;
}

void gp_softmax_probabilities(const gp_softmax_mc *mc, const double *mu, const double *var,
                              size_t m, double *prob)
{
    size_t C = mc->C, S = mc->S;
    double mi[GP_SOFTMAX_MAX_CLASSES], vi[GP_SOFTMAX_MAX_CLASSES], sd[GP_SOFTMAX_MAX_CLASSES];
    double f[GP_SOFTMAX_MAX_CLASSES], x[GP_SOFTMAX_MAX_CLASSES], acc[GP_SOFTMAX_MAX_CLASSES];
    for (size_t i = 0; i < m; i++) {
        for (size_t c = 0; c < C; c++) {
            mi[c] = mu[i + c * m];
            vi[c] = var[i + c * m];
            acc[c] = 0.0;
        }
        standard_deviations(C, vi, sd);
        double sum;
        for (size_t s = 0; s < S; s++) {
            draw_softmax(C, mi, sd, mc->e + s * C, f, x, &sum);
            for (size_t c = 0; c < C; c++)
                acc[c] += x[c] / sum;
        }
        for (size_t c = 0; c < C; c++)
            prob[i + c * m] = fmin(fmax(acc[c] / (double)S, GP_SOFTMAX_PROB_MIN), PROB_MAX);
    }
}

void gp_softmax_log_predictive(const gp_softmax_mc *mc, const double *mu, const double *var,
                               size_t m, const double *y, double *logp)
{
    size_t C = mc->C, S = mc->S;
    double mi[GP_SOFTMAX_MAX_CLASSES], vi[GP_SOFTMAX_MAX_CLASSES], sd[GP_SOFTMAX_MAX_CLASSES];
    double f[GP_SOFTMAX_MAX_CLASSES], x[GP_SOFTMAX_MAX_CLASSES];
    for (size_t i = 0; i < m; i++) {
        size_t yi = (size_t)y[i];
        for (size_t c = 0; c < C; c++) {
            mi[c] = mu[i + c * m];
            vi[c] = var[i + c * m];
        }
        standard_deviations(C, vi, sd);
        /* Streaming log-mean-exp of t_s = log softmax(f_s)_y: acc is
         * sum_s exp(t_s - top), rescaled whenever top rises. */
        double top = -INFINITY, acc = 0.0, sum;
        for (size_t s = 0; s < S; s++) {
            double lse = draw_softmax(C, mi, sd, mc->e + s * C, f, x, &sum);
            double t = f[yi] - lse;
            if (t > top) {
                acc = acc * exp(top - t) + 1.0;
                top = t;
            } else {
                acc += exp(t - top);
            }
        }
        logp[i] = top + log(acc / (double)S);
    }
}

void gp_softmax_draw(const double *f, size_t C, size_t count, gp_rng *rng, double *y)
{
    for (size_t j = 0; j < count; j++) {
        const double *fj = f + j * C;
        double mx = -INFINITY, sum = 0.0;
        for (size_t c = 0; c < C; c++)
            if (fj[c] > mx)
                mx = fj[c];
        for (size_t c = 0; c < C; c++)
            sum += exp(fj[c] - mx);
        /* Inversion: the first class whose cumulative weight passes u sum. */
        double u = gp_rng_uniform(rng) * sum, cum = 0.0;
        size_t pick = C - 1;
        for (size_t c = 0; c + 1 < C; c++) {
            cum += exp(fj[c] - mx);
            if (u < cum) {
                pick = c;
                break;
            }
        }
        y[j] = (double)pick;
    }
}
