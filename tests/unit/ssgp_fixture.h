/* Scaffolding of the ssgp unit tests (test_ssgp*.c): the method, a leaf
 * kernel, an option's spec, toy data (a sine, a smooth function with noise),
 * the RMSE and the standard deviation. Over method_testutil.h.
 *
 * Header-only (static inline), as method_testutil.h: the benchmarks link every
 * support object of tests/unit without cmocka. Include after cmocka.h. */
#ifndef GP_SSGP_FIXTURE_H
#define GP_SSGP_FIXTURE_H

/* ---- helpers ---- */

static inline const gp_method *ssgp(void)
{
    const gp_method *m = gp_method_find("ssgp");
    if (m == NULL)
        fail_msg("method 'ssgp' is not registered");
    return m;
}

static inline double *dalloc(size_t count)
{
    double *p = malloc((count ? count : 1) * sizeof *p);
    assert_non_null(p);
    return p;
}

static inline gp_kernel *leaf(gp_kernel_type t, size_t d, int ard, const size_t *dims, size_t n_dims)
{
    gp_kernel *k = NULL;
    gp_error err;
    if (gp_kernel_leaf(&k, t, d, ard, dims, n_dims, &err) != GP_OK)
        fail_msg("kernel: %s", err.message);
    return k;
}

static inline const gp_option_spec *find_spec(const gp_method *m, const char *name)
{
    for (size_t i = 0; i < m->n_options; i++)
        if (strcmp(m->options[i].name, name) == 0)
            return &m->options[i];
    return NULL;
}

/* 1-D problem: x uniform on [-2, 2], y = sin(3x) + 0.1 noise. */
static inline void sine_data(size_t n, uint64_t seed, double *X, double *y)
{
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    for (size_t i = 0; i < n; i++) {
        X[i] = -2.0 + 4.0 * gp_rng_uniform(&rng);
        y[i] = sin(3.0 * X[i]) + 0.1 * gp_rng_normal(&rng);
    }
}

/* d-D problem, column-major X on [-2, 2]^d; the target f is returned in f (may be NULL). */
static inline double smooth_f(const double *x, size_t d)
{
    double s = 0.0;
    for (size_t k = 0; k < d; k++)
        s += sin(1.3 * x[k] + 0.4 * (double)k) * (k == 1 ? 0.5 : 1.0);
    return s;
}

static inline void toy_data(size_t n, size_t d, uint64_t seed, double noise_sd, double *X, double *y,
                     double *f)
{
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    for (size_t i = 0; i < n * d; i++)
        X[i] = -2.0 + 4.0 * gp_rng_uniform(&rng);
    double x[16];
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < d; k++)
            x[k] = X[k * n + i];
        double fi = smooth_f(x, d);
        if (f)
            f[i] = fi;
        y[i] = fi + noise_sd * gp_rng_normal(&rng);
    }
}

static inline double rmse(const double *a, const double *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (a[i] - b[i]) * (a[i] - b[i]);
    return sqrt(s / (double)n);
}

static inline double stddev(const double *a, size_t n)
{
    double m = 0.0, s = 0.0;
    for (size_t i = 0; i < n; i++)
        m += a[i];
    m /= (double)n;
    for (size_t i = 0; i < n; i++)
        s += (a[i] - m) * (a[i] - m);
    return sqrt(s / (double)n);
}

#endif
