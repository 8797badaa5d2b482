/* gpserve core: fast elementary functions for the hot loops.
 *
 * gp_sincos_scaled replaces the libm cos()/sin() pair of the random-feature
 * map (core/rff.c), where the two calls were about a third of one LML
 * evaluation. Accuracy against libm (tests/unit/test_fastmath.c): absolute
 * error at most 1.5 ulp of 1 (3.4e-16) for every finite input; inputs with
 * |z| > GP_SINCOS_FAST_MAX and non-finite ones go through libm itself (NaN
 * and +-Inf give NaN exactly as cos()/sin() do). */
#ifndef GP_FASTMATH_H
#define GP_FASTMATH_H

#include <stddef.h>

/* Largest |z| the fast path reduces itself (beyond: libm). */
#define GP_SINCOS_FAST_MAX 1e7

/* For i < n: s_out[i] = scale * sin(z[i]), then z[i] = scale * cos(z[i]).
 * z and s_out must not overlap. Deterministic and independent of how the
 * caller splits the array: every element is computed on its own. */
void gp_sincos_scaled(double *z, double *s_out, size_t n, double scale);

#endif
