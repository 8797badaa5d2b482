/* Scaffolding of the kernel's unit tests (test_kernel*.c): leaf and composite
 * constructors, random parameters and points, a set of kernels of every type
 * (leaves, ARD, active dimensions, sums and products), their description and
 * a closeness check that names the kernel.
 *
 * Header-only (static inline), as testutil.h: the benchmarks link every
 * support object of tests/unit without cmocka. Include after cmocka.h. */
#ifndef GP_KERNEL_FIXTURE_H
#define GP_KERNEL_FIXTURE_H

#define DIM 3
#define MAX_KERNELS 48
#define MAX_PARAMS 64
#define FD_STEP 1e-6
#define PI_ 3.14159265358979323846

/* ------------------------------------------------------------------------ */
/* helpers                                                                    */

static inline gp_kernel *leaf(gp_kernel_type type, int ard, const size_t *dims, size_t n_dims)
{
    gp_kernel *k = NULL;
    gp_error err;
    gp_error_clear(&err);
    assert_int_equal(gp_kernel_leaf(&k, type, DIM, ard, dims, n_dims, &err), GP_OK);
    assert_non_null(k);
    return k;
}

static inline gp_kernel *comp(gp_kernel_type type, size_t n, ...)
{
    gp_kernel *terms[8];
    va_list ap;
    va_start(ap, n);
    for (size_t t = 0; t < n; t++)
        terms[t] = va_arg(ap, gp_kernel *);
    va_end(ap);
    gp_kernel *k = NULL;
    gp_error err;
    assert_int_equal(gp_kernel_composite(&k, type, terms, n, &err), GP_OK);
    return k;
}

/* Hyperparameters of a leaf in natural units (ls: n_lengthscale entries). */
static inline void set_leaf(gp_kernel *k, double s2, const double *ls, double alpha, double period)
{
    k->log_variance = log(s2);
    for (size_t i = 0; i < k->n_lengthscale; i++)
        k->log_lengthscale[i] = log(ls[i]);
    k->log_alpha = log(alpha);
    k->log_period = log(period);
}

static inline void randomize(gp_kernel *k, gp_rng *rng)
{
    size_t np = gp_kernel_n_params(k);
    double th[MAX_PARAMS];
    assert_true(np <= MAX_PARAMS);
    for (size_t i = 0; i < np; i++)
        th[i] = -0.8 + 1.6 * gp_rng_uniform(rng);
    gp_kernel_set_params(k, th);
}

static inline void random_points(gp_rng *rng, double *X, size_t n)
{
    for (size_t i = 0; i < n * DIM; i++)
        X[i] = gp_rng_normal(rng);
}

static const size_t dims20[] = {2, 0};
static const size_t dims1[] = {1};

/* Every leaf type with and without ARD and active_dims, and nested composites,
 * all with random hyperparameters. */
static inline size_t make_kernels(gp_kernel **ks, gp_rng *rng)
{
    size_t n = 0;
    for (int t = 0; t < GP_KERNEL_SUM; t++) {
        ks[n++] = leaf((gp_kernel_type)t, 0, NULL, 0);
        ks[n++] = leaf((gp_kernel_type)t, 1, NULL, 0);
        ks[n++] = leaf((gp_kernel_type)t, 1, dims20, 2);
        ks[n++] = leaf((gp_kernel_type)t, 0, dims1, 1);
    }
    ks[n++] = comp(GP_KERNEL_PRODUCT, 2,
                   comp(GP_KERNEL_SUM, 2, leaf(GP_KERNEL_RBF, 1, NULL, 0),
                        leaf(GP_KERNEL_PERIODIC, 0, dims20, 2)),
                   leaf(GP_KERNEL_MATERN32, 1, dims20, 2));
    ks[n++] = comp(GP_KERNEL_SUM, 3,
                   comp(GP_KERNEL_PRODUCT, 2, leaf(GP_KERNEL_RQ, 1, NULL, 0),
                        leaf(GP_KERNEL_LINEAR, 0, dims1, 1)),
                   leaf(GP_KERNEL_WHITE, 0, NULL, 0), leaf(GP_KERNEL_MATERN12, 0, NULL, 0));
    ks[n++] = comp(GP_KERNEL_PRODUCT, 3,
                   comp(GP_KERNEL_SUM, 2,
                        comp(GP_KERNEL_PRODUCT, 2, leaf(GP_KERNEL_MATERN52, 1, dims20, 2),
                             leaf(GP_KERNEL_RBF, 0, dims1, 1)),
                        leaf(GP_KERNEL_LINEAR, 0, NULL, 0)),
                   leaf(GP_KERNEL_RQ, 0, NULL, 0), leaf(GP_KERNEL_PERIODIC, 0, NULL, 0));
    ks[n++] = comp(GP_KERNEL_SUM, 1, leaf(GP_KERNEL_RBF, 1, NULL, 0));
    assert_true(n <= MAX_KERNELS);
    for (size_t i = 0; i < n; i++)
        randomize(ks[i], rng);
    return n;
}

static inline void free_kernels(gp_kernel **ks, size_t n)
{
    for (size_t i = 0; i < n; i++)
        gp_kernel_free(ks[i]);
}

static inline void describe(const gp_kernel *k, char *buf, size_t len)
{
    snprintf(buf, len, "%s ard=%d n_active=%zu%s", gp_kernel_type_name(k->type), k->ard,
             k->n_active, k->active_dims ? " (active_dims)" : "");
}

/* |a - b| <= rel * max(|a|, |b|) + abs, reported with context when not. */
static inline void check_close(double a, double b, double rel, double abs_tol, const gp_kernel *k,
                        const char *what, size_t p)
{
    double tol = rel * fmax(fabs(a), fabs(b)) + abs_tol;
    if (fabs(a - b) <= tol)
        return;
    char d[128], name[96];
    describe(k, d, sizeof d);
    gp_kernel_param_name(k, p, name, sizeof name);
    tu_assert_within(a, b, tol, "%s [%s] %s", d, name, what);
}

#endif
