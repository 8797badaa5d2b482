/* See fastmath.h. The sine and cosine of the random-feature map.
 *
 * Quadrant reduction z = k pi/2 + r, |r| <= pi/4 (up to the rounding of
 * z * 2/pi): k by the magic-constant rounding (adding 1.5 * 2^52 leaves
 * round(z * 2/pi) in the low mantissa bits, so k mod 4 is read from the bit
 * pattern without a float-to-int conversion), and r by a three-part
 * Cody-Waite split of pi/2. PIO2_1 and PIO2_2 carry 30 significant bits each,
 * so for |z| <= 1e7 (|k| < 2^23) the products k * PIO2_1 and k * PIO2_2 are
 * exact and z - k * PIO2_1 is exact (Sterbenz); PIO2_3 is the rest of pi/2
 * rounded to a double (PIO2_1 + PIO2_2 + PIO2_3 matches pi/2 to 2^-113
 * relative). Then the Cephes (sin.c) minimax polynomials on [-pi/4, pi/4]
 * and the quadrant's swap and signs as bit operations.
 *
 * Everything in the element loop is straight-line double and 64-bit integer
 * arithmetic over fixed blocks with restrict-qualified buffers, so GCC
 * vectorises it at -O2 (its very-cheap cost model accepts a constant trip
 * count and no alias checks). Each block also flags inputs outside the fast
 * range; when there are any, those elements are recomputed with libm from a
 * copy of the block's inputs. */
#include "core/linalg/fastmath.h"


#include <math.h>
#include <stdint.h>
#include <string.h>

#define BLOCK 64

static const double TWO_OVER_PI = 0x1.45f306dc9c883p-1;
static const double ROUND_MAGIC = 0x1.8p52; /* 1.5 * 2^52 */
static const double PIO2_1 = 0x1.921fb54000000p+0;  /* 30 bits */
static const double PIO2_2 = 0x1.10b4611800000p-30; /* 30 bits */
static const double PIO2_3 = 0x1.313198a2e0370p-61;

/* Cephes sin.c, highest degree first. */
static const double S0 = 1.58962301576546568060E-10, S1 = -2.50507477628578072866E-8,
                    S2 = 2.75573136213857245213E-6, S3 = -1.98412698295895385996E-4,
                    S4 = 8.33333333332211858878E-3, S5 = -1.66666666666666307295E-1;
static const double C0 = -1.13585365213876817300E-11, C1 = 2.08757008419747316778E-9,
                    C2 = -2.75573141792967388112E-7, C3 = 2.48015872888517045348E-5,
                    C4 = -1.38888888888730564116E-3, C5 = 4.16666666666665929218E-2;

/* One block of exactly BLOCK elements; returns nonzero when some input needs
 * libm. The test is on the bit pattern so that it stays an OR reduction the
 * vectoriser accepts: for a = bits(|x|) < 2^63, a + (2^63 - 1 - bits(MAX))
 * has its top bit set exactly when a > bits(MAX), i.e. |x| > MAX, +-Inf or
 * NaN (their patterns order like their magnitudes, NaN above Inf). */
static int sincos_block(const double *restrict x, double *restrict c_out,
                        double *restrict s_out, double scale)
{
    const uint64_t abs_mask = ~((uint64_t)1 << 63);
    const uint64_t offset = abs_mask - gp_double_bits(GP_SINCOS_FAST_MAX);
    uint64_t slow = 0;
    for (int i = 0; i < BLOCK; i++) {
        double xi = x[i];
        slow |= (gp_double_bits(xi) & abs_mask) + offset;
        double u = xi * TWO_OVER_PI + ROUND_MAGIC;
        double k = u - ROUND_MAGIC;
        uint64_t q = gp_double_bits(u); /* low bits: k mod 2^51, two's complement */
        double r = ((xi - k * PIO2_1) - k * PIO2_2) - k * PIO2_3;
        double zz = r * r;
        double ps = ((((S0 * zz + S1) * zz + S2) * zz + S3) * zz + S4) * zz + S5;
        double pc = ((((C0 * zz + C1) * zz + C2) * zz + C3) * zz + C4) * zz + C5;
        double sr = r + r * (zz * ps);
        double cr = 1.0 - 0.5 * zz + zz * zz * pc;
        /* Quadrant q: (cos, sin) = (c, s), (-s, c), (-c, -s), (s, -c). */
        uint64_t swap = (uint64_t)0 - (q & 1);
        /* sin r has the sign of r; copying it keeps sin(-0) = -0 (the
         * polynomial term would turn -0 into +0). */
        uint64_t sb = (gp_double_bits(sr) & abs_mask) | (gp_double_bits(r) & ~abs_mask);
        uint64_t cb = gp_double_bits(cr);
        uint64_t sin_b = ((sb & ~swap) | (cb & swap)) ^ ((q & 2) << 62);
        uint64_t cos_b = ((cb & ~swap) | (sb & swap)) ^ (((q + 1) & 2) << 62);
        s_out[i] = scale * gp_bits_double(sin_b);
        c_out[i] = scale * gp_bits_double(cos_b);
    }
    return (int)(slow >> 63);
}

void gp_sincos_scaled(double *z, double *s_out, size_t n, double scale)
{
    double in[BLOCK], c[BLOCK], s[BLOCK];
    for (size_t lo = 0; lo < n; lo += BLOCK) {
        size_t len = n - lo < BLOCK ? n - lo : BLOCK;
        memcpy(in, z + lo, len * sizeof *in);
        int slow;
        if (len == BLOCK) {
            slow = sincos_block(in, z + lo, s_out + lo, scale);
        } else {
            for (size_t i = len; i < BLOCK; i++)
                in[i] = 0.0;
            slow = sincos_block(in, c, s, scale);
            memcpy(z + lo, c, len * sizeof *c);
            memcpy(s_out + lo, s, len * sizeof *s);
        }
        if (slow == 0)
            continue;
        for (size_t i = 0; i < len; i++)
            if (!(fabs(in[i]) <= GP_SINCOS_FAST_MAX)) {
                z[lo + i] = scale * cos(in[i]);
                s_out[lo + i] = scale * sin(in[i]);
            }
    }
}

/* ---- exp (fastmath.h) ----
 * Blocks of EXP_BLOCK: every lane through the fast core, the whole block
 * flagged when one lane is outside the fast range, those lanes then redone
 * by gp_exp_slow. Cloned for the vector widths (AVX-512, AVX2, SSE2); no
 * clone contracts or reorders anything, so all give gp_exp's bits. */
#define EXP_BLOCK 64

static inline uint64_t exp_block(const double *restrict x, double *restrict y)
{
    uint64_t slow = 0;
    for (int i = 0; i < EXP_BLOCK; i++) {
        slow |= gp_exp_slow_flag(x[i]);
        y[i] = gp_exp_fast_core(x[i]);
    }
    return slow;
}

GP_CLONES
void gp_exp_block(const double *x, double *y, size_t n)
{
    double in[EXP_BLOCK], out[EXP_BLOCK];
    for (size_t lo = 0; lo < n; lo += EXP_BLOCK) {
        size_t len = n - lo < EXP_BLOCK ? n - lo : EXP_BLOCK;
        memcpy(in, x + lo, len * sizeof *in);
        for (size_t i = len; i < EXP_BLOCK; i++)
            in[i] = 0.0;
        uint64_t slow = exp_block(in, out);
        memcpy(y + lo, out, len * sizeof *out);
        if (slow == 0)
            continue;
        for (size_t i = 0; i < len; i++)
            if (gp_exp_slow_flag(in[i]))
                y[lo + i] = gp_exp_slow(in[i]);
    }
}
