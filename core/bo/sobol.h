/* gpserve core: Sobol points, plain and scrambled.
 *
 * The direction numbers are Joe and Kuo's (new-joe-kuo-6.21201,
 * core/bo/sobol_table.h) with 30 bits, and point i is the Gray-code point
 * of scipy.stats.qmc.Sobol: the plain sequence equals
 * Sobol(d, scramble=False).random(n) exactly (tests/fixtures/sobol_plain.txt).
 * Scrambled as scipy's Sobol(scramble=True) does (the random numbers are
 * ours, so the points are not scipy's): a linear matrix scramble (each
 * dimension's direction numbers multiplied by a random lower-triangular
 * binary matrix with unit diagonal) and a random digital shift, both from
 * xoshiro streams derived from (seed, dimension). Both keep the (t, m, s)-net
 * property of every prefix of 2^m points. */
#ifndef GP_BO_SOBOL_H
#define GP_BO_SOBOL_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/error.h"
#include "core/bo/sobol_table.h"

/* Points of one sequence: 2^GP_SOBOL_BITS of them. */
#define GP_SOBOL_BITS 30

/* Points first .. first + n - 1 of the scrambled sequence of `seed` in dim
 * dimensions, point-major into out (dim x n column-major: point j at
 * out + j dim), in [0, 1). The first coordinates do not depend on dim.
 * GP_EINVAL for dim 0 or above GP_SOBOL_MAX_DIM, or first + n beyond
 * 2^GP_SOBOL_BITS. */
int gp_sobol_points(size_t dim, uint64_t seed, uint64_t first, size_t n, double *out,
                    gp_error *err);
/* The same points unscrambled (scipy's scramble=False). */
int gp_sobol_points_plain(size_t dim, uint64_t first, size_t n, double *out, gp_error *err);

#endif
