/* gpserve core: stable normal functions (see normal.h). */
#include "core/bo/normal.h"

#include <math.h>

#define SQRT_PI 1.7724538509055160273
#define SQRT_2 1.4142135623730950488
#define SQRT_HALF_PI 1.2533141373155002512 /* sqrt(pi / 2) */
#define SQRT_2_OVER_PI 0.79788456080286535588
#define HALF_LOG_2PI 0.91893853320467274178
#define INV_SQRT_2PI 0.39894228040143267794

/* Beyond this erfc(x) is near underflow: erfcx by its asymptotic series,
 * whose terms (2k - 1)!! / (2 x^2)^k fall below 1e-17 well within 12. */
#define ERFCX_SERIES_FROM 25.0
#define ERFCX_SERIES_TERMS 12
/* Below this log h by the series of 1 - r (term ratio (2k + 1) / z^2 <= 0.1
 * for the 20 terms); above it the erfcx form loses ~z^2 eps to the
 * cancellation in 1 - r (1e-13 at z = -20). */
#define LOGH_SERIES_BELOW -20.0
#define LOGH_SERIES_TERMS 20

double gp_erfcx(double x)
{
    if (x < 0.0)
        return 2.0 * exp(x * x) - gp_erfcx(-x);
    if (x < ERFCX_SERIES_FROM) {
        /* exp(x^2) from x^2 split into its rounded value and the rounding
         * error (fma), so the exponent's rounding costs no accuracy */
        double hi = x * x, lo = fma(x, x, -hi);
        return exp(hi) * (1.0 + lo) * erfc(x);
    }
    double inv = 1.0 / (2.0 * x * x), term = 1.0, sum = 1.0;
    for (int k = 1; k <= ERFCX_SERIES_TERMS; k++) {
        term *= -(2.0 * k - 1.0) * inv;
        sum += term;
    }
    return sum / (x * SQRT_PI);
}

static double ndtr(double z)
{
    return 0.5 * erfc(-z / SQRT_2);
}

/* 1 - r = z^-2 sum_k (-1)^k (2k + 1)!! z^-2k for z <= -20 (the tail of
 * erfcx's asymptotic series, r = |z| sqrt(pi/2) erfcx(|z| / sqrt 2)):
 * returns the sum; log(1 - r) = log(sum) - 2 log|z|. */
static double one_minus_r_series(double z)
{
    double inv = 1.0 / (z * z), term = 1.0, sum = 1.0;
    for (int k = 1; k <= LOGH_SERIES_TERMS; k++) {
        term *= -(2.0 * k + 1.0) * inv;
        sum += term;
    }
    return sum;
}

double gp_log_h(double z, double *dlogh)
{
    if (z > -1.0) {
        double Phi = ndtr(z), h = exp(-0.5 * z * z) * INV_SQRT_2PI + z * Phi;
        if (dlogh)
            *dlogh = Phi / h;
        return log(h);
    }
    double az = -z;
    if (z <= LOGH_SERIES_BELOW) {
        double s = one_minus_r_series(z), one_minus_r = s / (z * z);
        if (dlogh) /* Phi / h = r / (|z| (1 - r)) */
            *dlogh = (1.0 - one_minus_r) / (az * one_minus_r);
        return -0.5 * z * z - HALF_LOG_2PI - 2.0 * log(az) + log(s);
    }
    double ex = gp_erfcx(az / SQRT_2), r = az * SQRT_HALF_PI * ex, one_minus_r = 1.0 - r;
    if (dlogh)
        *dlogh = SQRT_HALF_PI * ex / one_minus_r;
    return -0.5 * z * z - HALF_LOG_2PI + log(one_minus_r);
}

double gp_log_ndtr(double z, double *dlog)
{
    if (z < 0.0) {
        double ex = gp_erfcx(-z / SQRT_2);
        if (dlog)
            *dlog = SQRT_2_OVER_PI / ex;
        return -0.5 * z * z + log(0.5 * ex);
    }
    double tail = 0.5 * erfc(z / SQRT_2);
    if (dlog)
        *dlog = exp(-0.5 * z * z) * INV_SQRT_2PI / (1.0 - tail);
    return log1p(-tail);
}
