/* Method "auto"'s rule table and pick (core/model/auto.h): which candidates
 * for which rows, likelihood, outputs, symmetry and budget, in which order;
 * the pick's tie rule case by case. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "core/methods/registry.h"
#include "core/model/auto.h"
#include "core/model/model.h"

static gp_auto_problem problem(size_t n, gp_likelihood lik, double budget)
{
    gp_auto_problem p;
    memset(&p, 0, sizeof p);
    p.n = n;
    p.d = 3;
    p.likelihood = lik;
    p.outputs = 1;
    p.budget_s = budget;
    p.fits_each = 5;
    return p;
}

/* The candidates' names joined by spaces; skipped ones marked with a '-'. */
static void names(const gp_auto_problem *p, char *buf, size_t len)
{
    gp_auto_candidate c[GP_AUTO_MAX_CANDIDATES];
    size_t count = 99;
    gp_auto_candidates(p, c, &count);
    buf[0] = '\0';
    for (size_t i = 0; i < count; i++) {
        strncat(buf, i ? " " : "", len - strlen(buf) - 1);
        if (c[i].skip)
            strncat(buf, "-", len - strlen(buf) - 1);
        strncat(buf, c[i].method, len - strlen(buf) - 1);
        assert_true(c[i].est_fit_s > 0.0 && isfinite(c[i].est_fit_s));
    }
}

static void expect(const gp_auto_problem *p, const char *want)
{
    char got[256];
    names(p, got, sizeof got);
    assert_string_equal(got, want);
}

static void test_gaussian_small(void **state)
{
    (void)state;
    gp_auto_problem p = problem(200, GP_LIK_GAUSSIAN, 60);
    expect(&p, "exact ssgp pls gwi msrfr"); /* msrfr: 5 x 10 s fits fit 60 s */
    p.budget_s = 30;
    expect(&p, "exact ssgp pls gwi -msrfr");
    p.symmetry = 1; /* hkd only with a symmetry */
    expect(&p, "exact hkd ssgp pls gwi -msrfr");
}

static void test_gaussian_large(void **state)
{
    (void)state;
    gp_auto_problem p = problem(2000, GP_LIK_GAUSSIAN, 3600);
    expect(&p, "exact ssgp pls gwi msrfr");
    p.n = 2001; /* sgpr beyond 2000 rows */
    expect(&p, "exact sgpr ssgp pls gwi msrfr");
    p.n = 5000;
    expect(&p, "exact sgpr ssgp pls gwi msrfr");
    p.n = 5001; /* beyond exact: svgp comes in */
    expect(&p, "sgpr ssgp svgp pls gwi msrfr");
    p.n = 30000; /* msrfr up to 20000 rows; pls (superlinear) ~1200 s a fit */
    expect(&p, "sgpr ssgp svgp -pls gwi");
    p.budget_s = 60; /* a minute of 30000 rows: every validation is over */
    expect(&p, "-sgpr -ssgp -svgp -pls -gwi");
    p = problem(3000, GP_LIK_GAUSSIAN, 60); /* exact's 5 + 1 fits of ~18 s are over 60 s, */
    expect(&p, "-exact -sgpr ssgp -pls -gwi -msrfr"); /* pls's of ~17 s too */
}

static void test_other_likelihoods(void **state)
{
    (void)state;
    gp_auto_problem p = problem(300, GP_LIK_BERNOULLI, 60);
    expect(&p, "svgp pls");
    p.likelihood = GP_LIK_SOFTMAX;
    expect(&p, "svgp");
    p.likelihood = GP_LIK_POISSON;
    expect(&p, "svgp pls");
    p.likelihood = GP_LIK_POISSON_SQ;
    expect(&p, "pls");
}

static void test_outputs(void **state)
{
    (void)state;
    gp_auto_problem p = problem(300, GP_LIK_GAUSSIAN, 60);
    p.outputs = 2; /* the coregionalised methods only */
    expect(&p, "exact");
    p.n = 3000;
    p.budget_s = 3600;
    expect(&p, "exact sgpr");
    p.budget_s = 400;
    p.n = 8000;
    expect(&p, "-sgpr svgp"); /* sgpr's 5 + 1 fits of ~100 s are over 400 s, svgp's 63 s not */
    p.budget_s = 3600;
    expect(&p, "sgpr svgp");
}

/* Every rule names a registered method that fits the likelihoods it is
 * listed for: the table cannot drift from the descriptors. */
static void test_rules_match_descriptors(void **state)
{
    (void)state;
    for (int l = 0; l < GP_LIK_COUNT; l++) {
        for (int sym = 0; sym < 2; sym++) {
            gp_auto_problem p = problem(1000, (gp_likelihood)l, 1e6);
            p.symmetry = sym;
            gp_auto_candidate c[GP_AUTO_MAX_CANDIDATES];
            size_t count = 0;
            gp_auto_candidates(&p, c, &count);
            assert_true(count >= 1);
            for (size_t i = 0; i < count; i++) {
                const gp_method *m = gp_method_find(c[i].method);
                assert_non_null(m);
                assert_true(gp_method_accepts_likelihood(m, (gp_likelihood)l));
            }
        }
    }
}

/* The estimate grows with the rows, and the dearest (msrfr) runs last. */
static void test_estimates(void **state)
{
    (void)state;
    gp_auto_problem a = problem(500, GP_LIK_GAUSSIAN, 1e6), b = problem(2000, GP_LIK_GAUSSIAN, 1e6);
    gp_auto_candidate ca[GP_AUTO_MAX_CANDIDATES], cb[GP_AUTO_MAX_CANDIDATES];
    size_t na = 0, nb = 0;
    gp_auto_candidates(&a, ca, &na);
    gp_auto_candidates(&b, cb, &nb);
    assert_int_equal(na, nb);
    for (size_t i = 0; i < na; i++) {
        assert_string_equal(ca[i].method, cb[i].method);
        assert_true(cb[i].est_fit_s > ca[i].est_fit_s);
    }
    assert_true(ca[na - 1].est_fit_s > ca[0].est_fit_s); /* msrfr dearer than exact */
}

static gp_auto_score done(double mean, double sd, double seconds)
{
    gp_auto_score s = {1, mean, sd, 5, seconds};
    return s;
}

static void test_pick(void **state)
{
    (void)state;
    gp_auto_score s[4];
    /* a clear best: se of index 1 = 0.1 / sqrt 5 = 0.0447 */
    s[0] = done(1.0, 0.1, 1.0);
    s[1] = done(0.5, 0.1, 9.0);
    s[2] = done(0.9, 0.1, 0.1);
    assert_int_equal(gp_auto_pick(s, 3), 1);
    /* within one standard error of the best: the earliest in the table's order */
    s[0] = done(0.54, 0.1, 1.0);
    assert_int_equal(gp_auto_pick(s, 3), 0);
    s[0] = done(0.545, 0.1, 1.0); /* 0.045 > 0.0447: not tied */
    assert_int_equal(gp_auto_pick(s, 3), 1);
    /* the tie is the best's own standard error, whatever the others' */
    s[0] = done(0.51, 0.0, 1.0);
    s[1] = done(0.5, 0.01, 9.0); /* se 0.00447 */
    assert_int_equal(gp_auto_pick(s, 3), 1);
    s[0] = done(0.504, 0.0, 1.0);
    assert_int_equal(gp_auto_pick(s, 3), 0);
    /* a later candidate never wins a tie against an earlier one, cheaper or not */
    s[0] = done(0.7, 0.0, 0.1);
    s[1] = done(0.5, 0.1, 9.0);
    s[2] = done(0.52, 0.1, 0.01);
    assert_int_equal(gp_auto_pick(s, 3), 1);
    /* not done or non-finite: never picked */
    s[0] = done(-5.0, 0.0, 0.0);
    s[0].done = 0;
    s[3] = done(NAN, 0.0, 0.0);
    assert_int_equal(gp_auto_pick(s, 4), 1);
    gp_auto_score none[2] = {{0}, {0}};
    assert_int_equal(gp_auto_pick(none, 2), -1);
    assert_int_equal(gp_auto_pick(none, 0), -1);
    /* one fold (a hold-out part): no spread, the lowest mean */
    s[0] = done(0.3, 0.0, 1.0);
    s[0].folds = 1;
    s[1] = done(0.29, 0.5, 1.0);
    s[1].folds = 1;
    assert_int_equal(gp_auto_pick(s, 2), 1);
}


/* Auto's default validation: 5 folds up to 2000 rows, a 0.2 hold-out
 * beyond; the seed is kept. */
static void test_default_validation(void **state)
{
    (void)state;
    gp_validation_spec s = {3, 0.5, 77};
    assert_int_equal(gp_auto_default_validation(2000, &s), 0);
    assert_int_equal(s.folds, GP_AUTO_DEFAULT_FOLDS);
    assert_true(s.fraction == 0.0);
    assert_int_equal(s.seed, 77);
    assert_int_equal(gp_validation_fits(&s), 5);
    assert_int_equal(gp_auto_default_validation(2001, &s), 1);
    assert_int_equal(s.folds, 0);
    assert_true(s.fraction == 0.2);
    assert_int_equal(s.seed, 77);
    assert_int_equal(gp_validation_fits(&s), 1);
    assert_int_equal(gp_auto_default_validation(45730, &s), 1);
}

/* The validation is estimated on the training share of the rows, and the
 * final fit is part of the static skip: a candidate whose validation alone
 * fits but whose validation and final fit do not is skipped. */
static void test_estimates_hold_out(void **state)
{
    (void)state;
    gp_auto_problem p = problem(40000, GP_LIK_GAUSSIAN, 1e6);
    gp_validation_spec s = {0, 0.0, 1};
    gp_auto_default_validation(p.n, &s);
    p.fits_each = gp_validation_fits(&s);
    p.train_share = 1.0 - s.fraction;
    gp_auto_candidate c[GP_AUTO_MAX_CANDIDATES];
    size_t count = 0;
    gp_auto_candidates(&p, c, &count);
    assert_true(count >= 3);
    for (size_t i = 0; i < count; i++) { /* one fit on 32000 rows: below the 40000-row fit */
        assert_true(c[i].est_validation_s < c[i].est_fit_s);
        assert_true(c[i].est_validation_s > 0.5 * c[i].est_fit_s);
        /* the budget just over validation + final: kept; just under: skipped */
        gp_auto_problem q = p;
        gp_auto_candidate d[GP_AUTO_MAX_CANDIDATES];
        size_t nd = 0;
        q.budget_s = c[i].est_validation_s + c[i].est_fit_s + 1e-9;
        gp_auto_candidates(&q, d, &nd);
        assert_null(d[i].skip);
        q.budget_s = c[i].est_validation_s + c[i].est_fit_s - 1e-6;
        gp_auto_candidates(&q, d, &nd);
        assert_non_null(d[i].skip);
        assert_true(q.budget_s > c[i].est_validation_s); /* its validation alone would fit */
    }
    /* a budget the cheapest hold-out plan fits: five folds fit nothing in it */
    double cheapest = INFINITY;
    for (size_t i = 0; i < count; i++)
        cheapest = fmin(cheapest, c[i].est_validation_s + c[i].est_fit_s);
    gp_auto_problem k = problem(40000, GP_LIK_GAUSSIAN, cheapest);
    k.train_share = 0.8;
    expect(&k, "-sgpr -ssgp -svgp -pls -gwi");
    p.budget_s = cheapest + 1e-9;
    gp_auto_candidates(&p, c, &count);
    size_t runs = 0;
    for (size_t i = 0; i < count; i++)
        runs += c[i].skip == NULL;
    assert_true(runs >= 1);
}

/* The plan: elapsed + validation + the dearer final fit within budget_s. */
static void test_admits(void **state)
{
    (void)state;
    double need = 0.0;
    assert_true(gp_auto_admits(60, 10, 20, 30, 0, &need));
    assert_true(need == 50.0);
    assert_true(gp_auto_admits(60, 10, 20, 30, 30, &need)); /* 10 + 20 + 30 = 60: in */
    assert_false(gp_auto_admits(60, 10.5, 20, 30, 0, &need));
    /* a cheap candidate still waits for the reserved final fit of a dear one */
    assert_false(gp_auto_admits(60, 10, 5, 1, 46, &need));
    assert_true(need == 51.0);
    assert_true(gp_auto_admits(60, 10, 5, 1, 45, NULL));
    /* its own final fit, when dearer than the reserve */
    assert_false(gp_auto_admits(60, 0, 5, 56, 1, NULL));
}

static gp_auto_candidate cand(double validation, double fit)
{
    gp_auto_candidate c = {"exact", fit, validation, NULL};
    return c;
}

/* The reserve: the dearest final fit among the done candidates the pick
 * ties with now, each scaled by what its validation actually took. */
static void test_reserve(void **state)
{
    (void)state;
    gp_auto_candidate c[3] = {cand(10, 4), cand(2, 1), cand(50, 20)};
    gp_auto_score s[3];
    memset(s, 0, sizeof s);
    assert_true(gp_auto_reserve(c, s, 3) == 0.0); /* none done */
    s[0] = done(1.0, 0.0, 20.0);                  /* took twice its estimate */
    s[0].folds = 1;
    assert_true(gp_auto_reserve(c, s, 1) == 8.0);
    s[1] = done(0.5, 0.0, 1.0); /* better, half its estimate: only it could win */
    s[1].folds = 1;
    assert_true(gp_auto_reserve(c, s, 2) == 0.5);
    /* five folds, a wide spread: candidate 0 ties with 1, both reserved */
    s[0].folds = s[1].folds = 5;
    s[1].sd = 2.0; /* se 0.894: 1.0 is within 0.5 + 0.894 */
    assert_true(gp_auto_reserve(c, s, 2) == 8.0);
    /* one candidate's final fit: est_fit_s x took / estimated validation */
    assert_true(gp_auto_final_estimate(&c[2], &s[0]) == 20.0 * 20.0 / 50.0);
    /* skipped or failed candidates reserve nothing */
    s[2].done = 0;
    s[2].seconds = 1e9;
    assert_true(gp_auto_reserve(c, s, 3) == 8.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gaussian_small),   cmocka_unit_test(test_gaussian_large),
        cmocka_unit_test(test_other_likelihoods), cmocka_unit_test(test_outputs),
        cmocka_unit_test(test_rules_match_descriptors), cmocka_unit_test(test_estimates),
        cmocka_unit_test(test_pick),             cmocka_unit_test(test_default_validation),
        cmocka_unit_test(test_estimates_hold_out), cmocka_unit_test(test_admits),
        cmocka_unit_test(test_reserve),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
