/* gpserve core: seeded, portable random numbers.
 *
 * xoshiro256** seeded through splitmix64, so the same 64-bit seed gives the same
 * stream on every platform. A gp_rng is plain data owned by its user; no global
 * generator exists. */
#ifndef GP_RNG_H
#define GP_RNG_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/error.h"

typedef struct gp_rng {
    uint64_t s[4];
} gp_rng;

void gp_rng_seed(gp_rng *rng, uint64_t seed);
uint64_t gp_rng_next(gp_rng *rng);
/* Independent stream for sub-task k (e.g. restart k, particle k): a generator
 * seeded from (seed, k) so results do not depend on the order tasks run in. */
void gp_rng_derive(gp_rng *out, uint64_t seed, uint64_t k);
/* Uniform on [0, 1) with 53 random bits. */
double gp_rng_uniform(gp_rng *rng);
/* Uniform on (0, 1): never 0, safe for log(). */
double gp_rng_uniform_pos(gp_rng *rng);
/* Standard normal (Marsaglia polar method; deterministic for a given state). */
double gp_rng_normal(gp_rng *rng);
void gp_rng_normal_fill(gp_rng *rng, double *out, size_t count);
/* Gamma(shape, 1), shape > 0 (Marsaglia-Tsang, with the shape < 1 boost). */
double gp_rng_gamma(gp_rng *rng, double shape);
/* Chi-square with k > 0 degrees of freedom (= 2 Gamma(k/2)). */
double gp_rng_chisq(gp_rng *rng, double k);
/* Uniform integer in [0, n), n > 0, without modulo bias. */
uint64_t gp_rng_below(gp_rng *rng, uint64_t n);

/* Scrambled Halton sequence in (0,1)^dim (dim <= GP_HALTON_MAX_DIM): the first
 * dim primes as bases; in each dimension every digit goes through one random
 * permutation of {1, ..., b-1} drawn from rng, with 0 kept fixed (so the tail of
 * zero digits stays zero and, as the index is >= 1, no point is 0). out is column-major count x dim; point i uses index
 * start + i + 1, so consecutive calls continue the sequence. */
#define GP_HALTON_MAX_DIM 256
int gp_halton_scrambled(gp_rng *rng, size_t dim, size_t start, size_t count, double *out,
                        gp_error *err);

/* Standard normal quantile (inverse CDF), p in (0, 1); Acklam's rational
 * approximation refined by one Halley step (relative error ~1e-15). */
double gp_normal_quantile(double p);

/* log Gamma(a) for a > 0: our own (Stirling's series with the recurrence
 * below 10), as lgamma writes the global signgam (not thread-safe in POSIX). */
double gp_log_gamma(double a);
/* The regularised incomplete gammas P(a, y) and Q(a, y) = 1 - P for a, y > 0,
 * each to full relative accuracy where it is the smaller (the series below
 * y = a + 1, the continued fraction above). */
void gp_incomplete_gamma(double a, double y, double *P, double *Q);

/* Chi-square quantile with k degrees of freedom: the x with P(k/2, x/2) = p
 * for the regularised lower incomplete gamma P, p in (0, 1), k > 0 (accurate
 * to ~1e-12 relative for k in [0.5, 1000]). p = 0 gives 0, p = 1 +INFINITY;
 * p outside [0, 1], k <= 0 or NaN give NaN. Used for the radial coordinate of
 * QMC Student-t frequencies. */
double gp_chisq_quantile(double p, double k);

#endif
