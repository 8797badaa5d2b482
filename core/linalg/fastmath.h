/* gpserve core: fast elementary functions for the hot loops.
 *
 * gp_sincos_scaled replaces the libm cos()/sin() pair of the random-feature
 * map (core/features/rff.c), where the two calls were about a third of one LML
 * evaluation. Accuracy against libm (tests/unit/test_fastmath.c): absolute
 * error at most 1.5 ulp of 1 (3.4e-16) for every finite input; inputs with
 * |z| > GP_SINCOS_FAST_MAX and non-finite ones go through libm itself (NaN
 * and +-Inf give NaN exactly as cos()/sin() do). */
#ifndef GP_FASTMATH_H
#define GP_FASTMATH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Largest |z| the fast path reduces itself (beyond: libm). */
#define GP_SINCOS_FAST_MAX 1e7

/* For i < n: s_out[i] = scale * sin(z[i]), then z[i] = scale * cos(z[i]).
 * z and s_out must not overlap. Deterministic and independent of how the
 * caller splits the array: every element is computed on its own. */
void gp_sincos_scaled(double *z, double *s_out, size_t n, double scale);

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

#endif
