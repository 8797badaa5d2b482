/* bench/: the experiment driver's pieces that decide what runs
 * (bench/driver/experiment.c: datasets, splits, the grid's expansion, labels,
 * the quick preset, rules) and the one argument parser of the bench programs
 * (bench/support/cli.c, args.c). Every expectation is written out here from
 * the format bench/README.md describes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include <math.h>
#include <stdlib.h>

#include "bench/driver/experiment.h"
#include "bench/driver/prepare.h"
#include "bench/driver/run.h"
#include "bench/driver/score.h"
#include "bench/support/args.h"
#include "bench/support/fit.h"
#include "bench/support/cli.h"
#include "core/likelihood/likelihood.h"
#include "core/methods/registry.h"
#include "core/model/model.h"

static const char *const EXPERIMENT =
    "{\"name\": \"t\", \"seed\": 0,"
    " \"datasets\": [{\"name\": \"a\", \"splits\": 3},"
    "              {\"name\": \"b\", \"splits\": [4, 7],"
    "               \"grid\": {\"features\": [500]},"
    "               \"rules\": [{\"when\": {\"method\": \"ssgp\", \"features\": 500},"
    "                           \"set\": {\"max_iterations\": 40}},"
    "                          {\"when\": {\"method\": \"exact\", \"n_train_above\": 5000},"
    "                           \"skip\": \"too large\"}]}],"
    " \"runs\": [{\"method\": \"ssgp\", \"label\": \"{frequencies} | {learned|fixed|learned}\","
    "            \"options\": {\"x\": 1},"
    "            \"grid\": {\"features\": [100, 500], \"frequencies\": [\"mc\", \"qmc\"],"
    "                     \"learned\": [false, true]}},"
    "           {\"method\": \"exact\", \"label\": \"{method} GP\"}],"
    " \"quick\": {\"datasets\": [\"b\"], \"splits\": 1,"
    "           \"grid\": {\"frequencies\": [\"qmc\"]},"
    "           \"rules\": [{\"when\": {\"method\": \"ssgp\"}, \"set\": {\"epochs\": 10}}]}}";

static json_t *load(void)
{
    json_error_t jerr;
    json_t *exp = json_loads(EXPERIMENT, 0, &jerr);
    assert_non_null(exp);
    return exp;
}

static const char *label_of(const json_t *runs, size_t i)
{
    return json_string_value(json_object_get(json_array_get(runs, i), "label"));
}

static json_int_t option_int(const json_t *run, const char *key)
{
    return json_integer_value(json_object_get(json_object_get(run, "options"), key));
}

/* The grid expands first key slowest, labels filled from the options. */
static void test_grid_expansion_order_and_labels(void **state)
{
    (void)state;
    json_t *exp = load();
    json_t *runs = gpb_experiment_runs(exp, NULL, 0);
    assert_int_equal(json_array_size(runs), 2 * 2 * 2 + 1);
    assert_string_equal(label_of(runs, 0), "mc | fixed");
    assert_string_equal(label_of(runs, 1), "mc | learned");
    assert_string_equal(label_of(runs, 2), "qmc | fixed");
    assert_int_equal(option_int(json_array_get(runs, 0), "features"), 100);
    assert_int_equal(option_int(json_array_get(runs, 4), "features"), 500);
    assert_int_equal(option_int(json_array_get(runs, 4), "x"), 1);
    assert_string_equal(label_of(runs, 8), "exact GP");
    /* the method's name was only there for the label */
    assert_null(json_object_get(json_object_get(json_array_get(runs, 8), "options"), "method"));
    json_decref(runs);
    json_decref(exp);
}

/* A dataset's grid, then the quick preset's, replace the run's values. */
static void test_dataset_and_quick_grids(void **state)
{
    (void)state;
    json_t *exp = load();
    const json_t *b = json_array_get(json_object_get(exp, "datasets"), 1);
    json_t *runs = gpb_experiment_runs(exp, b, 1);
    assert_int_equal(json_array_size(runs), 1 * 1 * 2 + 1);
    assert_string_equal(label_of(runs, 0), "qmc | fixed");
    assert_int_equal(option_int(json_array_get(runs, 0), "features"), 500);
    json_decref(runs);
    json_decref(exp);
}

static void test_datasets_and_splits(void **state)
{
    (void)state;
    json_t *exp = load();
    json_t *all = gpb_experiment_datasets(exp, 0, NULL);
    json_t *quick = gpb_experiment_datasets(exp, 1, NULL);
    json_t *only = gpb_experiment_datasets(exp, 0, "a,zzz");
    assert_int_equal(json_array_size(all), 2);
    assert_int_equal(json_array_size(quick), 1);
    assert_int_equal(json_array_size(only), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(only, 0), "name")), "a");
    const json_t *a = json_array_get(all, 0), *b = json_array_get(all, 1);
    json_t *s = gpb_dataset_splits(exp, a, 0);
    assert_int_equal(json_array_size(s), 3);
    assert_int_equal(json_integer_value(json_array_get(s, 2)), 2);
    json_decref(s);
    s = gpb_dataset_splits(exp, a, 1); /* the quick preset's count cuts it */
    assert_int_equal(json_array_size(s), 1);
    json_decref(s);
    s = gpb_dataset_splits(exp, b, 0); /* a list is taken as written */
    assert_int_equal(json_array_size(s), 2);
    assert_int_equal(json_integer_value(json_array_get(s, 1)), 7);
    json_decref(s);
    json_decref(all);
    json_decref(quick);
    json_decref(only);
    json_decref(exp);
}

/* Rules set options or skip by method, option value and training size;
 * the quick preset's rules come last. */
static void test_rules(void **state)
{
    (void)state;
    json_t *exp = load();
    const json_t *b = json_array_get(json_object_get(exp, "datasets"), 1);
    json_t *runs = gpb_experiment_runs(exp, NULL, 0);
    json_t *r100 = gpb_apply_rules(exp, b, json_array_get(runs, 0), 0, 100);
    json_t *r500 = gpb_apply_rules(exp, b, json_array_get(runs, 4), 0, 100);
    json_t *r500q = gpb_apply_rules(exp, b, json_array_get(runs, 4), 1, 100);
    json_t *small = gpb_apply_rules(exp, b, json_array_get(runs, 8), 0, 5000);
    json_t *large = gpb_apply_rules(exp, b, json_array_get(runs, 8), 0, 5001);
    assert_null(json_object_get(json_object_get(r100, "options"), "max_iterations"));
    assert_int_equal(option_int(r500, "max_iterations"), 40);
    assert_null(json_object_get(json_object_get(r500, "options"), "epochs"));
    assert_int_equal(option_int(r500q, "epochs"), 10);
    assert_null(json_object_get(small, "skip"));
    assert_string_equal(json_string_value(json_object_get(large, "skip")), "too large");
    /* the expanded run itself is left as it was */
    assert_null(json_object_get(json_object_get(json_array_get(runs, 4), "options"),
                                "max_iterations"));
    json_decref(r100);
    json_decref(r500);
    json_decref(r500q);
    json_decref(small);
    json_decref(large);
    json_decref(runs);
    json_decref(exp);
}

/* A rule may match a run's label and a split number (the run's "split"),
 * and merge "fit" settings over the dataset's and the run's; the quick
 * preset's "runs" keeps only the labels it names. */
static void test_rules_fit_label_split_and_quick_runs(void **state)
{
    (void)state;
    json_error_t jerr;
    json_t *exp = json_loads(
        "{\"name\": \"t\", \"datasets\": [{\"name\": \"a\","
        "  \"fit\": {\"standardize\": false, \"noise\": 0.5},"
        "  \"rules\": [{\"when\": {\"label\": \"B\"}, \"fit\": {\"noise_fixed\": true}},"
        "             {\"when\": {\"label\": \"B\", \"split_at_least\": 3}, \"skip\": \"late\"}]}],"
        " \"runs\": [{\"method\": \"exact\", \"label\": \"A\", \"fit\": {\"noise\": 2}},"
        "           {\"method\": \"exact\", \"label\": \"B\"}],"
        " \"quick\": {\"runs\": [\"B\"]}}",
        0, &jerr);
    assert_non_null(exp);
    const json_t *ds = json_array_get(json_object_get(exp, "datasets"), 0);
    json_t *runs = gpb_experiment_runs(exp, ds, 0);
    assert_int_equal(json_array_size(runs), 2);
    json_t *a = gpb_apply_rules(exp, ds, json_array_get(runs, 0), 0, 10);
    json_t *b = json_deep_copy(json_array_get(runs, 1));
    json_object_set_new(b, "split", json_integer(2));
    json_t *b2 = gpb_apply_rules(exp, ds, b, 0, 10);
    json_object_set_new(b, "split", json_integer(3));
    json_t *b3 = gpb_apply_rules(exp, ds, b, 0, 10);
    const json_t *fa = json_object_get(a, "fit"), *fb = json_object_get(b2, "fit");
    /* the run's noise over the dataset's; the dataset's standardize kept */
    assert_true(json_number_value(json_object_get(fa, "noise")) == 2.0);
    assert_true(json_is_false(json_object_get(fa, "standardize")));
    assert_null(json_object_get(fa, "noise_fixed"));
    assert_true(json_number_value(json_object_get(fb, "noise")) == 0.5);
    assert_true(json_is_true(json_object_get(fb, "noise_fixed")));
    assert_null(json_object_get(a, "skip"));
    assert_null(json_object_get(b2, "skip"));
    assert_string_equal(json_string_value(json_object_get(b3, "skip")), "late");
    json_t *quick = gpb_experiment_runs(exp, ds, 1);
    assert_int_equal(json_array_size(quick), 1);
    assert_string_equal(label_of(quick, 0), "B");
    json_decref(quick);
    json_decref(a);
    json_decref(b);
    json_decref(b2);
    json_decref(b3);
    json_decref(runs);
    json_decref(exp);
}

/* The dataset's own preprocessing: the other columns MinMax on all rows
 * (a constant one to 0), a one-hot column's values ascending after them,
 * y standardised with the population std. */
static void test_preprocess(void **state)
{
    (void)state;
    /* 4 rows, 3 columns (column-major): x0 = 0..3, x1 levels 5,2,5,9, x2 constant */
    double X[12] = {0, 1, 2, 3, 5, 2, 5, 9, 7, 7, 7, 7};
    double y[4] = {1, 3, 1, 3};
    gp_dataset ds;
    memset(&ds, 0, sizeof ds);
    ds.n = 4;
    ds.d = 3;
    ds.X = malloc(sizeof X);
    ds.y = malloc(sizeof y);
    assert_non_null(ds.X);
    assert_non_null(ds.y);
    memcpy(ds.X, X, sizeof X);
    memcpy(ds.y, y, sizeof y);
    json_error_t jerr;
    json_t *spec =
        json_loads("{\"x\": \"minmax\", \"one_hot\": [1], \"y\": \"standard\"}", 0, &jerr);
    gp_error err;
    gp_error_clear(&err);
    double y_sd = 0.0;
    assert_int_equal(gpb_preprocess(spec, &ds, &y_sd, &err), GP_OK);
    assert_int_equal(ds.d, 5); /* x0, x2, then the levels 2, 5, 9 */
    const double want[20] = {0, 1.0 / 3, 2.0 / 3, 1, 0, 0, 0, 0, 0, 1, 0, 0,
                             1, 0, 1, 0, 0, 0, 0, 1};
    for (size_t i = 0; i < 20; i++)
        assert_true(fabs(ds.X[i] - want[i]) < 1e-15);
    assert_true(y_sd == 1.0);
    assert_true(ds.y[0] == -1.0 && ds.y[1] == 1.0);
    json_decref(spec);
    /* more levels than a one-hot column may have, or an unknown x: errors */
    spec = json_loads("{\"x\": \"log\"}", 0, &jerr);
    assert_int_equal(gpb_preprocess(spec, &ds, &y_sd, &err), GP_EINVAL);
    json_decref(spec);
    gp_dataset_free(&ds);
}

/* "split_file": the rows of line k of that file are the test set, the rest
 * the training set, both in row order; the entry is prepared (not loaded from
 * the datasets folder's splits/). */
static void test_split_file(void **state)
{
    (void)state;
    char path[] = "/tmp/gp_test_split_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    fputs("0 4\n1 3\n", f);
    fclose(f);
    gp_dataset all;
    memset(&all, 0, sizeof all);
    all.n = 5;
    all.d = 1;
    all.X = malloc(5 * sizeof(double));
    all.y = malloc(5 * sizeof(double));
    assert_non_null(all.X);
    assert_non_null(all.y);
    for (size_t i = 0; i < 5; i++) {
        all.X[i] = (double)i;
        all.y[i] = 10.0 + (double)i;
    }
    json_t *ds = json_pack("{s:s, s:s}", "name", "no_such_set", "split_file", path);
    assert_true(gpb_prepare_wanted(ds));
    gp_dataset train, test;
    gp_error err;
    gp_error_clear(&err);
    assert_int_equal(gpb_prepare_split(ds, &all, 1, &train, &test, &err), GP_OK);
    assert_int_equal(test.n, 2);
    assert_int_equal(train.n, 3);
    assert_true(test.X[0] == 1.0 && test.X[1] == 3.0 && test.y[1] == 13.0);
    assert_true(train.X[0] == 0.0 && train.X[1] == 2.0 && train.X[2] == 4.0);
    gp_dataset_free(&train);
    gp_dataset_free(&test);
    /* a split the file does not have: an error, nothing left allocated */
    assert_true(gpb_prepare_split(ds, &all, 2, &train, &test, &err) != GP_OK);
    json_decref(ds);
    gp_dataset_free(&all);
    remove(path);
}

/* softmax scores: accuracy of the argmax class and the log loss of the true
 * class's probability, read from obs_mean's column of that class (m x C,
 * column-major), checked against a prediction made here. */
static void test_softmax_scores(void **state)
{
    (void)state;
    enum { N = 30, M = 3, C = 3 };
    double X[N], y[N], Xt[M] = {-3.0, 0.0, 3.0}, yt[M] = {0.0, 1.0, 2.0};
    for (size_t i = 0; i < N; i++) {
        y[i] = (double)(i % C);
        X[i] = 3.0 * (y[i] - 1.0) + 0.1 * (double)(i / C) - 0.45;
    }
    gp_dataset train = {.n = N, .d = 1, .X = X, .y = y}, test = {.n = M, .d = 1, .X = Xt, .y = yt};
    gp_bench_fit_setup su = gp_bench_fit_default();
    su.likelihood = GP_LIK_SOFTMAX;
    gp_model *model = NULL;
    double secs;
    gp_error err;
    gp_error_clear(&err);
    assert_int_equal(gp_bench_fit_timed_with(gp_method_find("svgp"), NULL, 0, &train, 0, &su,
                                             &model, &secs, &err),
                     GP_OK);
    assert_int_equal(model->n_outputs, C);
    double buf[8 * M * C] = {0};
    gp_prediction out = {.mean = buf, .variance = buf + M * C, .latent_mean = buf + 2 * M * C,
                         .latent_variance = buf + 3 * M * C, .obs_mean = buf + 4 * M * C,
                         .obs_variance = buf + 5 * M * C, .rate_mean = buf + 6 * M * C,
                         .rate_variance = buf + 7 * M * C};
    gp_predict_request req = {.X = Xt, .m = M, .d = 1, .include_noise = 1};
    assert_int_equal(gp_model_predict(model, &req, &out, &err), GP_OK);
    double want = 0.0;
    for (size_t i = 0; i < M; i++) /* each point's own class is its most probable */
        want -= log(out.obs_mean[i * M + i]) / M;
    json_t *rec = json_object();
    assert_int_equal(gpb_score(model, &test, NULL, 1.0, rec, &err), GP_OK);
    assert_true(json_real_value(json_object_get(rec, "accuracy")) == 100.0);
    assert_true(fabs(json_real_value(json_object_get(rec, "log_loss")) - want) < 1e-12);
    assert_int_equal(json_integer_value(json_object_get(rec, "classes")), C);
    /* every label moved on by one class: none right, the log loss of those columns */
    double moved[M] = {1.0, 2.0, 0.0};
    test.y = moved;
    want = -(log(out.obs_mean[1 * M + 0]) + log(out.obs_mean[2 * M + 1]) +
             log(out.obs_mean[0 * M + 2])) / M;
    assert_int_equal(gpb_score(model, &test, NULL, 1.0, rec, &err), GP_OK);
    assert_true(json_real_value(json_object_get(rec, "accuracy")) == 0.0);
    assert_true(fabs(json_real_value(json_object_get(rec, "log_loss")) - want) < 1e-12);
    json_decref(rec);
    gp_model_free(model);
}

/* AUC by ranks: ties share their average rank; one class only: NAN. */
/* --smoke: the descriptor's quick preset replaces the file's sizes and keeps
 * its other options; an unknown method is left alone. */
static void test_method_quick_preset(void **state)
{
    (void)state;
    json_error_t je;
    json_t *run = json_loads("{\"method\": \"msrfr\", \"options\": {\"particles\": 6, "
                             "\"features\": 100, \"bandwidth\": \"per_dim\"}}",
                             0, &je);
    assert_non_null(run);
    gpb_apply_method_quick(run, "msrfr");
    const gp_method *m = gp_method_find("msrfr");
    assert_true(m->n_quick > 0);
    json_t *o = json_object_get(run, "options");
    for (size_t i = 0; i < m->n_quick; i++) {
        json_t *v = json_object_get(o, m->quick[i].name);
        assert_non_null(v);
        assert_true(json_number_value(v) == m->quick[i].number);
    }
    assert_true(json_integer_value(json_object_get(o, "particles")) != 6);
    assert_string_equal(json_string_value(json_object_get(o, "bandwidth")), "per_dim");
    json_t *bare = json_pack("{s:s}", "method", "nosuch");
    gpb_apply_method_quick(bare, "nosuch");
    assert_null(json_object_get(bare, "options"));
    json_decref(bare);
    json_decref(run);
}

static void test_auc(void **state)
{
    (void)state;
    const double p[4] = {0.1, 0.4, 0.4, 0.8}, y[4] = {0, 1, 0, 1};
    /* pairs (pos, neg): (0.4,0.1) 1, (0.4,0.4) 0.5, (0.8,*) 2 -> 3.5 / 4 */
    assert_true(fabs(gpb_auc(p, y, 4) - 0.875) < 1e-15);
    const double ones[2] = {1, 1};
    assert_true(isnan(gpb_auc(p, ones, 2)));
}

/* The median heuristic: the median pairwise distance of the standardised
 * rows; 1 when fewer than two rows are taken. */
static void test_median_heuristic(void **state)
{
    (void)state;
    const double X[3] = {0, 1, 3};
    /* population sd of 0, 1, 3; distances 1, 2, 3 over it: the median 2 / sd */
    double sd = sqrt((16.0 / 9 + 1.0 / 9 + 25.0 / 9) / 3);
    assert_true(fabs(gp_bench_median_heuristic(X, 3, 1, 3, 0) - 2.0 / sd) < 1e-12);
    assert_true(gp_bench_median_heuristic(X, 3, 1, 1, 0) == 1.0);
}

/* The shared parser: flags, strings, bounded integers, positional words,
 * --help, and each way a command line can be wrong. */
static void test_cli(void **state)
{
    (void)state;
    int quick = 0;
    long reps = 0;
    const char *sizes = NULL;
    const gp_bench_cli_option opts[] = {
        {"quick", GP_BENCH_CLI_FLAG, &quick, 0, 0, "q"},
        {"sizes", GP_BENCH_CLI_STRING, &sizes, 0, 0, "s"},
        {"reps", GP_BENCH_CLI_LONG, &reps, 1, 10, "r"},
    };
    const char *pos[2];
    size_t n_pos = 9;
    char *ok[] = {"p", "run", "--quick", "--reps", "10", "x.json", "--sizes", "1,2"};
    assert_int_equal(gp_bench_cli_parse(8, ok, opts, 3, "", pos, 2, &n_pos), 0);
    assert_int_equal(quick, 1);
    assert_int_equal(reps, 10);
    assert_string_equal(sizes, "1,2");
    assert_int_equal(n_pos, 2);
    assert_string_equal(pos[1], "x.json");
    char *too_big[] = {"p", "--reps", "11"};
    assert_int_equal(gp_bench_cli_parse(3, too_big, opts, 3, "", pos, 2, &n_pos), 2);
    char *missing[] = {"p", "--sizes"};
    assert_int_equal(gp_bench_cli_parse(2, missing, opts, 3, "", pos, 2, &n_pos), 2);
    char *unknown[] = {"p", "--nope"};
    assert_int_equal(gp_bench_cli_parse(2, unknown, opts, 3, "", pos, 2, &n_pos), 2);
    char *extra[] = {"p", "a", "b", "c"};
    assert_int_equal(gp_bench_cli_parse(4, extra, opts, 3, "", pos, 2, &n_pos), 2);
    char *help[] = {"p", "--help"};
    assert_int_equal(gp_bench_cli_parse(2, help, opts, 3, "", pos, 2, &n_pos), 1);
}

/* A DOUBLE option takes a whole finite number; anything else is refused
 * (bench_online's --noise, bench_kernel_approx's --stein-step). */
static void test_cli_double(void **state)
{
    (void)state;
    double x = -1.0;
    const gp_bench_cli_option opts[] = {{"x", GP_BENCH_CLI_DOUBLE, &x, 0, 0, "x"}};
    size_t n_pos = 0;
    char *ok[] = {"p", "--x", "2.5e-3"};
    assert_int_equal(gp_bench_cli_parse(3, ok, opts, 1, "", NULL, 0, &n_pos), 0);
    assert_true(x == 2.5e-3);
    char *bad[][3] = {{"p", "--x", "abc"}, {"p", "--x", "1.5z"}, {"p", "--x", "inf"},
                      {"p", "--x", "nan"}, {"p", "--x", "1e999"}, {"p", "--x", ""}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(gp_bench_cli_parse(3, bad[i], opts, 1, "", NULL, 0, &n_pos), 2);
        assert_true(x == 2.5e-3); /* untouched */
    }
}

static void test_parse_sizes(void **state)
{
    (void)state;
    size_t out[3], n = 0;
    assert_int_equal(gp_bench_parse_sizes("927,3000", 1, 20000, out, 3, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(out[1], 3000);
    assert_int_equal(gp_bench_parse_sizes("1,2,3,4", 1, 9, out, 3, &n), -1);
    assert_int_equal(gp_bench_parse_sizes("1,,2", 1, 9, out, 3, &n), -1);
    assert_int_equal(gp_bench_parse_sizes("0", 1, 9, out, 3, &n), -1);
    assert_int_equal(gp_bench_parse_sizes("", 1, 9, out, 3, &n), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grid_expansion_order_and_labels),
        cmocka_unit_test(test_dataset_and_quick_grids),
        cmocka_unit_test(test_datasets_and_splits),
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_rules_fit_label_split_and_quick_runs),
        cmocka_unit_test(test_preprocess),
        cmocka_unit_test(test_split_file),
        cmocka_unit_test(test_softmax_scores),
        cmocka_unit_test(test_auc),
        cmocka_unit_test(test_method_quick_preset),
        cmocka_unit_test(test_median_heuristic),
        cmocka_unit_test(test_cli),
        cmocka_unit_test(test_cli_double),
        cmocka_unit_test(test_parse_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
