/* Method "gwi", inducing_factor "auto" (core/methods/gwi/select.c; the
 * thesis's B1 model selection, docs/methods/sparse-variational-and-pls.md
 * §5.3):
 *   auto keeps the grid's minimum: each factor's score is the validation NLL
 *   of the same fit with that factor given, and the model is that fit, bit
 *   for bit (kernel_sum and mlp grids; with a learned linear mean too);
 *   progress spans the grid and a stop anywhere in it cancels the fit;
 *   the same bits with 1 and 2 threads; an exported auto model imports and
 *   predicts identically; refused values of inducing_factor name the field. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/base/parallel.h"
#include "core/base/rng.h"
#include "core/base/state.h"
#include "core/methods/registry.h"
#include "core/model/method.h"
#include "core/model/model.h"
#include "tests/unit/method_testutil.h"
#include "tests/unit/testutil.h"

enum { FN = 120, FD = 2, NQ = 9, EPOCHS = 12 };

static const gp_method *gwi(void)
{
    const gp_method *m = gp_method_find("gwi");
    if (m == NULL)
        fail_msg("method 'gwi' is not registered");
    return m;
}

static gp_kernel *rbf_ard(size_t d)
{
    gp_kernel *k = NULL;
    gp_error err;
    if (gp_kernel_leaf(&k, GP_KERNEL_RBF, d, 1, NULL, 0, &err) != GP_OK)
        fail_msg("kernel: %s", err.message);
    return k;
}

/* 120 seeded rows, a small budget; inducing_factor "auto" unless changed. */
typedef struct fit_case {
    double X[FN * FD], y[FN];
    gp_option_value o[10];
    size_t no;
    gp_mean_type mean;
} fit_case;

/* sin + cos over the box [-2, 2]^2 with noise 0.05, wiggly enough (wiggle
 * 2) that kernel_sum's best factor lies inside its grid {1, ..., 5}: a
 * selection that kept the first or the last factor fails. */
static const double wiggle = 2.0;

static void problem(double *X, double *y, uint64_t seed)
{
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    for (size_t i = 0; i < FN; i++) {
        double a = 4.0 * gp_rng_uniform(&rng) - 2.0, b = 4.0 * gp_rng_uniform(&rng) - 2.0;
        X[i] = a, X[FN + i] = b;
        y[i] = sin(wiggle * 1.3 * a) + cos(wiggle * 1.1 * b + 1.0) + 0.05 * gp_rng_normal(&rng);
    }
}

static void case_init(fit_case *c, const char *mean)
{
    memset(c, 0, sizeof *c);
    problem(c->X, c->y, 43);
    gp_option_value base[] = {{"inducing_factor", NAN, "auto", NULL},
                              {"epochs", EPOCHS, NULL, NULL},
                              {"batch", 32, NULL, NULL},
                              {"w2_points", 16, NULL, NULL},
                              {"mean", 0, mean, NULL},
                              {"hidden", 4, NULL, NULL},
                              {"learning_rate", 0.02, NULL, NULL}};
    c->no = sizeof base / sizeof base[0];
    memcpy(c->o, base, sizeof base);
}

static void case_factor(fit_case *c, double factor)
{
    c->o[0] = (gp_option_value){"inducing_factor", factor, NULL, NULL};
}

static void case_request(const fit_case *c, const gp_kernel *k, gp_fit_request *req)
{
    fit_request(req, c->X, c->y, FN, FD, k, c->o, c->no);
    req->seed = 7;
    req->mean = c->mean;
}

static gp_model *case_fit(const fit_case *c, const char *what)
{
    gp_kernel *k = rbf_ard(FD);
    gp_fit_request req;
    case_request(c, k, &req);
    gp_model *model = fit_ok(gwi(), &req, what);
    gp_kernel_free(k);
    return model;
}

static void query_points(double *Xq)
{
    for (size_t i = 0; i < NQ; i++) {
        Xq[i] = -2.0 + 0.5 * (double)i;
        Xq[NQ + i] = 1.5 - 0.35 * (double)i;
    }
}

static void same_predictions(const gp_model *a, const gp_model *b, const char *what)
{
    double Xq[NQ * FD], m1[NQ], v1[NQ], m2[NQ], v2[NQ];
    query_points(Xq);
    predict_ok(a, Xq, NQ, FD, 1, m1, v1, NULL);
    predict_ok(b, Xq, NQ, FD, 1, m2, v2, NULL);
    for (size_t i = 0; i < NQ; i++)
        if (memcmp(&m1[i], &m2[i], sizeof m1[i]) || memcmp(&v1[i], &v2[i], sizeof v1[i]))
            fail_msg("%s: query %zu: mean %.17g vs %.17g, variance %.17g vs %.17g", what, i,
                     m1[i], m2[i], v1[i], v2[i]);
}

/* The auto fit against every factor fitted alone: the scores are theirs
 * exactly, the choice is their minimum (ties: the first), and the model is
 * that fit. */
static size_t check_picks_minimum(const char *mean, gp_mean_type mf, const double *grid,
                                  const char *const *keys, size_t n)
{
    size_t best_i = 0;
    fit_case c;
    case_init(&c, mean);
    c.mean = mf;
    gp_model *chosen = case_fit(&c, "auto");
    const gp_info_item *sel = find_info(chosen, "inducing_factor_selection");
    assert_non_null(sel);
    assert_string_equal(sel->string, "auto");
    double best = INFINITY, best_f = NAN;
    gp_model *winner = NULL;
    for (size_t i = 0; i < n; i++) {
        case_factor(&c, grid[i]);
        gp_model *one = case_fit(&c, "one factor");
        double nll = one->diag.objective;
        const gp_info_item *it = find_info(chosen, keys[i]);
        if (it == NULL)
            fail_msg("%s: info '%s' missing", mean, keys[i]);
        if (memcmp(&it->number, &nll, sizeof nll) != 0)
            fail_msg("%s: %s = %.17g, the fit of factor %g alone %.17g", mean, keys[i],
                     it->number, grid[i], nll);
        print_message("%s factor %g: validation NLL %.6f, M %g\n", mean, grid[i], nll,
                      find_info(one, "inducing")->number);
        if (nll < best) {
            best = nll;
            best_f = grid[i];
            best_i = i;
            gp_model_free(winner);
            winner = one;
        } else
            gp_model_free(one);
    }
    assert_true(find_info(chosen, "inducing_factor")->number == best_f);
    assert_true(chosen->diag.objective == best);
    assert_true(find_info(chosen, "inducing")->number == find_info(winner, "inducing")->number);
    same_predictions(chosen, winner, "auto vs its chosen factor alone");
    /* the property is not vacuous: the grid's scores differ */
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        double v = find_info(chosen, keys[i])->number;
        lo = fmin(lo, v), hi = fmax(hi, v);
    }
    assert_true(hi > lo);
    gp_model_free(chosen);
    gp_model_free(winner);
    return best_i;
}

static void test_picks_minimum_kernel_sum(void **state)
{
    (void)state;
    static const double grid[] = {1, 2, 3, 4, 5};
    static const char *const keys[] = {"auto_nll_1", "auto_nll_2", "auto_nll_3", "auto_nll_4",
                                       "auto_nll_5"};
    size_t i = check_picks_minimum("kernel_sum", GP_MEAN_ZERO, grid, keys, 5);
    assert_true(i > 0 && i < 4); /* an interior minimum (factor 3 when written) */
}

static void test_picks_minimum_mlp(void **state)
{
    (void)state;
    static const double grid[] = {0.5, 1, 1.5, 2};
    static const char *const keys[] = {"auto_nll_0.5", "auto_nll_1", "auto_nll_1.5",
                                       "auto_nll_2"};
    check_picks_minimum("mlp", GP_MEAN_ZERO, grid, keys, 4);
}

/* The modelling-controls mean (a linear mean learned with the prior's
 * hyperparameters) goes through auto as through any gwi fit. */
static void test_picks_minimum_linear_mean(void **state)
{
    (void)state;
    static const double grid[] = {1, 2, 3, 4, 5};
    static const char *const keys[] = {"auto_nll_1", "auto_nll_2", "auto_nll_3", "auto_nll_4",
                                       "auto_nll_5"};
    size_t i = check_picks_minimum("kernel_sum", GP_MEAN_LINEAR, grid, keys, 5);
    assert_true(i > 0 && i < 4); /* factor 4 when written */
}

/* ---- progress and cancellation ---- */

typedef struct progress_log {
    int calls, stop_after, last, max_total, monotone;
} progress_log;

static int progress(void *ctx, int iteration, int max_total, double objective)
{
    (void)objective;
    progress_log *pl = ctx;
    pl->calls++;
    if (iteration < pl->last)
        pl->monotone = 0;
    pl->last = iteration;
    if (pl->max_total && pl->max_total != max_total)
        pl->monotone = 0; /* the span must not change within a fit */
    pl->max_total = max_total;
    return pl->stop_after > 0 && pl->calls >= pl->stop_after;
}

static void test_progress_cancel(void **state)
{
    (void)state;
    fit_case c;
    case_init(&c, "kernel_sum");
    gp_kernel *k = rbf_ard(FD);
    gp_fit_request req;
    case_request(&c, k, &req);
    progress_log pl = {.monotone = 1};
    req.progress = progress;
    req.progress_ctx = &pl;
    gp_model *model = fit_ok(gwi(), &req, "auto with progress");
    assert_int_equal(pl.max_total, 5 * EPOCHS);
    assert_true(pl.monotone);
    assert_true(pl.last > 4 * EPOCHS - 1); /* the last factor's epochs were reported */
    int total = pl.calls;
    gp_model_free(model);
    int stops[3] = {2, total / 2, total - 1};
    for (int i = 0; i < 3; i++) {
        gp_error err;
        pl = (progress_log){.stop_after = stops[i], .monotone = 1};
        model = NULL;
        assert_int_equal(gp_model_fit(gwi(), &req, &model, &err), GP_ECANCELLED);
        assert_null(model);
    }
    gp_kernel_free(k);
}

/* ---- determinism and persistence ---- */

static void export_ok(const gp_model *model, gp_state *st)
{
    gp_error err;
    gp_state_init(st);
    if (gp_model_export(model, st, &err) != GP_OK)
        fail_msg("export: %s", err.message);
}

static void test_threads_same_bits(void **state)
{
    (void)state;
    fit_case c;
    case_init(&c, "kernel_sum");
    gp_parallel_set_threads(1);
    gp_model *one = case_fit(&c, "1 thread");
    gp_parallel_set_threads(2);
    gp_model *two = case_fit(&c, "2 threads");
    gp_parallel_set_threads(0);
    gp_state sa, sb;
    export_ok(one, &sa);
    export_ok(two, &sb);
    assert_int_equal(sa.count, sb.count);
    for (size_t i = 0; i < sa.count; i++) {
        size_t cnt = sa.arrays[i].rows * sa.arrays[i].cols;
        assert_int_equal(cnt, sb.arrays[i].rows * sb.arrays[i].cols);
        int diag = strcmp(sa.arrays[i].name, "diagnostics") == 0;
        for (size_t j = 0; j < cnt; j++)
            if (!(diag && j == 5) && /* diagnostics[5]: wall-clock seconds */
                memcmp(&sa.arrays[i].data[j], &sb.arrays[i].data[j], sizeof(double)) != 0)
                fail_msg("threads: %s[%zu] differs", sa.arrays[i].name, j);
    }
    same_predictions(one, two, "1 vs 2 threads");
    gp_state_free(&sa);
    gp_state_free(&sb);
    gp_model_free(one);
    gp_model_free(two);
}

static void test_export_import(void **state)
{
    (void)state;
    fit_case c;
    case_init(&c, "mlp");
    gp_model *model = case_fit(&c, "auto mlp");
    gp_state st;
    export_ok(model, &st);
    gp_model *copy = NULL;
    gp_error err;
    if (gp_model_import(gwi(), &st, &copy, &err) != GP_OK)
        fail_msg("import: %s (field '%s')", err.message, err.field);
    same_predictions(model, copy, "auto model vs its import");
    gp_state_free(&st);
    gp_model_free(model);
    gp_model_free(copy);
}

/* ---- refused values ---- */

static void test_bad_values(void **state)
{
    (void)state;
    gp_option_value bad[] = {{"inducing_factor", NAN, "best", NULL},
                             {"inducing_factor", NAN, "AUTO", NULL},
                             {"inducing_factor", 0.0, NULL, NULL},
                             {"inducing_factor", 101.0, NULL, NULL},
                             {"inducing_factor", NAN, NULL, NULL},
                             {"inducing_factor", INFINITY, NULL, NULL}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gp_error err;
        assert_int_equal(gp_options_validate(gwi(), &bad[i], 1, &err), GP_EINVAL);
        assert_string_equal(err.field, "options.inducing_factor");
    }
    gp_option_value good[] = {{"inducing_factor", NAN, "auto", NULL}};
    gp_error err;
    assert_int_equal(gp_options_validate(gwi(), good, 1, &err), GP_OK);
    /* combinations auto cannot serve: refused by the fit, naming the field */
    const char *other[] = {"inducing", "validation_fraction"};
    double value[] = {10, 0};
    for (size_t i = 0; i < 2; i++) {
        fit_case c;
        case_init(&c, "kernel_sum");
        c.o[c.no++] = (gp_option_value){other[i], value[i], NULL, NULL};
        gp_kernel *k = rbf_ard(FD);
        gp_fit_request req;
        case_request(&c, k, &req);
        gp_model *model = NULL;
        assert_int_equal(gp_model_fit(gwi(), &req, &model, &err), GP_EINVAL);
        assert_string_equal(err.field, "options.inducing_factor");
        assert_null(model);
        gp_kernel_free(k);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_picks_minimum_kernel_sum),
        cmocka_unit_test(test_picks_minimum_mlp),
        cmocka_unit_test(test_picks_minimum_linear_mean),
        cmocka_unit_test(test_progress_cancel),
        cmocka_unit_test(test_threads_same_bits),
        cmocka_unit_test(test_export_import),
        cmocka_unit_test(test_bad_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
