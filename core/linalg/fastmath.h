/* gpserve core: fast elementary functions for the hot loops, and the
 * vector-width clones those loops are compiled as (GP_CLONES).
 *
 * gp_sincos_scaled replaces the libm cos()/sin() pair of the random-feature
 * map (core/features/rff.c), where the two calls were about a third of one LML
 * evaluation. Accuracy against libm (tests/unit/test_fastmath.c): absolute
 * error at most 1.5 ulp of 1 (3.4e-16) for every finite input; inputs with
 * |z| > GP_SINCOS_FAST_MAX and non-finite ones go through libm itself (NaN
 * and +-Inf give NaN exactly as cos()/sin() do). */
#ifndef GP_FASTMATH_H
#define GP_FASTMATH_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Largest |z| the fast path reduces itself (beyond: libm). */
#define GP_SINCOS_FAST_MAX 1e7

/* For i < n: s_out[i] = scale * sin(z[i]), then z[i] = scale * cos(z[i]).
 * z and s_out must not overlap. Deterministic and independent of how the
 * caller splits the array: every element is computed on its own. */
void gp_sincos_scaled(double *z, double *s_out, size_t n, double scale);

/* ---- the vector-width clones of hot loops ----
 * GP_CLONES: on x86-64 GCC, a function compiled three times (AVX-512, AVX2 +
 * FMA, the baseline), the copy for the CPU chosen at load time, each at -O3
 * so that its loops vectorise. Code under it must give the same bits in
 * every clone: fma() where it fuses (one rounding in any clone), and no
 * a * b + c that a clone could contract (C11 mode contracts none). "arch=
 * haswell" would not do: target_clones dispatches arch= clones on the CPU
 * model, so every other x86-64 CPU would get the baseline, where fma() is a
 * libm call (~25 times slower). One definition for core's hot loops (the
 * solve, gp_exp_block, the kernel's blocks and pair loops, the feature
 * maps). make GP_CLONES=avx2 (bench/README.md) defines GP_CLONES_AVX2: no
 * AVX-512 clone, so that an AVX-512 machine runs the code an AVX2 machine
 * runs. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(GP_CLONES_AVX2)
#define GP_CLONES __attribute__((target_clones("arch=x86-64-v3", "default"), optimize("O3")))
#elif defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define GP_CLONES \
    __attribute__((target_clones("avx512f", "arch=x86-64-v3", "default"), optimize("O3")))
#else
#define GP_CLONES
#endif


/* The IEEE-754 bit pattern of a double and back (well-defined, unlike a
 * union or pointer cast): for branch-free sign tricks and for searching
 * non-negative doubles in order (their patterns order as the values do). */
static inline uint64_t gp_double_bits(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline double gp_bits_double(uint64_t u)
{
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* ---- exp ----
 * gp_exp replaces libm's exp() in the kernels (core/kernel/kernel_formula.h)
 * so that a block of pairs can take it in vector lanes (gp_exp_block): one
 * function of x whatever computes it, so the Gram matrix, the cross matrix,
 * the gradient contraction and a single pair agree bit for bit.
 *
 * For |x| <= GP_EXP_FAST_MAX: x = k ln2 + r (k by the magic-constant
 * rounding, ln2 in two parts as in fdlibm's e_exp.c so that k ln2_hi is
 * exact), exp(r) = 1 + (r + r^2 q(r)) with q Taylor's to degree 13 (no
 * division: a vector divide costs more than the whole polynomial), and 2^k
 * built from k's bits. Plain multiplies and adds, no fma(): every target and every
 * vector width rounds the same operations the same way (C11 mode does not
 * contract a * b + c). Error below 1 ulp (tests/unit/test_fastmath.c: within
 * 1 ulp of libm's correctly rounded results). Beyond: 0 below -746 (where
 * libm's is 0 too), libm's own result otherwise (underflow to subnormals,
 * overflow, NaN). */
#define GP_EXP_FAST_MAX 708.0
#define GP_EXP_ZERO_BELOW (-746.0)

static inline double gp_exp_fast_core(double x)
{
    const double inv_ln2 = 0x1.71547652b82fep+0, magic = 0x1.8p52;
    const double ln2_hi = 0x1.62e42feep-1, ln2_lo = 0x1.a39ef35793c76p-33;
    /* 1/n! for n = 2 .. 13: Taylor's remainder on |r| <= ln2/2 is below
     * 5e-18 relative. */
    const double c2 = 1.0 / 2, c3 = 1.0 / 6, c4 = 1.0 / 24, c5 = 1.0 / 120, c6 = 1.0 / 720,
                 c7 = 1.0 / 5040, c8 = 1.0 / 40320, c9 = 1.0 / 362880, c10 = 1.0 / 3628800,
                 c11 = 1.0 / 39916800, c12 = 1.0 / 479001600, c13 = 1.0 / 6227020800;
    double u = x * inv_ln2 + magic;
    double k = u - magic;
    double r = (x - k * ln2_hi) - k * ln2_lo;
    /* Estrin's scheme: a short dependency chain, so that the lanes of a
     * block overlap (Horner's 12 dependent steps kept the vector units idle). */
    double r2 = r * r, r4 = r2 * r2;
    double p0 = c2 + r * c3, p1 = c4 + r * c5, p2 = c6 + r * c7;
    double p3 = c8 + r * c9, p4 = c10 + r * c11, p5 = c12 + r * c13;
    double q = (p0 + r2 * p1) + r4 * ((p2 + r2 * p3) + r4 * (p4 + r2 * p5));
    double y = 1.0 + (r + r2 * q);
    /* u's low bits hold k (two's complement): 2^k's exponent field. */
    uint64_t scale = (gp_double_bits(u) - gp_double_bits(magic) + 1023) << 52;
    return y * gp_bits_double(scale);
}

/* Nonzero when x is outside the fast range (or NaN): the bit-pattern test of
 * gp_sincos_scaled, an OR reduction the vectoriser accepts. */
static inline uint64_t gp_exp_slow_flag(double x)
{
    const uint64_t abs_mask = ~((uint64_t)1 << 63);
    return ((gp_double_bits(x) & abs_mask) + (abs_mask - gp_double_bits(GP_EXP_FAST_MAX))) >> 63;
}

static inline double gp_exp_slow(double x)
{
    return x < GP_EXP_ZERO_BELOW ? 0.0 : exp(x);
}

static inline double gp_exp(double x)
{
    return gp_exp_slow_flag(x) ? gp_exp_slow(x) : gp_exp_fast_core(x);
}

/* y[i] = gp_exp(x[i]) for i < n, in vector lanes (x and y may be the same
 * array; otherwise they must not overlap). */
void gp_exp_block(const double *x, double *y, size_t n);

#endif
