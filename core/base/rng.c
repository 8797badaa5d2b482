/* gpserve core: seeded, portable random numbers (see rng.h).
 *
 * Everything here is a pure function of the generator state passed in. The
 * integer stream and the uniforms are identical on every platform; draws that
 * go through log/pow (normal, gamma) match bit for bit wherever libm's results
 * do. */
#include "core/base/rng.h"

#include <math.h>
#include <stdlib.h>

#define SPLITMIX_GAMMA UINT64_C(0x9E3779B97F4A7C15)

/* 2^-53 and 2^-52: scale factors turning integer bit patterns into [0, 1). */
#define TWO_POW_M53 (1.0 / 9007199254740992.0)
#define TWO_POW_M52 (1.0 / 4503599627370496.0)
/* sqrt(2); M_SQRT2 is not declared in strict C11 + POSIX mode. */
#define GP_SQRT2 1.4142135623730951

/* splitmix64's output function: a bijection of 64-bit words with good
 * avalanche, used both for seeding and for mixing the derive() key. */
static uint64_t splitmix64_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static uint64_t splitmix64_next(uint64_t *state)
{
    *state += SPLITMIX_GAMMA;
    return splitmix64_mix(*state);
}

static uint64_t rotl64(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

void gp_rng_seed(gp_rng *rng, uint64_t seed)
{
    /* Vigna's recommended seeding: four consecutive splitmix64 outputs. They
     * are distinct (splitmix64 is a bijection of distinct states), so the
     * forbidden all-zero xoshiro state cannot occur. */
    uint64_t sm = seed;
    for (int i = 0; i < 4; i++)
        rng->s[i] = splitmix64_next(&sm);
}

uint64_t gp_rng_next(gp_rng *rng)
{
    uint64_t *s = rng->s;
    const uint64_t result = rotl64(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl64(s[3], 45);
    return result;
}

/* The stream for (seed, k) is gp_rng_seed(seed ^ splitmix64_mix(k + gamma)),
 * i.e. seed XOR the first splitmix64 output of state k. The key mix is a
 * bijection, so for a fixed seed distinct k give distinct xoshiro states
 * (hence different streams), and no k maps onto the plain gp_rng_seed(seed)
 * stream except the single k whose mix is 0 (k = -gamma mod 2^64 - never an
 * index in practice). Only (seed, k) matters, not the order of calls. */
void gp_rng_derive(gp_rng *out, uint64_t seed, uint64_t k)
{
    gp_rng_seed(out, seed ^ splitmix64_mix(k + SPLITMIX_GAMMA));
}

double gp_rng_uniform(gp_rng *rng)
{
    /* The top 53 bits are the best ones of xoshiro256** and exactly fill a
     * double's significand, so every value is a multiple of 2^-53 in [0, 1). */
    return (double)(gp_rng_next(rng) >> 11) * TWO_POW_M53;
}

double gp_rng_uniform_pos(gp_rng *rng)
{
    /* 52 bits plus a half step: values (j + 0.5) 2^-52 lie in
     * [2^-53, 1 - 2^-53], all exactly representable. With 53 bits the top value
     * (2^53 - 0.5) 2^-53 would round to 1.0. */
    return ((double)(gp_rng_next(rng) >> 12) + 0.5) * TWO_POW_M52;
}

double gp_rng_normal(gp_rng *rng)
{
    /* Marsaglia polar method. It makes two normals per accepted pair; the second
     * is dropped because gp_rng holds nothing but the xoshiro state, which keeps
     * the stream a function of s[] alone. */
    for (;;) {
        double u = 2.0 * gp_rng_uniform(rng) - 1.0;
        double v = 2.0 * gp_rng_uniform(rng) - 1.0;
        double s = u * u + v * v;
        if (s > 0.0 && s < 1.0)
            return u * sqrt(-2.0 * log(s) / s);
    }
}

void gp_rng_normal_fill(gp_rng *rng, double *out, size_t count)
{
    for (size_t i = 0; i < count; i++)
        out[i] = gp_rng_normal(rng);
}

/* Marsaglia & Tsang (2000) for shape >= 1. */
static double gamma_mt(gp_rng *rng, double shape)
{
    const double d = shape - 1.0 / 3.0;
    const double c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x = gp_rng_normal(rng);
        double v = 1.0 + c * x;
        if (v <= 0.0)
            continue;
        v = v * v * v;
        double u = gp_rng_uniform_pos(rng);
        double x2 = x * x;
        /* Cheap squeeze first; the log test is the exact acceptance rule. */
        if (u < 1.0 - 0.0331 * x2 * x2)
            return d * v;
        if (log(u) < 0.5 * x2 + d * (1.0 - v + log(v)))
            return d * v;
    }
}

/* Returns NaN for shape <= 0 or NaN: there is no such distribution, and a NaN
 * propagates visibly instead of a plausible-looking number. */
double gp_rng_gamma(gp_rng *rng, double shape)
{
    if (!(shape > 0.0) || isinf(shape))
        return NAN;
    if (shape >= 1.0)
        return gamma_mt(rng, shape);
    /* Boost: Gamma(a) = Gamma(a + 1) U^(1/a) for a < 1, where Marsaglia-Tsang's
     * squeeze does not apply. Tiny shapes may underflow to 0, which is the
     * correctly rounded value of such a draw. */
    double g = gamma_mt(rng, shape + 1.0);
    return g * pow(gp_rng_uniform_pos(rng), 1.0 / shape);
}

double gp_rng_chisq(gp_rng *rng, double k)
{
    return 2.0 * gp_rng_gamma(rng, 0.5 * k);
}

/* Rejection on the low end: 2^64 mod n raw values are refused so the
 * remaining range is a whole number of copies of [0, n). n = 0 (excluded by
 * the header, no valid answer exists) returns 0 rather than looping. */
uint64_t gp_rng_below(gp_rng *rng, uint64_t n)
{
    if (n == 0)
        return 0;
    const uint64_t threshold = (0 - n) % n; /* = 2^64 mod n */
    for (;;) {
        uint64_t r = gp_rng_next(rng);
        if (r >= threshold)
            return r % n;
    }
}

/* ---- Scrambled Halton ------------------------------------------------- */

/* The largest of the first GP_HALTON_MAX_DIM primes is 1619. */
#define HALTON_MAX_BASE 1619
/* Upper bound of digits x base over the first GP_HALTON_MAX_DIM primes: the
 * largest is 5 x 1549 = 7745 (1549 is the largest prime with 5 digits below
 * 2^53; 4 x 1619 = 6476). */
#define HALTON_MAX_DIGITS_X_BASE 8192

static int is_prime(unsigned v)
{
    if (v < 2)
        return 0;
    for (unsigned d = 2; d * d <= v; d++)
        if (v % d == 0)
            return 0;
    return 1;
}

static unsigned next_prime(unsigned after)
{
    unsigned v = after + 1;
    while (!is_prime(v))
        v++;
    return v;
}

/* perm[0..b-1] a uniformly random permutation of 0..b-1 (Fisher-Yates). */
static void draw_digit_permutation(gp_rng *rng, unsigned b, unsigned short *perm)
{
    for (unsigned i = 0; i < b; i++)
        perm[i] = (unsigned short)i;
    for (unsigned i = b - 1; i > 0; i--) {
        unsigned j = (unsigned)gp_rng_below(rng, (uint64_t)i + 1); /* j in [0, i] */
        unsigned short t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

/* Digit positions of base b that a double resolves: the largest k with
 * b^k <= 2^53. */
static unsigned halton_digits(unsigned b)
{
    const uint64_t exact_limit = UINT64_C(1) << 53;
    unsigned k = 0;
    for (uint64_t den = 1; den <= exact_limit / b; den *= b)
        k++;
    return k;
}

/* Radical inverse with digit position j mapped through its own permutation
 * perms[j * b ..] (j < k; zero digits included, so the expansion does not end
 * at the index's leading digit). The k digits are summed exactly as an integer
 * numerator over b^k and divided once, so the result is correctly rounded.
 * Digits of the index beyond position k (indices >= b^k > 2^53 / b) are
 * below a double's resolution and dropped. */
static double scrambled_radical_inverse(size_t index, unsigned b, unsigned k,
                                        const unsigned short *perms)
{
    uint64_t num = 0, den = 1;
    /* dig[j] is the index's digit of weight b^j; it lands at weight b^-(j+1). */
    unsigned short dig[64];
    for (unsigned j = 0; j < k; j++) {
        dig[j] = (unsigned short)(index % b);
        index /= b;
    }
    for (unsigned j = 0; j < k; j++) {
        num = num * b + perms[(size_t)j * b + dig[j]];
        den *= b;
    }
    if (num == 0) /* every position drew 0: keep the promised open interval */
        return 0.5 / (double)den;
    double x = (double)num / (double)den;
    /* The exact value is below 1, but it rounds to 1.0 when many leading
     * digits map to b - 1; clamp to keep the promised open interval. */
    if (x >= 1.0)
        x = 1.0 - TWO_POW_M53;
    return x;
}

static int halton_check(size_t dim, size_t start, size_t count, const double *out,
                        gp_error *err)
{
    if (dim == 0 || dim > GP_HALTON_MAX_DIM)
        return gp_error_set(err, GP_EINVAL, "dim",
                            "Halton dimension must be in 1..%d, got %zu",
                            GP_HALTON_MAX_DIM, dim);
    if (count > 0 && out == NULL)
        return gp_error_set(err, GP_EINVAL, "out", "output buffer is NULL");
    if (count > SIZE_MAX / dim)
        return gp_error_set(err, GP_EINVAL, "count", "count x dim overflows");
    /* Indices start + 1 .. start + count must fit in size_t. */
    if (count > SIZE_MAX - start)
        return gp_error_set(err, GP_EINVAL, "start", "Halton index overflows");
    return GP_OK;
}

/* Permutations are drawn per call from rng, dimension by dimension, so the
 * same scrambled sequence is continued only by a call with the same rng state
 * (e.g. a copy or a re-seeded generator) and a larger start: a second call with
 * the advanced rng gives a differently scrambled sequence. count = 0 returns
 * at once and leaves rng untouched. */
int gp_halton_scrambled(gp_rng *rng, size_t dim, size_t start, size_t count, double *out,
                        gp_error *err)
{
    int rc = halton_check(dim, start, count, out, err);
    if (rc != GP_OK || count == 0)
        return rc;
    /* k * b is largest for the largest base (4 digits of 1619). */
    unsigned short *perms = malloc((size_t)HALTON_MAX_DIGITS_X_BASE * sizeof *perms);
    if (perms == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    unsigned b = 1;
    for (size_t d = 0; d < dim; d++) {
        b = next_prime(b);
        unsigned k = halton_digits(b);
        for (unsigned j = 0; j < k; j++)
            draw_digit_permutation(rng, b, perms + (size_t)j * b);
        double *col = out + d * count;
        for (size_t i = 0; i < count; i++)
            col[i] = scrambled_radical_inverse(start + i + 1, b, k, perms);
    }
    free(perms);
    return GP_OK;
}

/* ---- Normal quantile --------------------------------------------------- */

/* Acklam's rational approximation, relative error below 1.15e-9. */
static const double ACKLAM_A[6] = {-3.969683028665376e+01, 2.209460984245205e+02,
                                   -2.759285104469687e+02, 1.383577518672690e+02,
                                   -3.066479806614716e+01, 2.506628277459239e+00};
static const double ACKLAM_B[5] = {-5.447609879822406e+01, 1.615858368580409e+02,
                                   -1.556989798598866e+02, 6.680131188771972e+01,
                                   -1.328068155288572e+01};
static const double ACKLAM_C[6] = {-7.784894002430293e-03, -3.223964580411365e-01,
                                   -2.400758277161838e+00, -2.549732539343734e+00,
                                   4.374664141464968e+00,  2.938163982698783e+00};
static const double ACKLAM_D[4] = {7.784695709041462e-03, 3.224671290700398e-01,
                                   2.445134137142996e+00, 3.754408661907416e+00};
#define ACKLAM_P_LOW 0.02425

static double acklam_lower(double p)
{
    if (p < ACKLAM_P_LOW) {
        const double *c = ACKLAM_C, *d = ACKLAM_D;
        double q = sqrt(-2.0 * log(p));
        return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
               ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
    }
    const double *a = ACKLAM_A, *b = ACKLAM_B;
    double q = p - 0.5;
    double r = q * q;
    return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
           (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0);
}

/* Quantile for 0 < p <= 0.5 (x <= 0). */
static double quantile_lower(double p)
{
    const double sqrt_2pi = 2.5066282746310002;
    double x = acklam_lower(p);
    /* Residual Phi(x) - p. For p >= 0.25, p - 0.5 is exact (Sterbenz) and erf
     * keeps full relative accuracy near x = 0, where erfc(.)/2 - p would cancel. */
    double e = p >= 0.25 ? 0.5 * erf(x / GP_SQRT2) - (p - 0.5)
                         : 0.5 * erfc(-x / GP_SQRT2) - p;
    double u = e * sqrt_2pi * exp(0.5 * x * x); /* e / phi(x) */
    /* exp overflows only for p below ~1e-308, where Acklam alone is as good as
     * erfc's subnormal result allows; keep it then. */
    if (!isfinite(u))
        return x;
    return x - u / (1.0 + 0.5 * x * u); /* Halley step */
}

/* p = 0 gives -INFINITY and p = 1 gives +INFINITY (the limits of the quantile);
 * p < 0, p > 1 or NaN give NaN. The upper half is computed as -Q(1 - p), where
 * 1 - p is exact, so Q(1 - p) = -Q(p) holds exactly. */
double gp_normal_quantile(double p)
{
    if (!(p >= 0.0 && p <= 1.0))
        return NAN;
    if (p == 0.0)
        return -INFINITY;
    if (p == 1.0)
        return INFINITY;
    if (p > 0.5)
        return -quantile_lower(1.0 - p);
    return quantile_lower(p);
}

/* ---- Chi-square quantile -------------------------------------------------- */

/* log Gamma(a) for a > 0: Stirling's series from a >= 10 (truncation error
 * below 1e-17 there) and the recurrence Gamma(a) = Gamma(a + m) / (a ... (a + m - 1))
 * below. Our own rather than lgamma, which writes the global signgam (not
 * thread-safe in POSIX). */
static double log_gamma_pos(double a)
{
    double shift = 0.0;
    while (a < 10.0) {
        shift += log(a);
        a += 1.0;
    }
    double r = 1.0 / a, r2 = r * r;
    double series =
        r * (1.0 / 12.0 -
             r2 * (1.0 / 360.0 - r2 * (1.0 / 1260.0 - r2 * (1.0 / 1680.0 - r2 / 1188.0))));
    return (a - 0.5) * log(a) - a + 0.91893853320467274178 + series - shift;
}

/* Regularised incomplete gammas P(a, y) and Q(a, y) = 1 - P for a, y > 0:
 * the power series gives P for y < a + 1 and the continued fraction (modified
 * Lentz) gives Q above, each to full relative accuracy; the other is 1 minus
 * it. */
static void incomplete_gamma(double a, double y, double lga, double *P, double *Q)
{
    const double eps = 1e-17, tiny = 1e-300;
    double logpref = a * log(y) - y - lga; /* y^a e^-y / Gamma(a) */
    if (y < a + 1.0) {
        double ap = a, term = 1.0 / a, sum = term;
        for (int n = 0; n < 100000; n++) {
            ap += 1.0;
            term *= y / ap;
            sum += term;
            if (term < sum * eps)
                break;
        }
        *P = sum * exp(logpref);
        *Q = 1.0 - *P;
        return;
    }
    double b = y + 1.0 - a, c = 1.0 / tiny, d = 1.0 / b, h = d;
    for (int i = 1; i < 100000; i++) {
        double an = -(double)i * ((double)i - a);
        b += 2.0;
        d = an * d + b;
        if (fabs(d) < tiny)
            d = tiny;
        c = b + an / c;
        if (fabs(c) < tiny)
            c = tiny;
        d = 1.0 / d;
        double del = d * c;
        h *= del;
        if (fabs(del - 1.0) < eps)
            break;
    }
    *Q = exp(logpref) * h;
    *P = 1.0 - *Q;
}

double gp_log_gamma(double a)
{
    return log_gamma_pos(a);
}

void gp_incomplete_gamma(double a, double y, double *P, double *Q)
{
    incomplete_gamma(a, y, log_gamma_pos(a), P, Q);
}

/* Solve P(a, y) = p for y (then x = 2y) by Halley's method on a bracket that
 * every evaluation narrows; a step leaving the bracket is replaced by
 * bisection (or doubling while no upper end is known), so it cannot diverge.
 * The residual uses P - p below the median and (1 - p) - Q above (1 - p is
 * exact there), which keeps the upper tail accurate. */
double gp_chisq_quantile(double p, double k)
{
    if (!(p >= 0.0 && p <= 1.0) || !(k > 0.0) || !isfinite(k))
        return NAN;
    if (p == 0.0)
        return 0.0;
    if (p == 1.0)
        return INFINITY;
    double a = 0.5 * k, lga = log_gamma_pos(a);
    /* Start: Wilson-Hilferty, or the small-y limit P ~ y^a / Gamma(a + 1)
     * when that is smaller (lower tail, few degrees of freedom). */
    double z = gp_normal_quantile(p), c = 2.0 / (9.0 * k);
    double wh = 1.0 - c + z * sqrt(c);
    double y = wh > 0.0 ? 0.5 * k * wh * wh * wh : 0.0;
    double ysmall = exp((log(p) + lga + log(a)) / a);
    if (!(y > 0.0) || (ysmall < y && p < 0.5))
        y = ysmall;
    if (!(y > 0.0) || !isfinite(y))
        y = a;
    double lo = 0.0, hi = INFINITY;
    for (int it = 0; it < 300; it++) {
        double P = 0.0, Q = 0.0;
        incomplete_gamma(a, y, lga, &P, &Q);
        double r = p <= 0.5 ? P - p : (1.0 - p) - Q;
        if (r == 0.0)
            break;
        if (r < 0.0)
            lo = y;
        else
            hi = y;
        double g = exp((a - 1.0) * log(y) - y - lga); /* dP/dy */
        double ynew = NAN;
        if (g > 0.0 && isfinite(g)) {
            double t = r / g;
            double denom = 1.0 - 0.5 * t * ((a - 1.0) / y - 1.0);
            ynew = denom > 0.5 ? y - t / denom : y - t;
        }
        if (!(ynew > lo && ynew < hi))
            ynew = isfinite(hi) ? 0.5 * (lo + hi) : 2.0 * y;
        double dy = fabs(ynew - y);
        y = ynew;
        if (dy <= 1e-15 * y || (isfinite(hi) && hi - lo <= 1e-15 * hi))
            break;
    }
    return 2.0 * y;
}
