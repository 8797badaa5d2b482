/* Unit tests for core/base/rng.c: reference vectors, distribution moments, the
 * scrambled Halton sequence and the normal quantile.
 *
 * Statistical checks use fixed seeds and tolerances of about 5 standard errors,
 * so they are deterministic and a wrong distribution (scale, shape, bias) fails
 * them by a wide margin. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/rng.h"

#define SQRT2 1.4142135623730951
#define PI 3.141592653589793

/* ---- Reference vectors --------------------------------------------------
 *
 * Computed with an independent Python 3 implementation of the reference
 * algorithms (Vigna's splitmix64.c and xoshiro256starstar.c), run with
 * /usr/bin/python3:
 *
 *   M = 2**64 - 1
 *   def splitmix64(x):
 *       while True:
 *           x = (x + 0x9E3779B97F4A7C15) & M
 *           z = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M
 *           z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
 *           yield z ^ (z >> 31)
 *   rotl = lambda x, k: ((x << k) | (x >> (64 - k))) & M
 *   def xoshiro(s):
 *       while True:
 *           r = (rotl((s[1] * 5) & M, 7) * 9) & M
 *           t = (s[1] << 17) & M
 *           s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]
 *           s[2] ^= t; s[3] = rotl(s[3], 45)
 *           yield r
 *
 * The script also reproduces the published vectors (splitmix64 from 1234567:
 * 6457827717110365317, 3203168211198807973, ...; xoshiro256** from state
 * {1, 2, 3, 4}: 11520, 0, 1509978240, ...), which are tested directly too. */

static void test_splitmix_reference_vector(void **state)
{
    (void)state;
    /* gp_rng_seed stores the first four splitmix64 outputs, so the state after
     * seeding 1234567 is the start of the published splitmix64 vector. */
    const uint64_t expect[4] = {UINT64_C(6457827717110365317), UINT64_C(3203168211198807973),
                                UINT64_C(9817491932198370423), UINT64_C(4593380528125082431)};
    gp_rng r;
    gp_rng_seed(&r, 1234567);
    for (int i = 0; i < 4; i++)
        assert_true(r.s[i] == expect[i]);
}

static void test_xoshiro_reference_vector(void **state)
{
    (void)state;
    const uint64_t expect[10] = {
        UINT64_C(11520),
        UINT64_C(0),
        UINT64_C(1509978240),
        UINT64_C(1215971899390074240),
        UINT64_C(1216172134540287360),
        UINT64_C(607988272756665600),
        UINT64_C(16172922978634559625),
        UINT64_C(8476171486693032832),
        UINT64_C(10595114339597558777),
        UINT64_C(2904607092377533576),
    };
    gp_rng r = {{1, 2, 3, 4}};
    for (int i = 0; i < 10; i++)
        assert_true(gp_rng_next(&r) == expect[i]);
}

struct seeded_ref {
    uint64_t seed;
    uint64_t state[4];
    uint64_t out[6];
};

static const struct seeded_ref SEEDED_REFS[] = {
    {UINT64_C(0),
     {UINT64_C(0xe220a8397b1dcdaf), UINT64_C(0x6e789e6aa1b965f4), UINT64_C(0x06c45d188009454f),
      UINT64_C(0xf88bb8a8724c81ec)},
     {UINT64_C(0x99ec5f36cb75f2b4), UINT64_C(0xbf6e1f784956452a), UINT64_C(0x1a5f849d4933e6e0),
      UINT64_C(0x6aa594f1262d2d2c), UINT64_C(0xbba5ad4a1f842e59), UINT64_C(0xffef8375d9ebcaca)}},
    {UINT64_C(42),
     {UINT64_C(0xbdd732262feb6e95), UINT64_C(0x28efe333b266f103), UINT64_C(0x47526757130f9f52),
      UINT64_C(0x581ce1ff0e4ae394)},
     {UINT64_C(0x15780b2e0c2ec716), UINT64_C(0x6104d9866d113a7e), UINT64_C(0xae17533239e499a1),
      UINT64_C(0xecb8ad4703b360a1), UINT64_C(0xfde6dc7fe2ec5e64), UINT64_C(0xc50da53101795238)}},
    {UINT64_C(0xdeadbeefcafef00d),
     {UINT64_C(0x901d4f652fb472cb), UINT64_C(0xa7ce246440f74527), UINT64_C(0x19b40bbbb9380d34),
      UINT64_C(0xe7a86dc5be618392)},
     {UINT64_C(0x9e32cfb5bb93eebb), UINT64_C(0x16006bd9d4ac0014), UINT64_C(0x8ada5d6d34b6538e),
      UINT64_C(0x7c327ca32346a238), UINT64_C(0xc43a6d6a3492ced2), UINT64_C(0xdb639ecb036a9c04)}},
};

static void test_seeded_stream_reference(void **state)
{
    (void)state;
    for (size_t c = 0; c < sizeof SEEDED_REFS / sizeof SEEDED_REFS[0]; c++) {
        const struct seeded_ref *ref = &SEEDED_REFS[c];
        gp_rng r;
        gp_rng_seed(&r, ref->seed);
        for (int i = 0; i < 4; i++)
            assert_true(r.s[i] == ref->state[i]);
        for (int i = 0; i < 6; i++)
            assert_true(gp_rng_next(&r) == ref->out[i]);
    }
}

static void test_same_seed_same_stream(void **state)
{
    (void)state;
    gp_rng a, b, c;
    gp_rng_seed(&a, 987654321);
    gp_rng_seed(&b, 987654321);
    gp_rng_seed(&c, 987654322);
    int differ = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t va = gp_rng_next(&a);
        assert_true(va == gp_rng_next(&b));
        differ += va != gp_rng_next(&c);
    }
    assert_int_equal(differ, 1000);
}

/* ---- Derived streams --------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void test_derive_reproducible_and_distinct(void **state)
{
    (void)state;
    enum { K = 1000 };
    uint64_t first[K + 1];
    for (uint64_t k = 0; k < K; k++) {
        gp_rng a, b;
        gp_rng_derive(&a, 2024, k);
        gp_rng_derive(&b, 2024, k);
        assert_memory_equal(a.s, b.s, sizeof a.s);
        first[k] = gp_rng_next(&a);
        /* Another seed gives another stream for the same k. */
        gp_rng_derive(&b, 2025, k);
        assert_true(gp_rng_next(&b) != first[k]);
    }
    gp_rng plain;
    gp_rng_seed(&plain, 2024);
    first[K] = gp_rng_next(&plain);
    /* All K derived streams and the plain stream start differently. */
    qsort(first, K + 1, sizeof first[0], cmp_u64);
    for (int i = 0; i < K; i++)
        assert_true(first[i] != first[i + 1]);
}

static void test_derive_streams_uncorrelated(void **state)
{
    (void)state;
    enum { N = 200000 };
    gp_rng a, b;
    gp_rng_derive(&a, 1, 0);
    gp_rng_derive(&b, 1, 1);
    double sa = 0, sb = 0, sab = 0, saa = 0, sbb = 0;
    for (int i = 0; i < N; i++) {
        double x = gp_rng_uniform(&a), y = gp_rng_uniform(&b);
        sa += x, sb += y, sab += x * y, saa += x * x, sbb += y * y;
    }
    double cov = sab / N - (sa / N) * (sb / N);
    double r = cov / sqrt((saa / N - (sa / N) * (sa / N)) * (sbb / N - (sb / N) * (sb / N)));
    assert_true(fabs(r) < 5.0 / sqrt(N));
}

/* ---- Moments helpers --------------------------------------------------- */

struct moments {
    double mean, var, skew, kurt; /* kurt is the excess kurtosis */
};

static struct moments sample_moments(const double *x, size_t n)
{
    double mean = 0;
    for (size_t i = 0; i < n; i++)
        mean += x[i];
    mean /= n;
    double m2 = 0, m3 = 0, m4 = 0;
    for (size_t i = 0; i < n; i++) {
        double d = x[i] - mean, d2 = d * d;
        m2 += d2, m3 += d2 * d, m4 += d2 * d2;
    }
    m2 /= n, m3 /= n, m4 /= n;
    struct moments m = {mean, m2, m3 / pow(m2, 1.5), m4 / (m2 * m2) - 3.0};
    return m;
}

/* ---- Uniform ------------------------------------------------------------ */

static void test_uniform_range_and_moments(void **state)
{
    (void)state;
    enum { N = 1000000 };
    double *x = malloc(N * sizeof *x);
    assert_non_null(x);
    gp_rng r;
    gp_rng_seed(&r, 11);
    for (int i = 0; i < N; i++) {
        x[i] = gp_rng_uniform(&r);
        assert_true(x[i] >= 0.0 && x[i] < 1.0);
        /* 53 random bits: every value is a multiple of 2^-53. */
        double scaled = x[i] * 9007199254740992.0;
        assert_true(scaled == floor(scaled));
    }
    struct moments m = sample_moments(x, N);
    assert_true(fabs(m.mean - 0.5) < 5.0 * sqrt(1.0 / 12.0 / N));
    /* Var of the sample variance of U(0,1) = (mu4 - sigma^4)/N = (1/80 - 1/144)/N. */
    assert_true(fabs(m.var - 1.0 / 12.0) < 5.0 * sqrt((1.0 / 80 - 1.0 / 144) / N));
    for (int i = 0; i < N; i++) {
        x[i] = gp_rng_uniform_pos(&r);
        assert_true(x[i] > 0.0 && x[i] < 1.0);
    }
    m = sample_moments(x, N);
    assert_true(fabs(m.mean - 0.5) < 5.0 * sqrt(1.0 / 12.0 / N));
    free(x);
}

/* Inverse of an odd number modulo 2^64 (Newton's iteration doubles the number
 * of correct bits each step, starting from 3 correct bits since a*a = 1 mod 8). */
static uint64_t inverse_mod_2_64(uint64_t a)
{
    uint64_t inv = a;
    for (int i = 0; i < 5; i++)
        inv *= 2 - a * inv;
    return inv;
}

static void test_uniform_extreme_outputs(void **state)
{
    (void)state;
    /* xoshiro256** outputs rotl(s1 * 5, 7) * 9, so a chosen s[1] forces the
     * next raw output: 0 for s1 = 0, UINT64_MAX for the s1 solved below. */
    gp_rng r = {{1, 0, 3, 4}};
    gp_rng c = r;
    assert_true(gp_rng_next(&c) == 0);
    c = r;
    assert_true(gp_rng_uniform(&c) == 0.0);
    c = r;
    double lo = gp_rng_uniform_pos(&c);
    assert_true(lo > 0.0 && log(lo) > -40.0);

    uint64_t rot = UINT64_MAX * inverse_mod_2_64(9);
    uint64_t s1 = ((rot >> 7) | (rot << 57)) * inverse_mod_2_64(5);
    gp_rng top = {{1, s1, 3, 4}};
    c = top;
    assert_true(gp_rng_next(&c) == UINT64_MAX);
    c = top;
    assert_true(gp_rng_uniform(&c) < 1.0);
    c = top;
    assert_true(gp_rng_uniform_pos(&c) < 1.0);
}

/* ---- Normal ------------------------------------------------------------- */

static void test_normal_moments(void **state)
{
    (void)state;
    enum { N = 1000000 };
    double *x = malloc(N * sizeof *x);
    assert_non_null(x);
    gp_rng r;
    gp_rng_seed(&r, 12345);
    gp_rng_normal_fill(&r, x, N);
    struct moments m = sample_moments(x, N);
    /* Standard errors for N(0,1): mean 1/sqrt(N), variance sqrt(2/N),
     * skewness sqrt(6/N), excess kurtosis sqrt(24/N). */
    assert_true(fabs(m.mean) < 5.0 * sqrt(1.0 / N));
    assert_true(fabs(m.var - 1.0) < 5.0 * sqrt(2.0 / N));
    assert_true(fabs(m.skew) < 5.0 * sqrt(6.0 / N));
    assert_true(fabs(m.kurt) < 5.0 * sqrt(24.0 / N));
    /* Tail mass beyond 3 sigma: 2 (1 - Phi(3)) = 0.0026998. */
    size_t tail = 0;
    for (int i = 0; i < N; i++)
        tail += fabs(x[i]) > 3.0;
    double p3 = 0.0026997960632601866;
    assert_true(fabs((double)tail - N * p3) < 5.0 * sqrt(N * p3));
    free(x);
}

static void test_normal_fill_matches_single_draws(void **state)
{
    (void)state;
    gp_rng a, b;
    gp_rng_seed(&a, 3);
    gp_rng_seed(&b, 3);
    double buf[100];
    gp_rng_normal_fill(&a, buf, 100);
    for (int i = 0; i < 100; i++)
        assert_true(buf[i] == gp_rng_normal(&b));
    assert_memory_equal(a.s, b.s, sizeof a.s);
}

/* ---- Gamma and chi-square ------------------------------------------------ */

/* Checks mean and variance of `n` draws of scale * Gamma(shape) against
 * scale * shape and scale^2 * shape, with 5-standard-error tolerances. The
 * sample variance's variance is (mu4 - sigma^4)/n, mu4 = scale^4 (3a^2 + 6a). */
static void check_gamma_draws(const double *x, size_t n, double shape, double scale)
{
    struct moments m = sample_moments(x, n);
    double mean = scale * shape, var = scale * scale * shape;
    double se_mean = sqrt(var / n);
    double se_var = scale * scale * sqrt((2.0 * shape * shape + 6.0 * shape) / n);
    assert_true(fabs(m.mean - mean) < 5.0 * se_mean);
    assert_true(fabs(m.var - var) < 5.0 * se_var);
}

static void test_gamma_moments(void **state)
{
    (void)state;
    enum { N = 400000 };
    const double shapes[] = {0.3, 0.5, 1.0, 2.5, 10.0};
    double *x = malloc(N * sizeof *x);
    assert_non_null(x);
    gp_rng r;
    gp_rng_seed(&r, 77);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        for (int i = 0; i < N; i++) {
            x[i] = gp_rng_gamma(&r, shapes[s]);
            assert_true(x[i] >= 0.0 && isfinite(x[i]));
        }
        check_gamma_draws(x, N, shapes[s], 1.0);
    }
    free(x);
}

static void test_chisq_moments(void **state)
{
    (void)state;
    enum { N = 400000 };
    const double dofs[] = {0.6, 1.0, 3.0, 10.0};
    double *x = malloc(N * sizeof *x);
    assert_non_null(x);
    gp_rng r;
    gp_rng_seed(&r, 78);
    for (size_t s = 0; s < sizeof dofs / sizeof dofs[0]; s++) {
        for (int i = 0; i < N; i++)
            x[i] = gp_rng_chisq(&r, dofs[s]);
        /* chi2(k) = 2 Gamma(k/2): mean k, variance 2k. */
        check_gamma_draws(x, N, dofs[s] / 2.0, 2.0);
    }
    free(x);
}

static void test_gamma_invalid_shape(void **state)
{
    (void)state;
    gp_rng r;
    gp_rng_seed(&r, 1);
    assert_true(isnan(gp_rng_gamma(&r, 0.0)));
    assert_true(isnan(gp_rng_gamma(&r, -1.0)));
    assert_true(isnan(gp_rng_gamma(&r, NAN)));
    assert_true(isnan(gp_rng_chisq(&r, 0.0)));
}

/* ---- below() ------------------------------------------------------------- */

static void test_below_range_and_uniformity(void **state)
{
    (void)state;
    enum { N = 700000, B = 7 };
    gp_rng r;
    gp_rng_seed(&r, 5);
    long counts[B] = {0};
    for (int i = 0; i < N; i++) {
        uint64_t v = gp_rng_below(&r, B);
        assert_true(v < B);
        counts[v]++;
    }
    double chi2 = 0, e = (double)N / B;
    for (int b = 0; b < B; b++)
        chi2 += (counts[b] - e) * (counts[b] - e) / e;
    /* chi-square with 6 dof: P(chi2 > 40) ~ 4.6e-7. */
    assert_true(chi2 < 40.0);
}

static void test_below_no_modulo_bias(void **state)
{
    (void)state;
    /* n = 3 * 2^62: plain r % n would put values below 2^62 with probability
     * 1/2 instead of 1/3, which this chi-square test over the three thirds of
     * the range detects immediately. */
    enum { N = 300000 };
    const uint64_t n = UINT64_C(3) << 62;
    gp_rng r;
    gp_rng_seed(&r, 6);
    long counts[3] = {0};
    for (int i = 0; i < N; i++) {
        uint64_t v = gp_rng_below(&r, n);
        assert_true(v < n);
        counts[v >> 62]++;
    }
    double chi2 = 0, e = N / 3.0;
    for (int b = 0; b < 3; b++)
        chi2 += (counts[b] - e) * (counts[b] - e) / e;
    /* chi-square with 2 dof: P(chi2 > 30) ~ 3e-7. */
    assert_true(chi2 < 30.0);
}

static void test_below_edge_cases(void **state)
{
    (void)state;
    gp_rng r;
    gp_rng_seed(&r, 8);
    for (int i = 0; i < 100; i++) {
        assert_true(gp_rng_below(&r, 1) == 0);
        assert_true(gp_rng_below(&r, 0) == 0);
        assert_true(gp_rng_below(&r, UINT64_MAX) < UINT64_MAX);
        assert_true(gp_rng_below(&r, 2) < 2);
    }
}

/* ---- Scrambled Halton ---------------------------------------------------- */

static const unsigned PRIMES[] = {2, 3, 5, 7, 11, 13, 17, 19, 23, 29};

static void test_halton_invalid_arguments(void **state)
{
    (void)state;
    gp_rng r;
    gp_rng_seed(&r, 1);
    double out[4];
    gp_error err;
    gp_error_clear(&err);
    assert_int_equal(gp_halton_scrambled(&r, 0, 0, 1, out, &err), GP_EINVAL);
    assert_int_equal(err.code, GP_EINVAL);
    assert_string_equal(err.field, "dim");
    assert_int_equal(gp_halton_scrambled(&r, GP_HALTON_MAX_DIM + 1, 0, 1, out, &err),
                     GP_EINVAL);
    assert_int_equal(gp_halton_scrambled(&r, 2, 0, 2, NULL, &err), GP_EINVAL);
    assert_int_equal(gp_halton_scrambled(&r, 1, SIZE_MAX - 1, 2, out, NULL), GP_EINVAL);
    assert_int_equal(gp_halton_scrambled(&r, 1, SIZE_MAX, 1, out, NULL), GP_EINVAL);
    /* count 0 is a valid empty request, even without a buffer. */
    gp_rng before = r;
    assert_int_equal(gp_halton_scrambled(&r, 3, 0, 0, NULL, &err), GP_OK);
    assert_memory_equal(before.s, r.s, sizeof r.s);
}

static void test_halton_in_open_unit_cube(void **state)
{
    (void)state;
    enum { COUNT = 2000 };
    /* The last start ends at index SIZE_MAX, all ones in base 2: its exact
     * radical inverse 1 - 2^-64 rounds to 1.0 and must be clamped. */
    const size_t starts[] = {0, 123456, (size_t)1 << 40, SIZE_MAX - COUNT};
    double *out = malloc((size_t)COUNT * GP_HALTON_MAX_DIM * sizeof *out);
    assert_non_null(out);
    gp_rng r;
    gp_rng_seed(&r, 9);
    for (size_t s = 0; s < sizeof starts / sizeof starts[0]; s++) {
        assert_int_equal(
            gp_halton_scrambled(&r, GP_HALTON_MAX_DIM, starts[s], COUNT, out, NULL), GP_OK);
        for (size_t i = 0; i < (size_t)COUNT * GP_HALTON_MAX_DIM; i++)
            assert_true(out[i] > 0.0 && out[i] < 1.0);
    }
    free(out);
}

/* Among b^k consecutive indices the last k base-b digits take every value
 * once, and they fix the first k digits of the permuted radical inverse (a
 * bijection, as the digit permutation is). So any block of b^k consecutive
 * indices - not only the first - puts exactly one point in each interval
 * [j/b^k, (j+1)/b^k). That is exact in real arithmetic; in doubles a point on
 * a left boundary j/b^k is stored as the rounded fl(j/b^k), and fl(j/b^k) * b^k
 * can come out as j - 2e-13 (verified: floor() alone misfiles such points), so
 * cells are read with a 1e-9 nudge. No genuine point is that close to the right
 * end of its cell: for these indices the digits beyond the k-th leave a gap of
 * more than 1e-5 of a cell. */
static void test_halton_stratified_1d(void **state)
{
    (void)state;
    const size_t starts[] = {0, 1, 17, 1000, 123456789};
    const unsigned powers[] = {4096, 2187, 3125, 2401, 1331}; /* 2^12 3^7 5^5 7^4 11^3 */
    enum { DIM = 5, MAXN = 4096 };
    double *out = malloc(MAXN * DIM * sizeof *out);
    int *hit = malloc(MAXN * sizeof *hit);
    assert_non_null(out);
    assert_non_null(hit);
    for (size_t s = 0; s < sizeof starts / sizeof starts[0]; s++) {
        for (unsigned d = 0; d < DIM; d++) {
            unsigned n = powers[d];
            gp_rng r;
            gp_rng_seed(&r, 100 + s);
            assert_int_equal(gp_halton_scrambled(&r, DIM, starts[s], n, out, NULL), GP_OK);
            memset(hit, 0, MAXN * sizeof *hit);
            for (unsigned i = 0; i < n; i++) {
                size_t cell = (size_t)floor(out[d * n + i] * n + 1e-9);
                assert_true(cell < n);
                hit[cell]++;
            }
            for (unsigned j = 0; j < n; j++)
                assert_int_equal(hit[j], 1);
        }
    }
    free(out);
    free(hit);
}

/* Bases 2 and 3 together: 2^a 3^c consecutive indices cover every pair of
 * residues (mod 2^a, mod 3^c) once (Chinese remainder theorem), so the
 * 2^a x 3^c grid of boxes gets one point each. */
static void test_halton_stratified_2d(void **state)
{
    (void)state;
    enum { NX = 32, NY = 27, N = NX * NY };
    double out[2 * N];
    int hit[N];
    const size_t starts[] = {0, 5, 4242};
    for (size_t s = 0; s < sizeof starts / sizeof starts[0]; s++) {
        gp_rng r;
        gp_rng_seed(&r, 31 + s);
        assert_int_equal(gp_halton_scrambled(&r, 2, starts[s], N, out, NULL), GP_OK);
        memset(hit, 0, sizeof hit);
        for (int i = 0; i < N; i++) {
            int cx = (int)floor(out[i] * NX), cy = (int)floor(out[N + i] * NY);
            hit[cx * NY + cy]++;
        }
        for (int j = 0; j < N; j++)
            assert_int_equal(hit[j], 1);
    }
}

/* Every digit position has its own permutation of all b digits (0 included),
 * as scipy's scrambled Halton. For indices 1..b-1 only the first digit is
 * nonzero, so x(i) = pi_0(i)/b + c with one constant tail c (the images of
 * the zero digits at the deeper positions), 0 <= c < 1/b; index b has first
 * digit 0, so {floor(b x(i)) : i = 1..b} = {pi_0(1..b-1), pi_0(0)} is a
 * permutation of 0..b-1. */
static void test_halton_digit_permutation_structure(void **state)
{
    (void)state;
    enum { DIM = 10, COUNT = 40 };
    double out[DIM * COUNT];
    int seen7[7] = {0};
    for (uint64_t seed = 0; seed < 60; seed++) {
        gp_rng r;
        gp_rng_seed(&r, seed);
        assert_int_equal(gp_halton_scrambled(&r, DIM, 0, COUNT, out, NULL), GP_OK);
        for (int d = 0; d < DIM; d++) {
            unsigned b = PRIMES[d];
            if (b > COUNT)
                continue;
            const double *col = out + d * COUNT; /* col[i] is index i + 1 */
            int hit[32] = {0};
            double c = col[0] * b - floor(col[0] * b);
            for (unsigned i = 0; i < b; i++) {
                int digit = (int)floor(col[i] * b);
                assert_true(digit >= 0 && digit < (int)b);
                hit[digit]++;
                if (i + 1 < b) /* indices 1..b-1 share the tail */
                    assert_true(fabs((col[i] * b - digit) - c) < 1e-12);
            }
            for (unsigned v = 0; v < b; v++)
                assert_int_equal(hit[v], 1);
            if (d == 3)
                seen7[(int)floor(col[0] * b)]++;
        }
    }
    /* Scrambling is really random: over 60 seeds pi_0(1) for base 7 takes every
     * value in 0..6 (each has probability 1/7; missing one has p ~ 1e-3). */
    for (int v = 0; v < 7; v++)
        assert_true(seen7[v] > 0);
}

/* Positions are permuted independently and summed exactly: for base 1619
 * (dimension 256, 4 digit positions below 2^53) and n = q b + r with r, q < b,
 * x(n) - x(r) depends on q only through the second position, so
 * x(q b + r) - x(r) = x(q b + r') - x(r') for any other r'. */
static void test_halton_deep_digits(void **state)
{
    (void)state;
    const size_t b = 1619, q = 7, r1 = 5, r2 = 1200;
    double *out = malloc(GP_HALTON_MAX_DIM * sizeof *out);
    assert_non_null(out);
    gp_rng seeded, rng;
    gp_rng_seed(&seeded, 4);
    const size_t idx[4] = {q * b + r1, r1, q * b + r2, r2};
    double x[4];
    for (int k = 0; k < 4; k++) {
        rng = seeded;
        assert_int_equal(gp_halton_scrambled(&rng, GP_HALTON_MAX_DIM, idx[k] - 1, 1, out, NULL),
                         GP_OK);
        x[k] = out[GP_HALTON_MAX_DIM - 1];
    }
    assert_true(x[0] != x[1]);
    assert_true(fabs((x[0] - x[1]) - (x[2] - x[3])) <= 4e-16);
    free(out);
}

static void test_halton_reproducible_and_seeded(void **state)
{
    (void)state;
    enum { DIM = 8, COUNT = 200 };
    double a[DIM * COUNT], b[DIM * COUNT], c[DIM * COUNT];
    gp_rng ra, rb, rc;
    gp_rng_seed(&ra, 55);
    gp_rng_seed(&rb, 55);
    gp_rng_seed(&rc, 56);
    assert_int_equal(gp_halton_scrambled(&ra, DIM, 0, COUNT, a, NULL), GP_OK);
    assert_int_equal(gp_halton_scrambled(&rb, DIM, 0, COUNT, b, NULL), GP_OK);
    assert_int_equal(gp_halton_scrambled(&rc, DIM, 0, COUNT, c, NULL), GP_OK);
    assert_memory_equal(a, b, sizeof a);
    assert_memory_equal(ra.s, rb.s, sizeof ra.s);
    assert_true(memcmp(a, c, sizeof a) != 0);
}

static void test_halton_continuation(void **state)
{
    (void)state;
    enum { DIM = 6, FULL = 100, START = 40, TAIL = FULL - START };
    double full[DIM * FULL], tail[DIM * TAIL];
    gp_rng r;
    gp_rng_seed(&r, 2718);
    assert_int_equal(gp_halton_scrambled(&r, DIM, 0, FULL, full, NULL), GP_OK);
    gp_rng_seed(&r, 2718);
    assert_int_equal(gp_halton_scrambled(&r, DIM, START, TAIL, tail, NULL), GP_OK);
    for (int d = 0; d < DIM; d++)
        for (int i = 0; i < TAIL; i++)
            assert_true(tail[d * TAIL + i] == full[d * FULL + START + i]);
}

/* Integrates prod_j (pi/2) sin(pi x_j) over [0,1]^5 (exact value 1). Plain
 * Monte Carlo has RMS error sqrt((1 + var1)^5 - 1)/sqrt(N) with var1 = pi^2/8 - 1,
 * about 0.0106 for N = 16384. Over 10 scrambles the Halton RMS error must be
 * below a tenth of that (measured: ~0.05) and every single error below a fifth
 * (measured: at most ~0.09); points from an ordinary generator fail both. */
static void test_halton_beats_monte_carlo(void **state)
{
    (void)state;
    enum { DIM = 5, N = 16384, SEEDS = 10 };
    double *out = malloc(DIM * N * sizeof *out);
    assert_non_null(out);
    double mc_rms = sqrt(pow(PI * PI / 8.0, DIM) - 1.0) / sqrt(N);
    double sq = 0;
    for (uint64_t seed = 0; seed < SEEDS; seed++) {
        gp_rng r;
        gp_rng_seed(&r, seed);
        assert_int_equal(gp_halton_scrambled(&r, DIM, 0, N, out, NULL), GP_OK);
        double sum = 0;
        for (int i = 0; i < N; i++) {
            double f = 1.0;
            for (int d = 0; d < DIM; d++)
                f *= PI / 2.0 * sin(PI * out[d * N + i]);
            sum += f;
        }
        double e = sum / N - 1.0;
        assert_true(fabs(e) < 0.2 * mc_rms);
        sq += e * e;
    }
    assert_true(sqrt(sq / SEEDS) < 0.1 * mc_rms);
    free(out);
}

/* ---- Normal quantile ----------------------------------------------------- */

struct quantile_ref {
    double p, x;
};

/* Exact quantiles of the given doubles, from mpmath (50 digits) with
 * findroot(lambda t: ncdf(t) - mpf(p), ...) under /usr/bin/python3. */
static const struct quantile_ref QUANTILE_REFS[] = {
    {0.975, 1.9599639845400538556},
    {0.025, -1.9599639845400542118},
    {1e-10, -6.3613409024040561991},
    {0.9999999999, 6.3613408896974218642},
    {0.3, -0.52440051270804081597},
    {0.7, 0.52440051270804065631},
    {0.01, -2.3263478740408410931},
    {0.02425, -1.9729610513118848376},
    {0.97575, 1.9729610513118849594},
    {0.001, -3.0902323061678135354},
    {0.999999, 4.7534243088170877657},
    {1e-100, -21.273453560965324294},
    {1e-300, -37.047096299361199237},
    {0.5000000001, 2.5066284820303539022e-10},
    {0.499999999999, -2.5065728237018604669e-12},
};

static void test_quantile_known_values(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof QUANTILE_REFS / sizeof QUANTILE_REFS[0]; i++) {
        double x = gp_normal_quantile(QUANTILE_REFS[i].p);
        double ref = QUANTILE_REFS[i].x;
        /* The header promises ~1e-15; 1e-14 leaves room for libm differences. */
        assert_true(fabs(x - ref) <= 1e-14 * fabs(ref));
    }
    assert_true(gp_normal_quantile(0.5) == 0.0);
}

/* Phi(x) for x <= 0 and 1 - Phi(x) for x >= 0, both without cancellation. */
static double lower_tail(double x)
{
    return 0.5 * erfc(fabs(x) / SQRT2);
}

static void test_quantile_round_trip(void **state)
{
    (void)state;
    /* Log-spaced tail probabilities and a linear grid across (0, 1). */
    for (int i = 0; i <= 3000; i++) {
        double p = 0.5 * pow(10.0, -300.0 * i / 3000.0);
        double x = gp_normal_quantile(p);
        assert_true(x <= 0.0);
        /* A relative error d in x becomes about x^2 d in the tail mass. */
        assert_true(fabs(lower_tail(x) - p) <= 1e-14 * p * fmax(1.0, x * x));
    }
    for (int i = 1; i < 2000; i++) {
        double p = i / 2000.0;
        double x = gp_normal_quantile(p);
        double tail = p <= 0.5 ? p : 1.0 - p;
        assert_true(fabs(lower_tail(x) - tail) <= 1e-14 * tail * fmax(1.0, x * x));
        assert_true((x < 0) == (p < 0.5));
        /* Q(1 - p) = -Q(p) exactly (1 - p is exact for p >= 0.5). */
        if (p >= 0.5)
            assert_true(gp_normal_quantile(1.0 - p) == -x);
    }
}

static void test_quantile_outside_open_interval(void **state)
{
    (void)state;
    assert_true(gp_normal_quantile(0.0) == -INFINITY);
    assert_true(gp_normal_quantile(1.0) == INFINITY);
    assert_true(isnan(gp_normal_quantile(-0.1)));
    assert_true(isnan(gp_normal_quantile(1.5)));
    assert_true(isnan(gp_normal_quantile(NAN)));
    assert_true(isnan(gp_normal_quantile(INFINITY)));
    /* Smallest subnormal still gives a finite, very negative quantile. */
    double x = gp_normal_quantile(4.9406564584124654e-324);
    assert_true(isfinite(x) && x < -38.0 && x > -39.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_splitmix_reference_vector),
        cmocka_unit_test(test_xoshiro_reference_vector),
        cmocka_unit_test(test_seeded_stream_reference),
        cmocka_unit_test(test_same_seed_same_stream),
        cmocka_unit_test(test_derive_reproducible_and_distinct),
        cmocka_unit_test(test_derive_streams_uncorrelated),
        cmocka_unit_test(test_uniform_range_and_moments),
        cmocka_unit_test(test_uniform_extreme_outputs),
        cmocka_unit_test(test_normal_moments),
        cmocka_unit_test(test_normal_fill_matches_single_draws),
        cmocka_unit_test(test_gamma_moments),
        cmocka_unit_test(test_chisq_moments),
        cmocka_unit_test(test_gamma_invalid_shape),
        cmocka_unit_test(test_below_range_and_uniformity),
        cmocka_unit_test(test_below_no_modulo_bias),
        cmocka_unit_test(test_below_edge_cases),
        cmocka_unit_test(test_halton_invalid_arguments),
        cmocka_unit_test(test_halton_in_open_unit_cube),
        cmocka_unit_test(test_halton_stratified_1d),
        cmocka_unit_test(test_halton_stratified_2d),
        cmocka_unit_test(test_halton_digit_permutation_structure),
        cmocka_unit_test(test_halton_deep_digits),
        cmocka_unit_test(test_halton_reproducible_and_seeded),
        cmocka_unit_test(test_halton_continuation),
        cmocka_unit_test(test_halton_beats_monte_carlo),
        cmocka_unit_test(test_quantile_known_values),
        cmocka_unit_test(test_quantile_round_trip),
        cmocka_unit_test(test_quantile_outside_open_interval),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
