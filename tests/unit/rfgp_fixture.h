/* Scaffolding of the rfgp unit tests (test_rfgp*.c): the method, an RBF
 * kernel, option lists, toy rows, observes that name what failed, a state's
 * arrays, a point model online from its creation, and requests and rows of
 * every input kind. Over method_testutil.h.
 *
 * Header-only (static inline), as method_testutil.h: the benchmarks link every
 * support object of tests/unit without cmocka. Include after cmocka.h. */
#ifndef GP_RFGP_FIXTURE_H
#define GP_RFGP_FIXTURE_H

/* ---- helpers ---- */

static inline const gp_method *rfgp(void)
{
    const gp_method *m = gp_method_find("rfgp");
    if (m == NULL)
        fail_msg("method 'rfgp' is not registered");
    return m;
}

static inline double *dalloc(size_t count)
{
    double *p = calloc(count ? count : 1, sizeof *p);
    assert_non_null(p);
    return p;
}

static inline gp_kernel *rbf(size_t d, int ard, double lengthscale)
{
    gp_kernel *k = NULL;
    gp_error err;
    if (gp_kernel_leaf(&k, GP_KERNEL_RBF, d, ard, NULL, 0, &err) != GP_OK)
        fail_msg("kernel: %s", err.message);
    for (size_t j = 0; j < k->n_lengthscale; j++)
        k->log_lengthscale[j] = log(lengthscale);
    return k;
}

typedef struct opts {
    gp_option_value v[16];
    size_t n;
} opts;

static inline void opt_num(opts *o, const char *name, double v)
{
    o->v[o->n++] = (gp_option_value){.name = name, .number = v};
}

static inline void opt_str(opts *o, const char *name, const char *s)
{
    o->v[o->n++] = (gp_option_value){.name = name, .number = NAN, .string = s};
}

/* A toy stream: x uniform in [-2, 2]^d, y_j = sin(2 x_0 + j) + 0.5 cos(x_last) + noise. */
static inline void toy_rows(uint64_t seed, size_t n, size_t d, size_t p, double *X, double *Y)
{
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    for (size_t i = 0; i < n * d; i++)
        X[i] = 4.0 * gp_rng_uniform(&rng) - 2.0;
    for (size_t j = 0; j < p; j++)
        for (size_t i = 0; i < n; i++)
            Y[j * n + i] = sin(2.0 * X[i] + (double)j) + 0.5 * cos(X[(d - 1) * n + i]) +
                           0.05 * gp_rng_normal(&rng);
}

static inline void observe_ok(gp_model *model, const double *X, const double *Y, size_t k)
{
    gp_error err;
    int rc = gp_model_observe(model, X, Y, k, &err);
    if (rc != GP_OK)
        fail_msg("observe failed: %s (%s, field '%s')", err.message, gp_status_name(rc),
                 err.field);
}

static inline const gp_named_array *state_array(const gp_state *st, const char *name)
{
    const gp_named_array *a = gp_state_find(st, name);
    if (a == NULL)
        fail_msg("state has no array '%s'", name);
    return a;
}

/* A point model online from its creation (warmup 0, fixed widths, raw units). */
static inline gp_model *fixed_model(size_t d, size_t p, size_t D, double noise, double lam,
                             double refactor, gp_kernel **k)
{
    *k = rbf(d, 1, 0.7);
    opts o = {0};
    opt_num(&o, "warmup", 0);
    opt_str(&o, "width_selection", "fixed");
    opt_num(&o, "features", (double)D);
    opt_num(&o, "outputs", (double)p);
    opt_num(&o, "forgetting", lam);
    if (refactor > 0)
        opt_num(&o, "refactor_batch", refactor);
    gp_fit_request req;
    fit_request(&req, NULL, NULL, 0, d, *k, o.v, o.n);
    req.standardize = 0;
    req.noise_given = 1;
    req.noise_fixed = 1;
    req.noise_variance = noise;
    req.input.kind = GP_INPUT_POINT;
    req.input.dim = d;
    return fit_ok(rfgp(), &req, "fixed model");
}

/* ---- requests of several kinds ---- */

/* {"kind": kind, "dim": dim, ...} as an option value (static storage). */
typedef struct input_opt {
    char *keys[4];
    gp_value items[4];
    gp_value obj, arr_items[4], arr;
} input_opt;

static inline void input_value(input_opt *io, const char *kind, size_t dim, const char *cov,
                        size_t samples, const char *const *messages, size_t c)
{
    memset(io, 0, sizeof *io);
    size_t n = 0;
    io->keys[n] = "kind";
    io->items[n++] = (gp_value){.type = GP_VALUE_STRING, .string = (char *)kind};
    if (dim) {
        io->keys[n] = "dim";
        io->items[n++] = (gp_value){.type = GP_VALUE_NUMBER, .number = (double)dim};
    }
    if (cov) {
        io->keys[n] = "covariance";
        io->items[n++] = (gp_value){.type = GP_VALUE_STRING, .string = (char *)cov};
    }
    if (samples) {
        io->keys[n] = "samples";
        io->items[n++] = (gp_value){.type = GP_VALUE_NUMBER, .number = (double)samples};
    }
    if (messages) {
        for (size_t i = 0; i < c; i++)
            io->arr_items[i] = (gp_value){.type = GP_VALUE_STRING, .string = (char *)messages[i]};
        io->arr = (gp_value){.type = GP_VALUE_ARRAY, .n = c, .items = io->arr_items};
        io->keys[n] = "messages";
        io->items[n++] = io->arr;
    }
    io->obj = (gp_value){.type = GP_VALUE_OBJECT, .n = n, .keys = io->keys, .items = io->items};
}

/* A request whose rows are of the spec the input option gives (the api's
 * gp_method_input_spec, done here by hand). */
static inline void kind_request(gp_fit_request *req, opts *o, input_opt *io, const double *X,
                         const double *Y, size_t n, size_t p, const gp_kernel *k)
{
    o->v[o->n++] = (gp_option_value){.name = "input", .object = &io->obj};
    gp_input_spec spec;
    gp_error err;
    if (gp_method_input_spec(rfgp(), o->v, o->n, 0, &spec, &err) != GP_OK)
        fail_msg("input spec: %s", err.message);
    fit_request(req, X, Y, n, gp_input_width(&spec), k, o->v, o->n);
    req->input = spec;
    req->n_outputs = p;
}

/* Encoded distributional rows from one seed: gaussian (diag or full), samples
 * or messages; the targets a smooth function of the rows' means. */
static inline void kind_rows(const char *kind, int full, size_t n, size_t d, size_t S, double *X,
                      double *Y, uint64_t seed)
{
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    for (size_t i = 0; i < n; i++) {
        double m0 = 0.0;
        if (strcmp(kind, "gaussian") == 0) {
            for (size_t k = 0; k < d; k++) {
                double m = 4.0 * gp_rng_uniform(&rng) - 2.0, v = 0.05 + 0.3 * gp_rng_uniform(&rng);
                X[k * n + i] = m;
                m0 += k == 0 ? m : 0.0;
                if (!full)
                    X[(d + k) * n + i] = v;
                else
                    for (size_t c = 0; c < d; c++)
                        X[(d + c * d + k) * n + i] = c == k ? v : 0.02;
            }
        } else if (strcmp(kind, "samples") == 0) {
            double m = 4.0 * gp_rng_uniform(&rng) - 2.0;
            for (size_t t = 0; t < S; t++)
                for (size_t k = 0; k < d; k++)
                    X[(t * d + k) * n + i] = m + 0.3 * gp_rng_normal(&rng);
            m0 = m;
        } else { /* messages: normal (mean, var), beta (a, b) */
            double m = 4.0 * gp_rng_uniform(&rng) - 2.0;
            X[i] = m;
            X[n + i] = 0.1 + 0.2 * gp_rng_uniform(&rng);
            X[2 * n + i] = 1.0 + 5.0 * gp_rng_uniform(&rng);
            X[3 * n + i] = 1.0 + 5.0 * gp_rng_uniform(&rng);
            m0 = m + X[2 * n + i] / (X[2 * n + i] + X[3 * n + i]);
        }
        Y[i] = sin(2.0 * m0) + 0.01 * gp_rng_normal(&rng);
    }
}

#endif
