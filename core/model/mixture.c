/* gpserve core: equally weighted Gaussian mixtures (see mixture.h).
 *
 * Everything works point by point on the m x K column-major layout: point i
 * of component k is at [i + k m]. No allocation, no I/O. */
#include "core/model/mixture.h"

#include <float.h>
#include <math.h>

#include "core/base/rng.h"

#define LOG_2PI 1.8378770664093454836
#define INV_SQRT_2PI 0.39894228040143267794
#define INV_SQRT2 0.70710678118654752440
/* Root-finding iterations per quantile: Newton converges in a handful, and
 * bisection alone covers ~100 binary digits of bracket. */
#define QUANTILE_MAX_ITER 100

/* ---- moments ---------------------------------------------------------------- */

void gp_mixture_moments(const double *mu, const double *var, size_t m, size_t K, double *mean,
                        double *variance)
{
    for (size_t i = 0; i < m; i++) {
        if (K == 0) {
            mean[i] = variance[i] = NAN;
            continue;
        }
        double s = 0.0;
        for (size_t k = 0; k < K; k++)
            s += mu[i + k * m];
        double c = s / (double)K;
        /* Second pass on deviations from the mean: no cancellation between
         * large raw second moments. The (sum d)^2 / K term is the corrected
         * two-pass correction: it removes the rounding error of c itself
         * (zero in exact arithmetic, tiny but not negligible when the means
         * are large and close together). */
        double sv = 0.0, sd = 0.0, sdd = 0.0;
        for (size_t k = 0; k < K; k++) {
            double d = mu[i + k * m] - c;
            sv += var[i + k * m];
            sd += d;
            sdd += d * d;
        }
        double spread = sdd - sd * sd / (double)K;
        mean[i] = c;
        variance[i] = (sv + (spread > 0.0 ? spread : 0.0)) / (double)K;
    }
}

/* ---- quantiles ---------------------------------------------------------------- */

/* One point's mixture: K components at stride m. upper selects which tail the
 * CDF is evaluated in: erfc gives each tail to full relative accuracy, so
 * levels above 1/2 are solved as S(x) = 1 - level (exact for level >= 1/2)
 * with S = 1 - F, which keeps levels like 1 - 1e-10 resolvable. */
typedef struct {
    const double *mu, *var;
    size_t m, K;
    double level, tail; /* tail = min(level, 1 - level), the target in the chosen tail */
    int upper;
} mix_point;

/* Residual F(x) - level (computed in the accurate tail) and the mixture
 * density at x. A point mass (var 0) is a CDF step at mu, right-continuous,
 * and contributes no density: Newton ignores it and bisection finds the step. */
static double mix_residual(const mix_point *p, double x, double *density)
{
    double cdf = 0.0, dens = 0.0;
    for (size_t k = 0; k < p->K; k++) {
        double mu = p->mu[k * p->m], var = p->var[k * p->m];
        if (var == 0.0) {
            int stepped = x >= mu; /* F_k(x) = 1, S_k(x) = 0 */
            cdf += p->upper ? (stepped ? 0.0 : 1.0) : (stepped ? 1.0 : 0.0);
            continue;
        }
        double sd = sqrt(var), z = (x - mu) / sd;
        /* Phi(z) = erfc(-z/sqrt2)/2 and 1 - Phi(z) = erfc(z/sqrt2)/2. */
        cdf += 0.5 * erfc((p->upper ? z : -z) * INV_SQRT2);
        dens += INV_SQRT_2PI / sd * exp(-0.5 * z * z);
    }
    *density = dens / (double)p->K;
    cdf /= (double)p->K;
    /* F - level = (1 - S) - level = (1 - level) - S in the upper tail. */
    return p->upper ? p->tail - cdf : cdf - p->tail;
}

/* All components are point masses: F is a staircase, and the quantile is the
 * smallest x with F(x) >= level, which is one of the mu_k. */
static double point_mass_quantile(const mix_point *p)
{
    double best = INFINITY;
    for (size_t k = 0; k < p->K; k++) {
        double x = p->mu[k * p->m];
        size_t count = 0;
        for (size_t j = 0; j < p->K; j++)
            count += p->mu[j * p->m] <= x;
        if ((double)count / (double)p->K >= p->level && x < best)
            best = x;
    }
    return best;
}

/* Push one end of the bracket outwards until the residual there has the
 * right sign (dir = -1: lo with r < 0; dir = +1: hi with r > 0). The
 * component quantiles bracket the root in exact arithmetic, but
 * gp_normal_quantile is only accurate to ~1e-15 and a point mass sitting
 * on the end makes the CDF there already >= level. Returns 1 when the end is
 * itself an exact root. */
static int widen_end(const mix_point *p, double *end, double width, double scale, int dir)
{
    double step = width + DBL_EPSILON * (fabs(*end) + scale);
    for (int it = 0; it < 64; it++) {
        double dens;
        double r = mix_residual(p, *end, &dens);
        if (r == 0.0)
            return 1;
        if (dir < 0 ? r < 0.0 : r > 0.0)
            return 0;
        *end += dir * step;
        step *= 2.0;
    }
    return 0;
}

/* Bracketed Newton on [lo, hi] with F(lo) < level < F(hi): the Newton step
 * is taken when it lands inside the bracket and at least halves the step
 * before last (so slow or wild Newton, e.g. in the near-zero density
 * between well-separated modes, falls back to bisection, which always
 * halves the bracket). Stops when F hits the level, when the bracket is
 * ~1 ulp wide, or when the Newton step is below a few ulps of x or below
 * what the rounding of F itself can resolve (min(level, 1-level) eps / f). */
static double bracketed_newton(const mix_point *p, double lo, double hi, double x)
{
    if (!(x > lo && x < hi))
        x = lo + 0.5 * (hi - lo);
    double step = hi - lo, step_old = step;
    for (int it = 0; it < QUANTILE_MAX_ITER; it++) {
        double f;
        double r = mix_residual(p, x, &f);
        if (r == 0.0)
            return x;
        if (r < 0.0)
            lo = x;
        else
            hi = x;
        if (hi - lo <= DBL_EPSILON * fmax(fabs(lo), fabs(hi)))
            break;
        double xn = f > 0.0 ? x - r / f : NAN;
        if (xn > lo && xn < hi && 2.0 * fabs(xn - x) <= fabs(step_old)) {
            step_old = step;
            step = xn - x;
            x = xn;
            if (fabs(step) <= 2.0 * DBL_EPSILON * (fabs(x) + p->tail / f))
                return x;
        } else {
            double mid = lo + 0.5 * (hi - lo);
            if (!(mid > lo && mid < hi))
                break; /* adjacent doubles */
            step_old = step;
            step = mid - x;
            x = mid;
        }
    }
    /* F(hi) >= level: at a CDF step inside the bracket this is the step. */
    return hi;
}

/* The quantile at one point and one level. */
static double point_quantile(const double *mu, const double *var, size_t m, size_t K,
                             double level)
{
    if (level == 0.0)
        return -INFINITY;
    if (level == 1.0)
        return INFINITY;
    if (!(level > 0.0 && level < 1.0) || K == 0)
        return NAN;
    double z = gp_normal_quantile(level);
    if (K == 1) /* exactly the Gaussian quantile, no root finding */
        return mu[0] + sqrt(var[0]) * z;

    /* Each component's own quantile: F averages the component CDFs, so the
     * smallest is <= the mixture quantile <= the largest. Also the
     * moment-matched Gaussian quantile as Newton's first guess. */
    double lo = INFINITY, hi = -INFINITY, sdmax = 0.0, s1 = 0.0, s2 = 0.0;
    for (size_t k = 0; k < K; k++) {
        double mk = mu[k * m], vk = var[k * m];
        if (!isfinite(mk) || !(vk >= 0.0) || !isfinite(vk))
            return NAN;
        double sd = sqrt(vk), q = mk + sd * z;
        lo = q < lo ? q : lo;
        hi = q > hi ? q : hi;
        sdmax = sd > sdmax ? sd : sdmax;
        s1 += mk;
        s2 += vk;
    }
    mix_point p = {mu, var, m, K, level, level > 0.5 ? 1.0 - level : level, level > 0.5};
    if (sdmax == 0.0)
        return point_mass_quantile(&p);
    double c = s1 / (double)K, spread = 0.0;
    for (size_t k = 0; k < K; k++)
        spread += (mu[k * m] - c) * (mu[k * m] - c);
    double guess = c + sqrt((s2 + spread) / (double)K) * z;

    double width = hi - lo;
    if (widen_end(&p, &lo, width, sdmax, -1))
        return lo;
    if (widen_end(&p, &hi, width, sdmax, +1))
        return hi;
    return bracketed_newton(&p, lo, hi, guess);
}

void gp_mixture_quantiles(const double *mu, const double *var, size_t m, size_t K,
                          const double *levels, size_t nq, double *out)
{
    for (size_t j = 0; j < nq; j++)
        for (size_t i = 0; i < m; i++)
            out[i + j * m] = point_quantile(mu + i, var + i, m, K, levels[j]);
}

/* ---- densities ---------------------------------------------------------------- */

static double log_normal(double y, double mu, double var)
{
    double d = y - mu;
    return -0.5 * (LOG_2PI + log(var) + d * d / var);
}

/* Streaming log-sum-exp: s = sum_k exp(a_k - amax) with amax the largest
 * term so far, rescaled when a larger term arrives. The largest exponential
 * is exp(0) = 1, so nothing underflows to log(0) however far y lies from
 * every component, and no scratch array of the K terms is needed. */
typedef struct {
    double amax, s;
} lse_acc;

static void lse_add(lse_acc *acc, double a)
{
    if (isnan(a) || isnan(acc->amax)) {
        acc->amax = NAN;
    } else if (a == -INFINITY) {
        /* adds exp(-inf) = 0; skipped so -inf - -inf never makes a NaN */
    } else if (a > acc->amax) {
        /* exp(-inf) = 0 clears the sum when the first finite term arrives. */
        acc->s = acc->s * exp(acc->amax - a) + 1.0;
        acc->amax = a;
    } else {
        acc->s += exp(a - acc->amax);
    }
}

/* log((1/K) sum_k exp(a_k)). All terms -inf gives -inf; +inf or NaN pass
 * through (a zero variance at y = mu, or bad input). */
static double lse_mean(const lse_acc *acc, size_t K)
{
    if (K == 0)
        return NAN;
    if (!isfinite(acc->amax))
        return acc->amax;
    return acc->amax + log(acc->s) - log((double)K);
}

void gp_mixture_log_density(const double *mu, const double *var, size_t m, size_t K,
                            const double *y, double *logp)
{
    for (size_t i = 0; i < m; i++) {
        lse_acc acc = {-INFINITY, 0.0};
        for (size_t k = 0; k < K; k++)
            lse_add(&acc, log_normal(y[i], mu[i + k * m], var[i + k * m]));
        logp[i] = lse_mean(&acc, K);
    }
}

double gp_mixture_joint_log_density(const double *mu, const double *var, size_t m, size_t K,
                                    const double *y)
{
    /* S_k = sum_i log N(y_i; mu_ik, var_ik), then log-mean-exp over k. The
     * product over many points underflows long before its log does, so the
     * shift is what makes this usable for m in the hundreds. */
    lse_acc acc = {-INFINITY, 0.0};
    for (size_t k = 0; k < K; k++) {
        double S = 0.0;
        for (size_t i = 0; i < m; i++)
            S += log_normal(y[i], mu[i + k * m], var[i + k * m]);
        lse_add(&acc, S);
    }
    return lse_mean(&acc, K);
}
