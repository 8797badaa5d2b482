/* Scaffolding of the api's unit tests on one open api (test_api.c,
 * test_api_describe.c, test_api_fits.c): a toy training and test set, the api
 * on a temporary database (the group setup and teardown), fits through it and
 * the same fit through core directly. Over api_testutil.h.
 *
 * Header-only (static inline), as api_testutil.h: the benchmarks link every
 * support object of tests/unit without cmocka or the api library. Include
 * after api_testutil.h. */
#ifndef GP_API_FIXTURE_H
#define GP_API_FIXTURE_H

#define N 40
#define D 2
#define M 7

static gp_api *api;
static char dir[64], db[128];
static double Xtr[N * D], ytr[N], Xte[M * D];

static inline gp_api *open_api(size_t cache)
{
    gp_api_config cfg;
    gp_api_default_config(&cfg);
    cfg.db_path = db;
    cfg.model_cache = cache;
    cfg.max_train_points = 100;
    gp_api *a = NULL;
    gp_error err;
    if (gp_api_open(&cfg, &a, &err) != GP_OK)
        fail_msg("gp_api_open: %s", err.message);
    return a;
}

static inline void fit_ok(gp_api *a, const char *body, gp_response *res)
{
    fit_json(a, body, res);
    expect_status(res, 201);
}

static inline void fit_toy(gp_api *a, const char *name, const char *extra)
{
    char *body = fit_body(name, extra, Xtr, ytr, N, D);
    gp_response res = {0};
    fit_ok(a, body, &res);
    gp_response_free(&res);
    free(body);
}

static inline int group_setup(void **state)
{
    (void)state;
    tmp_db(dir, sizeof dir, db, sizeof db);
    toy_data(N, D, 11, Xtr, ytr);
    double yte[M];
    toy_data(M, D, 12, Xte, yte);
    gp_api_config cfg;
    gp_api_default_config(&cfg);
    cfg.db_path = db;
    cfg.max_train_points = 100;
    gp_error err;
    if (gp_api_open(&cfg, &api, &err) != GP_OK) {
        fprintf(stderr, "gp_api_open: %s\n", err.message);
        return -1;
    }
    return 0;
}

static inline int group_teardown(void **state)
{
    (void)state;
    gp_api_close(api);
    rm_tree(dir);
    return 0;
}

/* The same fit through core directly. */
static inline gp_model *core_fit(const double *X, const double *y, size_t n, size_t d)
{
    gp_kernel *k = NULL;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, GP_KERNEL_RBF, d, 1, NULL, 0, &err), GP_OK);
    gp_fit_request fr;
    memset(&fr, 0, sizeof fr);
    fr.X = X;
    fr.y = y;
    fr.n = n;
    fr.d = d;
    fr.kernel = k;
    fr.standardize = 1;
    fr.max_train_points = 100;
    gp_model *m = NULL;
    if (gp_model_fit(gp_method_find("exact"), &fr, &m, &err) != GP_OK)
        fail_msg("core fit: %s", err.message);
    gp_kernel_free(k);
    return m;
}

#endif
