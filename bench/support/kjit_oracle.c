/* See kjit_oracle.h. */
#include "bench/support/kjit_oracle.h"

#include <math.h>

#define KJIT_PI 3.14159265358979323846
/* The range: where log t is within RANGE_NATS of its peak (e^-80 ~ 2e-35). */
#define RANGE_NATS 80.0
/* Accept a panel when 16 points on it and 16 on each half agree to
 * TOL_REL x (the Laplace estimate of the whole integral) x (the panel's share
 * of the range), or to FLOOR_REL x the sum of |terms| on the panel: the
 * integrand's own rounding (log t carries ~1e-15 x |z| absolute error) is
 * that large, so no tolerance below it can be met. */
#define TOL_REL 1e-14
#define FLOOR_REL 1e-13
#define MAX_DEPTH 40
#define MAX_PANELS 4096
/* Evaluations of log t per call before the quadrature gives up. */
#define MAX_EVALUATIONS 2000000

double gp_kjit_log_sigmoid(double z)
{
    return z >= 0 ? -log1p(exp(-z)) : z - log1p(exp(z));
}

double gp_kjit_log_integrand(double z, double m, double v, double a, double b)
{
    double r = -(z - m) * (z - m) / (2 * v);
    if (a != 1)
        r += (a - 1) * gp_kjit_log_sigmoid(z);
    if (b != 1)
        r += (b - 1) * gp_kjit_log_sigmoid(-z);
    return r;
}

/* sigma(z) without overflow. */
static double sigmoid(double z)
{
    if (z >= 0)
        return 1 / (1 + exp(-z));
    double e = exp(z);
    return e / (1 + e);
}

void gp_kjit_oracle_init(gp_kjit_oracle *o)
{
    /* Legendre roots by Newton from Tricomi's start; weights 2 / ((1-x^2) P'(x)^2). */
    const int n = GP_KJIT_GL_POINTS;
    for (int i = 0; i < n; i++) {
        double x = cos(KJIT_PI * (i + 0.75) / (n + 0.5));
        double dp = 1;
        for (int it = 0; it < 100; it++) {
            double p0 = 1, p1 = x;
            for (int k = 2; k <= n; k++) {
                double p2 = ((2 * k - 1) * x * p1 - (k - 1) * p0) / k;
                p0 = p1;
                p1 = p2;
            }
            dp = n * (x * p1 - p0) / (x * x - 1);
            double dx = p1 / dp;
            x -= dx;
            if (fabs(dx) < 1e-17)
                break;
        }
        o->node[i] = x;
        o->weight[i] = 2 / ((1 - x * x) * dp * dp);
    }
    o->evaluations = 0;
}

typedef struct tilted {
    double m, v, a, b;
    double mode, peak; /* log t at the mode */
    double offset;     /* mode - m */
    size_t budget;     /* evaluations left for this call */
} tilted;

/* log t at mode + dz, less its peak: the Gaussian term from the offset so
 * that a mode far from 0 adds no rounding to (z - m)^2 near the mode. */
static double log_h(const tilted *t, double dz)
{
    double u = t->offset + dz, z = t->mode + dz;
    double r = -u * u / (2 * t->v);
    if (t->a != 1)
        r += (t->a - 1) * gp_kjit_log_sigmoid(z);
    if (t->b != 1)
        r += (t->b - 1) * gp_kjit_log_sigmoid(-z);
    return r - t->peak;
}

/* The three integrals of h(z) = exp(log t(z) - peak) times 1, (z - mode),
 * (z - mode)^2 over mode + [lo, hi], and the sums of their terms' magnitudes. */
static void panel(gp_kjit_oracle *o, tilted *t, double lo, double hi, double out[3],
                  double mag[3])
{
    double c = 0.5 * (lo + hi), r = 0.5 * (hi - lo);
    out[0] = out[1] = out[2] = 0;
    mag[0] = mag[1] = mag[2] = 0;
    for (int i = 0; i < GP_KJIT_GL_POINTS; i++) {
        double dz = c + r * o->node[i];
        double w = r * o->weight[i] * exp(log_h(t, dz));
        out[0] += w;
        out[1] += w * dz;
        out[2] += w * dz * dz;
        mag[0] += fabs(w);
        mag[1] += fabs(w * dz);
        mag[2] += fabs(w * dz * dz);
    }
    o->evaluations += GP_KJIT_GL_POINTS;
    t->budget = t->budget > GP_KJIT_GL_POINTS ? t->budget - GP_KJIT_GL_POINTS : 0;
}

/* Adds the integrals over mode + [lo, hi] (whose one-panel values are coarse)
 * to acc; -1 when MAX_DEPTH or the evaluation budget is reached. */
static int adapt(gp_kjit_oracle *o, tilted *t, double lo, double hi, const double coarse[3],
                 const double tol[3], int depth, double acc[3])
{
    double mid = 0.5 * (lo + hi), left[3], right[3], ml[3], mr[3];
    panel(o, t, lo, mid, left, ml);
    panel(o, t, mid, hi, right, mr);
    int ok = 1;
    for (int k = 0; k < 3; k++) {
        double fine = left[k] + right[k];
        if (fabs(fine - coarse[k]) > tol[k] && fabs(fine - coarse[k]) > FLOOR_REL * (ml[k] + mr[k]))
            ok = 0;
    }
    if (ok) {
        for (int k = 0; k < 3; k++)
            acc[k] += left[k] + right[k];
        return 0;
    }
    if (depth >= MAX_DEPTH || t->budget == 0)
        return -1;
    double half[3] = {0.5 * tol[0], 0.5 * tol[1], 0.5 * tol[2]};
    if (adapt(o, t, lo, mid, left, half, depth + 1, acc) != 0)
        return -1;
    return adapt(o, t, mid, hi, right, half, depth + 1, acc);
}

/* The mode of log t: its derivative -(z - m)/v + (a - 1)(1 - sigma) - (b - 1) sigma
 * decreases strictly and vanishes in [m - v(b - 1), m + v(a - 1)]. */
static double find_mode(double m, double v, double a, double b)
{
    double lo = m - v * (b - 1), hi = m + v * (a - 1);
    if (hi <= lo)
        return m;
    double z = m < lo ? lo : (m > hi ? hi : m);
    for (int it = 0; it < 200; it++) {
        double s = sigmoid(z);
        double g = -(z - m) / v + (a - 1) * (1 - s) - (b - 1) * s;
        double h = -1 / v - (a + b - 2) * s * (1 - s);
        if (g > 0)
            lo = z;
        else
            hi = z;
        double next = z - g / h;
        if (!(next > lo && next < hi))
            next = 0.5 * (lo + hi);
        double step = fabs(next - z);
        z = next;
        if (step <= 1e-15 * (1 + fabs(z)) || hi - lo <= 1e-15 * (1 + fabs(z)))
            break;
    }
    return z;
}

int gp_kjit_logistic_tilted(gp_kjit_oracle *o, double m, double v, double a, double b,
                            gp_kjit_moments *out, gp_error *err)
{
    if (!isfinite(m) || !isfinite(v) || !isfinite(a) || !isfinite(b) || !(v > 0) || !(a >= 1) ||
        !(b >= 1))
        return gp_error_set(err, GP_EINVAL, NULL,
                            "the oracle takes finite m, v > 0, a >= 1, b >= 1 (got %g, %g, %g, %g)",
                            m, v, a, b);
    tilted t = {.m = m, .v = v, .a = a, .b = b, .budget = MAX_EVALUATIONS};
    t.mode = find_mode(m, v, a, b);
    t.offset = t.mode - m;
    t.peak = 0;
    t.peak = log_h(&t, 0);
    double sm = sigmoid(t.mode);
    double s = 1 / sqrt(1 / v + (a + b - 2) * sm * (1 - sm)); /* Laplace scale */
    /* Step out until t is e^-RANGE_NATS of its peak: log t lies below the
     * parabola peak - (z - mode)^2 / (2v), so this ends by sqrt(2 v RANGE_NATS). */
    double right = s, left = s;
    while (log_h(&t, right) > -RANGE_NATS)
        right *= 1.5;
    while (log_h(&t, -left) > -RANGE_NATS)
        left *= 1.5;
    double width = left + right;
    size_t panels = (size_t)ceil(width / (2 * s));
    if (panels < 2)
        panels = 2;
    if (panels > MAX_PANELS)
        panels = MAX_PANELS;
    double est = sqrt(2 * KJIT_PI) * s; /* Laplace estimate of the integral of h */
    double acc[3] = {0, 0, 0};
    for (size_t p = 0; p < panels; p++) {
        double a0 = -left + width * (double)p / (double)panels;
        double a1 = p + 1 == panels ? right : -left + width * (double)(p + 1) / (double)panels;
        double share = (a1 - a0) / width;
        double tol[3] = {TOL_REL * est * share, TOL_REL * est * s * share,
                         TOL_REL * est * s * s * share};
        double coarse[3], mag[3];
        panel(o, &t, a0, a1, coarse, mag);
        if (adapt(o, &t, a0, a1, coarse, tol, 0, acc) != 0)
            return gp_error_set(err, GP_EINTERNAL, NULL,
                                "the oracle's quadrature did not settle (m %g, v %g, a %g, b %g)",
                                m, v, a, b);
    }
    double d1 = acc[1] / acc[0];
    out->mode = t.mode;
    out->mean = t.mode + d1;
    out->var = acc[2] / acc[0] - d1 * d1;
    out->log_z = gp_kjit_log_integrand(t.mode, m, v, a, b) + log(acc[0]) -
                 0.5 * log(2 * KJIT_PI * v);
    if (!(out->var > 0) || !isfinite(out->mean) || !isfinite(out->log_z))
        return gp_error_set(err, GP_EINTERNAL, NULL,
                            "the oracle's moments are not finite (m %g, v %g, a %g, b %g)", m, v,
                            a, b);
    return GP_OK;
}

double gp_kjit_gauss_kl(double m1, double lv1, double m2, double lv2)
{
    double d = lv2 - lv1; /* log(v2 / v1) */
    /* d + exp(-d) - 1, by its series where the terms would cancel */
    double r;
    if (fabs(d) < 1e-3) {
        double d2 = d * d;
        r = d2 * (0.5 - d / 6 + d2 / 24 - d2 * d / 120 + d2 * d2 / 720);
    } else {
        r = d + expm1(-d);
    }
    double dm = m1 - m2;
    return 0.5 * (r + dm * dm * exp(-lv2));
}
