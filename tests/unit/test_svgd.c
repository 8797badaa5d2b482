/* Unit tests for core/optim/svgd.c: the median helper, the SVGD direction (against
 * a naive double loop), the annealing schedule and the Adam ascent step. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/parallel.h"
#include "core/base/rng.h"
#include "core/optim/optim.h"
#include "core/optim/svgd.h"

/* ---- brute-force references ----------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* numpy's median of the explicit multiset. */
static double brute_median_pairs(const double *v, size_t n, size_t stride, int with_self)
{
    size_t cap = n * n + 1, m = 0;
    double *all = malloc(cap * sizeof(double));
    assert_non_null(all);
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++) {
            if (with_self ? 0 : b <= a)
                continue;
            double t = v[a * stride] - v[b * stride];
            all[m++] = t * t;
        }
    double med = 0.0;
    if (m > 0) {
        qsort(all, m, sizeof(double), cmp_double);
        med = m % 2 ? all[m / 2] : 0.5 * (all[m / 2 - 1] + all[m / 2]);
    }
    free(all);
    return med;
}

static void fill_normal(double *x, size_t count, uint64_t seed)
{
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    gp_rng_normal_fill(&rng, x, count);
}

/* ---- median ----------------------------------------------------------------- */

static void check_median(const double *v, size_t n, size_t stride)
{
    double *buf = malloc((n * (n - 1) / 2 + 1) * sizeof(double));
    assert_non_null(buf);
    for (int ws = 0; ws <= 1; ws++) {
        double got = gp_median_pair_sqdiff(v, n, stride, ws, buf);
        double want = brute_median_pairs(v, n, stride, ws);
        assert_true(fabs(got - want) <= 1e-15 * fabs(want));
    }
    free(buf);
}

static void test_median_small_even_odd(void **state)
{
    (void)state;
    double v[2 * 64];
    fill_normal(v, 2 * 64, 11);
    for (size_t n = 1; n <= 12; n++) {
        check_median(v, n, 1);
        check_median(v, n, 2); /* stride */
    }
    check_median(v, 63, 2);
    check_median(v, 64, 2);
    /* A hand case: v = 0, 1, 3 -> pairs 1, 9, 4; median 4 (a < b), and over
     * the 9 ordered pairs {0,0,0,1,1,4,4,9,9} the 5th value, 1. */
    double h[3] = {0.0, 1.0, 3.0}, buf[3];
    assert_true(gp_median_pair_sqdiff(h, 3, 1, 0, buf) == 4.0);
    assert_true(gp_median_pair_sqdiff(h, 3, 1, 1, buf) == 1.0);
    /* n = 2 with_self: {0, 0, 4, 4} -> 2. */
    assert_true(gp_median_pair_sqdiff(h + 1, 2, 1, 1, buf) == 2.0);
}

static void test_median_large_and_ties(void **state)
{
    (void)state;
    /* n = 400 and 401 give > 65536 pairs: the sampled-bracket selection. */
    double *v = malloc(401 * sizeof(double));
    assert_non_null(v);
    fill_normal(v, 401, 12);
    check_median(v, 400, 1);
    check_median(v, 401, 1);
    /* Heavy ties (integers mod 5) and a constant vector. */
    for (size_t i = 0; i < 401; i++)
        v[i] = (double)(i * 7 % 5);
    check_median(v, 400, 1);
    check_median(v, 401, 1);
    for (size_t i = 0; i < 401; i++)
        v[i] = 2.5;
    check_median(v, 401, 1);
    /* Skewed: most values equal, a few far away. */
    for (size_t i = 0; i < 401; i++)
        v[i] = i < 380 ? 0.0 : (double)i;
    check_median(v, 401, 1);
    free(v);
}

/* The implementation gp_median_pair_sqdiff replaced, kept here as the
 * reference it must match bit for bit: all n(n-1)/2 squared differences in
 * the original pair order, then the ranks and arithmetic of the old
 * median_of_pairs, with a full sort standing in for its quickselect (the
 * selected values are the same). */
static double old_median_pair_sqdiff(const double *v, size_t n, size_t stride, int with_self)
{
    size_t m = n * (n - 1) / 2;
    if (m == 0)
        return 0.0;
    double *u = malloc(m * sizeof(double));
    assert_non_null(u);
    size_t c = 0;
    for (size_t a = 0; a < n; a++) {
        double va = v[a * stride];
        for (size_t b = a + 1; b < n; b++) {
            double t = va - v[b * stride];
            u[c++] = t * t;
        }
    }
    qsort(u, m, sizeof(double), cmp_double);
    double out;
    if (!with_self) {
        out = m % 2 ? u[m / 2] : 0.5 * (u[m / 2 - 1] + u[m / 2]);
        free(u);
        return out;
    }
    size_t N = n * n;
    size_t r1 = N % 2 ? (N + 1) / 2 : N / 2, r2 = N % 2 ? r1 : r1 + 1;
    size_t ranks[2] = {r1, r2}, q[2];
    for (int t = 0; t < 2; t++)
        q[t] = ranks[t] <= n ? 0 : (ranks[t] - n + 1) / 2;
    double w[2] = {0.0, 0.0};
    if (q[0] == 0 && q[1] == 0) {
        out = 0.0;
    } else if (q[0] == 0) {
        w[1] = u[q[1] - 1];
        out = 0.5 * (w[0] + w[1]);
    } else if (q[1] == q[0]) {
        w[0] = w[1] = u[q[0] - 1];
        out = 0.5 * (w[0] + w[1]);
    } else {
        w[0] = u[q[0] - 1];
        w[1] = u[q[1] - 1];
        out = 0.5 * (w[0] + w[1]);
    }
    free(u);
    return out;
}

/* gp_median_pair_sqdiff (buf of n doubles only) equals the old code bit for
 * bit, both with_self values. */
static void check_same_as_old(const double *v, size_t n, size_t stride)
{
    double *buf = malloc((n ? n : 1) * sizeof(double));
    assert_non_null(buf);
    for (int ws = 0; ws <= 1; ws++) {
        double got = gp_median_pair_sqdiff(v, n, stride, ws, buf);
        double want = old_median_pair_sqdiff(v, n, stride, ws);
        if (memcmp(&got, &want, sizeof got) != 0)
            fail_msg("n = %zu stride = %zu with_self = %d: %.17g != %.17g", n, stride, ws, got,
                     want);
    }
    free(buf);
}

static void test_median_bitwise_as_old(void **state)
{
    (void)state;
    size_t cap = 3 * 257;
    double *v = malloc(cap * sizeof(double));
    assert_non_null(v);
    gp_rng rng;
    gp_rng_seed(&rng, 77);
    const size_t sizes[] = {1, 2, 3, 4, 5, 6, 7, 10, 31, 64, 101, 256, 257};
    for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++) {
        size_t n = sizes[t];
        for (int kind = 0; kind < 7; kind++) {
            for (size_t i = 0; i < cap; i++) {
                double g = gp_rng_normal(&rng);
                switch (kind) {
                case 0: v[i] = g; break;                                   /* random */
                case 1: v[i] = (double)((i * 13) % 4) - 1.5; break;        /* few ties */
                case 2: v[i] = floor(3.0 * g) * 0.1; break;                /* duplicates, inexact */
                case 3: v[i] = -0.75; break;                               /* all equal */
                case 4: v[i] = i % 9 == 0 ? 1e3 * g : 1e-3 * g; break;     /* two scales */
                case 5: v[i] = i % 2 ? 0.0 : -0.0; break;                  /* signed zeros */
                default: v[i] = 1.0 + 1e-15 * (double)(i % 5); break;     /* tiny rounded diffs */
                }
            }
            check_same_as_old(v, n, 1);
            check_same_as_old(v, n, 3); /* stride */
        }
    }
    free(v);
}

/* ---- direction -------------------------------------------------------------- */

static void naive_direction(const double *P, const double *G, size_t n, size_t d,
                            const gp_svgd_options *o, double *phi, double *h)
{
    double *tmp = malloc(n * d * sizeof(double));
    assert_non_null(tmp);
    if (o->bandwidth == GP_SVGD_BANDWIDTH_PER_DIM) {
        for (size_t k = 0; k < d; k++) {
            double m = brute_median_pairs(P + k * n, n, 1, 1) * o->bandwidth_scale;
            h[k] = fmax(m, o->min_bandwidth);
        }
    } else {
        double *dist = malloc((n * n + 1) * sizeof(double));
        assert_non_null(dist);
        size_t m = 0;
        for (size_t a = 0; a < n; a++)
            for (size_t b = a + 1; b < n; b++) {
                double s = 0.0;
                for (size_t k = 0; k < d; k++) {
                    double t = P[a + k * n] - P[b + k * n];
                    s += t * t;
                }
                dist[m++] = s;
            }
        qsort(dist, m, sizeof(double), cmp_double);
        double med = m % 2 ? dist[m / 2] : 0.5 * (dist[m / 2 - 1] + dist[m / 2]);
        free(dist);
        for (size_t k = 0; k < d; k++)
            h[k] = fmax(med * o->bandwidth_scale, o->min_bandwidth);
    }
    for (size_t i = 0; i < n; i++) {
        double z = 0.0;
        for (size_t k = 0; k < d; k++)
            tmp[k] = 0.0;
        for (size_t j = 0; j < n; j++) {
            double e = 0.0;
            for (size_t k = 0; k < d; k++) {
                double t = P[i + k * n] - P[j + k * n];
                e += t * t / h[k];
            }
            double kij = exp(-0.5 * e);
            z += kij;
            for (size_t k = 0; k < d; k++)
                tmp[k] += kij * (o->attraction * G[j + k * n] +
                                 o->repulsion * (P[i + k * n] - P[j + k * n]) / h[k]);
        }
        double norm = o->divisor > 0.0 ? o->divisor : o->normalize_rowsum ? z : (double)n;
        for (size_t k = 0; k < d; k++)
            phi[i + k * n] = tmp[k] / norm;
    }
    free(tmp);
}

static void check_direction(size_t n, size_t d, uint64_t seed)
{
    double *P = malloc(n * d * sizeof(double)), *G = malloc(n * d * sizeof(double));
    double *phi = malloc(n * d * sizeof(double)), *ref = malloc(n * d * sizeof(double));
    double h[16], href[16];
    assert_true(P && G && phi && ref && d <= 16);
    fill_normal(P, n * d, seed);
    fill_normal(G, n * d, seed + 1);
    for (size_t i = 0; i < n * d; i++)
        P[i] *= 0.7 + 0.1 * (double)(i / n); /* different spreads per dimension */
    gp_svgd_work *w = NULL;
    assert_int_equal(gp_svgd_work_new(n, d, &w, NULL), GP_OK);
    const double weights[3][2] = {{1.0, 1.0}, {0.3, 2.0}, {0.0, 1.0}};
    for (int bw = 0; bw <= 1; bw++)
        for (int rs = 0; rs <= 1; rs++)
            for (int wt = 0; wt < 3; wt++) {
                gp_svgd_options o;
                gp_svgd_default_options(&o);
                o.bandwidth = bw ? GP_SVGD_BANDWIDTH_PER_DIM : GP_SVGD_BANDWIDTH_TOTAL;
                o.normalize_rowsum = rs;
                o.attraction = weights[wt][0];
                o.repulsion = weights[wt][1];
                o.bandwidth_scale = wt == 1 ? 1.7 : 1.0;
                gp_svgd_direction(P, G, n, d, &o, w, phi, h);
                naive_direction(P, G, n, d, &o, ref, href);
                size_t nh = bw ? d : 1;
                for (size_t k = 0; k < nh; k++)
                    assert_true(fabs(h[k] - href[k]) <= 1e-12 * href[k]);
                double scale = 0.0;
                for (size_t i = 0; i < n * d; i++)
                    scale = fmax(scale, fabs(ref[i]));
                for (size_t i = 0; i < n * d; i++)
                    assert_true(fabs(phi[i] - ref[i]) <= 1e-12 * fmax(scale, 1.0));
            }
    gp_svgd_work_free(w);
    free(P);
    free(G);
    free(phi);
    free(ref);
}

static void test_direction_matches_naive(void **state)
{
    (void)state;
    check_direction(37, 3, 21);
    check_direction(2, 1, 22);
    check_direction(50, 10, 23);
}

static void test_direction_large_n(void **state)
{
    (void)state;
    check_direction(400, 2, 24); /* TOTAL median through the sampled bracket */
}

static void test_direction_default_options_and_clamp(void **state)
{
    (void)state;
    gp_svgd_options o;
    gp_svgd_default_options(&o);
    assert_int_equal(o.bandwidth, GP_SVGD_BANDWIDTH_TOTAL);
    assert_true(o.bandwidth_scale == 1.0 && o.min_bandwidth == 1e-12);
    assert_true(o.attraction == 1.0 && o.repulsion == 1.0 && o.normalize_rowsum == 0);
    /* Identical particles: median 0, clamped; the repulsion vanishes and
     * phi is the mean score. NULL options mean the defaults. */
    size_t n = 5, d = 2;
    double P[10], G[10], phi[10], h[2];
    for (size_t i = 0; i < n * d; i++) {
        P[i] = 1.5;
        G[i] = (double)i;
    }
    gp_svgd_work *w = NULL;
    assert_int_equal(gp_svgd_work_new(n, d, &w, NULL), GP_OK);
    gp_svgd_direction(P, G, n, d, NULL, w, phi, h);
    assert_true(h[0] == 1e-12);
    for (size_t k = 0; k < d; k++)
        for (size_t i = 0; i < n; i++)
            assert_true(fabs(phi[i + k * n] - (2.0 + 5.0 * (double)k)) < 1e-12);
    gp_svgd_work_free(w);
    gp_error err;
    assert_int_equal(gp_svgd_work_new(0, 2, &w, &err), GP_EINVAL);
    assert_null(w);
    gp_svgd_work_free(NULL);
}

static void test_direction_deterministic(void **state)
{
    (void)state;
    size_t n = 300, d = 4;
    double *P = malloc(n * d * sizeof(double)), *G = malloc(n * d * sizeof(double));
    double *a = malloc(n * d * sizeof(double)), *b = malloc(n * d * sizeof(double));
    assert_true(P && G && a && b);
    fill_normal(P, n * d, 31);
    fill_normal(G, n * d, 32);
    gp_svgd_work *w = NULL;
    assert_int_equal(gp_svgd_work_new(n, d, &w, NULL), GP_OK);
    gp_svgd_direction(P, G, n, d, NULL, w, a, NULL);
    gp_svgd_direction(P, G, n, d, NULL, w, b, NULL);
    assert_memory_equal(a, b, n * d * sizeof(double));
    gp_svgd_work_free(w);
    free(P);
    free(G);
    free(a);
    free(b);
}

/* divisor > 0 replaces Z_i for every particle, whatever normalize_rowsum
 * says; the default is 0 (off). */
static void test_direction_divisor(void **state)
{
    (void)state;
    size_t n = 45, d = 4;
    double *P = malloc(n * d * sizeof(double)), *G = malloc(n * d * sizeof(double));
    double *phi = malloc(n * d * sizeof(double)), *ref = malloc(n * d * sizeof(double));
    double *plain = malloc(n * d * sizeof(double));
    double h[4], href[4];
    assert_true(P && G && phi && ref && plain);
    fill_normal(P, n * d, 41);
    fill_normal(G, n * d, 42);
    gp_svgd_work *w = NULL;
    assert_int_equal(gp_svgd_work_new(n, d, &w, NULL), GP_OK);
    gp_svgd_options o;
    gp_svgd_default_options(&o);
    assert_true(o.divisor == 0.0);
    for (int bw = 0; bw <= 1; bw++)
        for (int rs = 0; rs <= 1; rs++) {
            o.bandwidth = bw ? GP_SVGD_BANDWIDTH_PER_DIM : GP_SVGD_BANDWIDTH_TOTAL;
            o.normalize_rowsum = rs;
            o.divisor = 0.0;
            gp_svgd_direction(P, G, n, d, &o, w, plain, h);
            o.divisor = 3.0; /* e.g. M = 3 pooled components */
            gp_svgd_direction(P, G, n, d, &o, w, phi, h);
            naive_direction(P, G, n, d, &o, ref, href);
            double scale = 0.0;
            for (size_t i = 0; i < n * d; i++)
                scale = fmax(scale, fabs(ref[i]));
            for (size_t i = 0; i < n * d; i++)
                assert_true(fabs(phi[i] - ref[i]) <= 1e-12 * fmax(scale, 1.0));
            /* Without the row sums: exactly n / 3 times the default. */
            if (!rs)
                for (size_t i = 0; i < n * d; i++)
                    assert_true(fabs(phi[i] - plain[i] * (double)n / 3.0) <=
                                1e-13 * fmax(scale, 1.0));
        }
    gp_svgd_work_free(w);
    free(P);
    free(G);
    free(phi);
    free(ref);
    free(plain);
}

/* The PER_DIM medians and the exp loop run as parallel tasks: the direction
 * and the bandwidths are the same bytes for 1, 2 and 3 threads. */
static void test_direction_thread_invariant(void **state)
{
    (void)state;
    size_t n = 600, d = 7;
    double *P = malloc(n * d * sizeof(double)), *G = malloc(n * d * sizeof(double));
    double *phi[3], h[3][7];
    assert_true(P && G);
    fill_normal(P, n * d, 51);
    fill_normal(G, n * d, 52);
    for (size_t i = 0; i < n * d; i++)
        P[i] *= 0.5 + 0.2 * (double)(i / n);
    gp_svgd_work *w = NULL;
    assert_int_equal(gp_svgd_work_new(n, d, &w, NULL), GP_OK);
    for (int bw = 0; bw <= 1; bw++) {
        gp_svgd_options o;
        gp_svgd_default_options(&o);
        o.bandwidth = bw ? GP_SVGD_BANDWIDTH_PER_DIM : GP_SVGD_BANDWIDTH_TOTAL;
        o.normalize_rowsum = 1;
        size_t nh = bw ? d : 1;
        for (int t = 0; t < 3; t++) {
            phi[t] = malloc(n * d * sizeof(double));
            assert_non_null(phi[t]);
            gp_parallel_set_threads(t + 1);
            gp_svgd_direction(P, G, n, d, &o, w, phi[t], h[t]);
        }
        gp_parallel_set_threads(0);
        for (int t = 1; t < 3; t++) {
            assert_memory_equal(phi[0], phi[t], n * d * sizeof(double));
            assert_memory_equal(h[0], h[t], nh * sizeof(double));
        }
        for (int t = 0; t < 3; t++)
            free(phi[t]);
    }
    gp_svgd_work_free(w);
    free(P);
    free(G);
}

/* ---- annealing and the step ------------------------------------------------- */

static void test_anneal_schedule(void **state)
{
    (void)state;
    /* T = 1000, c = 5: period 200. */
    assert_true(gp_svgd_anneal(0, 1000, 5, 0.5) == 0.0);
    assert_true(fabs(gp_svgd_anneal(100, 1000, 5, 0.5) - sqrt(0.5)) < 1e-15);
    assert_true(gp_svgd_anneal(200, 1000, 5, 0.5) == 0.0);
    assert_true(fabs(gp_svgd_anneal(399, 1000, 5, 0.5) - sqrt(199.0 / 200.0)) < 1e-15);
    assert_true(fabs(gp_svgd_anneal(250, 1000, 5, 1.0) - 0.25) < 1e-15);
    assert_true(fabs(gp_svgd_anneal(250, 1000, 5, 2.0) - 0.0625) < 1e-15);
    /* Power 0: no annealing, 0^0 = 1 included. */
    for (int t = 0; t < 1000; t += 37)
        assert_true(gp_svgd_anneal(t, 1000, 5, 0.0) == 1.0);
    assert_true(gp_svgd_anneal(0, 1000, 5, 0.0) == 1.0);
    /* T/c rounded down: T = 1003, c = 5 -> period 200. */
    assert_true(gp_svgd_anneal(1000, 1003, 5, 1.0) == 0.0);
    assert_true(fabs(gp_svgd_anneal(1001, 1003, 5, 1.0) - 1.0 / 200.0) < 1e-15);
    /* Period at least 1 (T < c): x = 0 every step. */
    assert_true(gp_svgd_anneal(3, 2, 5, 1.0) == 0.0);
    assert_true(gp_svgd_anneal(3, 2, 5, 0.0) == 1.0);
    /* One cycle. */
    assert_true(fabs(gp_svgd_anneal(500, 1000, 1, 1.0) - 0.5) < 1e-15);
}

static void test_adam_step_by_hand(void **state)
{
    (void)state;
    gp_adam adam;
    assert_int_equal(gp_adam_init(&adam, 2, 0.5, NULL), GP_OK);
    double P[2] = {1.0, 2.0};
    const double phi1[2] = {1.0, -2.0}, phi2[2] = {3.0, 0.5};
    double lr = 0.1, wd = 0.01, eps = 1e-8;
    /* Step 1: mhat = phi, vhat = phi^2. */
    gp_svgd_adam_step(&adam, P, phi1, lr, wd);
    double want0 = 1.0 + lr * 1.0 / (1.0 + eps) - lr * wd * 1.0;
    double want1 = 2.0 + lr * -2.0 / (2.0 + eps) - lr * wd * 2.0;
    assert_true(fabs(P[0] - want0) < 1e-15 && fabs(P[1] - want1) < 1e-15);
    /* Step 2 by the moment recursions. */
    double m0 = 0.9 * 0.1 * 1.0 + 0.1 * 3.0, v0 = 0.999 * 0.001 * 1.0 + 0.001 * 9.0;
    double m1 = 0.9 * 0.1 * -2.0 + 0.1 * 0.5, v1 = 0.999 * 0.001 * 4.0 + 0.001 * 0.25;
    double c1 = 1.0 - 0.81, c2 = 1.0 - 0.999 * 0.999;
    double w0 = want0 + lr * (m0 / c1) / (sqrt(v0 / c2) + eps) - lr * wd * want0;
    double w1 = want1 + lr * (m1 / c1) / (sqrt(v1 / c2) + eps) - lr * wd * want1;
    gp_svgd_adam_step(&adam, P, phi2, lr, wd);
    assert_true(fabs(P[0] - w0) < 1e-14 && fabs(P[1] - w1) < 1e-14);
    assert_int_equal(adam.t, 2);
    /* A non-finite entry counts as 0 and leaves the moments finite. */
    const double bad[2] = {NAN, INFINITY};
    gp_svgd_adam_step(&adam, P, bad, lr, 0.0);
    assert_true(isfinite(P[0]) && isfinite(P[1]));
    assert_true(isfinite(adam.m[0]) && isfinite(adam.v[1]));
    gp_adam_free(&adam);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_median_small_even_odd),
        cmocka_unit_test(test_median_large_and_ties),
        cmocka_unit_test(test_median_bitwise_as_old),
        cmocka_unit_test(test_direction_matches_naive),
        cmocka_unit_test(test_direction_large_n),
        cmocka_unit_test(test_direction_default_options_and_clamp),
        cmocka_unit_test(test_direction_deterministic),
        cmocka_unit_test(test_direction_divisor),
        cmocka_unit_test(test_direction_thread_invariant),
        cmocka_unit_test(test_anneal_schedule),
        cmocka_unit_test(test_adam_step_by_hand),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
