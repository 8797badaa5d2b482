/* kernel: parameters and names (round trip, the free mask, copies), the flat
 * encoding and its validation (round trip, rejected codes, fuzz, the depth
 * limit), and constructor validation. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/base/rng.h"
#include "core/kernel/kernel.h"
#include "core/kernel/kernel_codec.h"
#include "core/kernel/kernel_spectral.h"
#include "tests/unit/testutil.h"
#include "tests/unit/kernel_fixture.h"

/* ------------------------------------------------------------------------ */
/* parameters                                                                 */

/* product(sum(rbf ARD, periodic), matern32): 4 + 3 + 2 parameters. */
static gp_kernel *nested_kernel(void)
{
    return comp(GP_KERNEL_PRODUCT, 2,
                comp(GP_KERNEL_SUM, 2, leaf(GP_KERNEL_RBF, 1, NULL, 0),
                     leaf(GP_KERNEL_PERIODIC, 1, NULL, 0)),
                leaf(GP_KERNEL_MATERN32, 0, NULL, 0));
}

static void test_params_roundtrip(void **state)
{
    (void)state;
    gp_kernel *k = nested_kernel();
    assert_int_equal(gp_kernel_n_params(k), 9);
    double th[9], back[9];
    gp_kernel_get_params(k, th);
    for (int i = 0; i < 9; i++)
        assert_true(th[i] == 0.0); /* every hyperparameter starts at 1 */
    for (int i = 0; i < 9; i++)
        th[i] = 0.1 * (i + 1) - 0.45;
    gp_kernel_set_params(k, th);
    gp_kernel_get_params(k, back);
    assert_memory_equal(th, back, sizeof th);
    /* The order: leaves depth first, each variance, lengthscales, alpha/period. */
    const gp_kernel *rbf = k->terms[0]->terms[0], *per = k->terms[0]->terms[1];
    const gp_kernel *m32 = k->terms[1];
    assert_true(rbf->log_variance == th[0] && rbf->log_lengthscale[2] == th[3]);
    assert_true(per->log_variance == th[4] && per->log_lengthscale[0] == th[5]);
    assert_true(per->log_period == th[6]);
    assert_true(m32->log_variance == th[7] && m32->log_lengthscale[0] == th[8]);

    gp_kernel *r = leaf(GP_KERNEL_RQ, 1, dims20, 2);
    double tr[4] = {0.1, 0.2, 0.3, 0.4};
    gp_kernel_set_params(r, tr);
    assert_true(r->log_alpha == 0.4 && r->log_lengthscale[1] == 0.3);
    gp_kernel_free(r);
    gp_kernel_free(k);
}

static void test_free_mask(void **state)
{
    (void)state;
    gp_kernel *k = nested_kernel();
    unsigned char m[9];
    gp_kernel_free_mask(k, m);
    for (int i = 0; i < 9; i++)
        assert_int_equal(m[i], 1);
    k->terms[0]->terms[0]->fixed = GP_FIX_LENGTHSCALE;
    k->terms[0]->terms[1]->fixed = GP_FIX_PERIOD | GP_FIX_VARIANCE;
    k->terms[1]->fixed = GP_FIX_ALL;
    gp_kernel_free_mask(k, m);
    const unsigned char want[9] = {1, 0, 0, 0, 0, 1, 0, 0, 0};
    assert_memory_equal(m, want, sizeof want);
    gp_kernel *r = leaf(GP_KERNEL_RQ, 0, NULL, 0);
    r->fixed = GP_FIX_ALPHA;
    unsigned char mr[3];
    gp_kernel_free_mask(r, mr);
    assert_true(mr[0] == 1 && mr[1] == 1 && mr[2] == 0);
    gp_kernel_free(r);
    gp_kernel_free(k);
}

static void test_param_names(void **state)
{
    (void)state;
    gp_kernel *k = nested_kernel();
    const char *want[9] = {
        "terms[0].terms[0].variance",       "terms[0].terms[0].lengthscale[0]",
        "terms[0].terms[0].lengthscale[1]", "terms[0].terms[0].lengthscale[2]",
        "terms[0].terms[1].variance",       "terms[0].terms[1].lengthscale",
        "terms[0].terms[1].period",         "terms[1].variance",
        "terms[1].lengthscale",
    };
    char buf[64];
    for (size_t i = 0; i < 9; i++) {
        gp_kernel_param_name(k, i, buf, sizeof buf);
        assert_string_equal(buf, want[i]);
    }
    gp_kernel_param_name(k, 9, buf, sizeof buf);
    assert_string_equal(buf, "");
    gp_kernel_param_name(k, 0, buf, 8); /* truncated, still terminated */
    assert_string_equal(buf, "terms[0");
    gp_kernel_param_name(k, 0, buf, 1);
    assert_string_equal(buf, "");
    gp_kernel_free(k);

    gp_kernel *r = leaf(GP_KERNEL_RQ, 0, NULL, 0);
    const char *rq_names[3] = {"variance", "lengthscale", "alpha"};
    for (size_t i = 0; i < 3; i++) {
        gp_kernel_param_name(r, i, buf, sizeof buf);
        assert_string_equal(buf, rq_names[i]);
    }
    gp_kernel_free(r);
    r = leaf(GP_KERNEL_WHITE, 1, NULL, 0);
    gp_kernel_param_name(r, 0, buf, sizeof buf);
    assert_string_equal(buf, "variance");
    gp_kernel_param_name(r, 1, buf, sizeof buf);
    assert_string_equal(buf, "");
    gp_kernel_free(r);
}

static void assert_same_kernel(const gp_kernel *a, const gp_kernel *b)
{
    assert_int_equal(a->type, b->type);
    assert_int_equal(a->input_dim, b->input_dim);
    assert_int_equal(a->n_active, b->n_active);
    assert_int_equal(a->active_dims == NULL, b->active_dims == NULL);
    if (a->active_dims)
        assert_memory_equal(a->active_dims, b->active_dims, a->n_active * sizeof(size_t));
    assert_int_equal(a->ard, b->ard);
    assert_int_equal(a->fixed, b->fixed);
    /* Bitwise, so -0.0 and NaN payloads would count too. */
    assert_memory_equal(&a->log_variance, &b->log_variance, sizeof(double));
    assert_memory_equal(&a->log_alpha, &b->log_alpha, sizeof(double));
    assert_memory_equal(&a->log_period, &b->log_period, sizeof(double));
    assert_int_equal(a->n_lengthscale, b->n_lengthscale);
    if (a->n_lengthscale)
        assert_memory_equal(a->log_lengthscale, b->log_lengthscale,
                            a->n_lengthscale * sizeof(double));
    assert_int_equal(a->n_terms, b->n_terms);
    for (size_t t = 0; t < a->n_terms; t++) {
        assert_true(a->terms[t] != b->terms[t]);
        assert_same_kernel(a->terms[t], b->terms[t]);
    }
}

static void test_copy(void **state)
{
    (void)state;
    gp_rng rng;
    gp_rng_seed(&rng, 14);
    gp_kernel *ks[MAX_KERNELS];
    size_t nk = make_kernels(ks, &rng);
    gp_error err;
    for (size_t i = 0; i < nk; i++) {
        gp_kernel *c = NULL;
        assert_int_equal(gp_kernel_copy(&c, ks[i], &err), GP_OK);
        assert_same_kernel(ks[i], c);
        /* Independent storage: changing the copy leaves the original alone. */
        double th[MAX_PARAMS], before[MAX_PARAMS];
        size_t np = gp_kernel_n_params(c);
        gp_kernel_get_params(ks[i], before);
        for (size_t p = 0; p < np; p++)
            th[p] = 3.0;
        gp_kernel_set_params(c, th);
        gp_kernel_get_params(ks[i], th);
        assert_memory_equal(th, before, np * sizeof *th);
        gp_kernel_free(c);
    }
    free_kernels(ks, nk);
}

/* ------------------------------------------------------------------------ */
/* encoding                                                                   */

static void roundtrip(const gp_kernel *k)
{
    size_t len = gp_kernel_encode(k, NULL);
    double *code = malloc(len * sizeof *code), *again = malloc(len * sizeof *again);
    assert_int_equal(gp_kernel_encode(k, code), len);
    gp_kernel *d = NULL;
    gp_error err;
    gp_error_clear(&err);
    assert_int_equal(gp_kernel_decode(code, len, &d, &err), GP_OK);
    assert_same_kernel(k, d);
    assert_int_equal(gp_kernel_encode(d, again), len);
    assert_memory_equal(code, again, len * sizeof *code);
    gp_kernel_free(d);
    free(code);
    free(again);
}

static void test_encode_roundtrip(void **state)
{
    (void)state;
    gp_rng rng;
    gp_rng_seed(&rng, 15);
    gp_kernel *ks[MAX_KERNELS];
    size_t nk = make_kernels(ks, &rng);
    for (size_t i = 0; i < nk; i++) {
        ks[i]->fixed = (unsigned)(i % 16);
        roundtrip(ks[i]);
    }
    /* Awkward values and fields the parameter vector does not cover. */
    gp_kernel *k = ks[nk - 2];
    k->log_variance = -0.0;
    k->log_alpha = 5e-324;
    k->log_period = -700.25;
    k->terms[0]->terms[0]->log_variance = 0.1 + 0.2;
    roundtrip(k);
    free_kernels(ks, nk);
}

/* sum(rbf ARD on dims {2, 0}, matern32), whose layout the corruption tests use:
 *   [0] magic [1] version [2] total length = 38
 *   root @3:  type 8, input_dim @4, n_active 0 @5, ard @6, fixed @7, log var/alpha/period @8-10,
 *             n_lengthscale 0 @11, n_terms 2 @12
 *   rbf @13:  type 0, input_dim @14, n_active 2 @15, dims @16 @17, ard 1 @18, fixed @19,
 *             log var/alpha/period @20-22, n_lengthscale 2 @23, @24 @25, n_terms 0 @26
 *   m32 @27:  type 2, input_dim @28, n_active 0 @29, ard 0 @30, fixed @31, @32-34,
 *             n_lengthscale 1 @35, @36, n_terms 0 @37 */
#define CODE_LEN 38

static void small_code(double *code)
{
    gp_kernel *k = comp(GP_KERNEL_SUM, 2, leaf(GP_KERNEL_RBF, 1, dims20, 2),
                        leaf(GP_KERNEL_MATERN32, 0, NULL, 0));
    k->terms[0]->log_lengthscale[1] = 0.25;
    k->terms[1]->log_lengthscale[0] = -0.5;
    assert_int_equal(gp_kernel_encode(k, NULL), CODE_LEN);
    assert_int_equal(gp_kernel_encode(k, code), CODE_LEN);
    assert_true(code[2] == CODE_LEN && code[3] == GP_KERNEL_SUM && code[13] == GP_KERNEL_RBF);
    assert_true(code[25] == 0.25 && code[27] == GP_KERNEL_MATERN32 && code[36] == -0.5);
    gp_kernel_free(k);
}

static int try_decode(const double *code, size_t len)
{
    gp_kernel *k = (gp_kernel *)code; /* anything non-NULL: decode must reset it */
    gp_error err;
    gp_error_clear(&err);
    int rc = gp_kernel_decode(code, len, &k, &err);
    if (rc == GP_OK) {
        assert_non_null(k);
        gp_kernel_free(k);
    } else {
        assert_null(k);
        assert_int_equal(err.code, rc);
        assert_true(strlen(err.message) > 0);
    }
    return rc;
}

static void expect_corrupt_at(size_t pos, double value)
{
    double code[CODE_LEN];
    small_code(code);
    code[pos] = value;
    if (try_decode(code, CODE_LEN) != GP_EDATA) {
        print_error("code[%zu] = %g was accepted\n", pos, value);
        fail();
    }
}

static void test_decode_rejects(void **state)
{
    (void)state;
    double code[CODE_LEN + 2];
    small_code(code);
    assert_int_equal(try_decode(code, CODE_LEN), GP_OK);
    /* Every truncation, with the declared length kept or shortened to match. */
    for (size_t len = 0; len < CODE_LEN; len++) {
        assert_int_equal(try_decode(len ? code : NULL, len), GP_EDATA);
        double cut[CODE_LEN];
        memcpy(cut, code, sizeof cut);
        cut[2] = (double)len;
        if (len >= 3)
            assert_int_equal(try_decode(cut, len), GP_EDATA);
    }
    /* A longer array is fine (the code knows its length); a longer declared
     * length with values past the tree is not. */
    code[CODE_LEN] = code[CODE_LEN + 1] = 0.0;
    assert_int_equal(try_decode(code, CODE_LEN + 2), GP_OK);
    code[2] = CODE_LEN + 2;
    assert_int_equal(try_decode(code, CODE_LEN + 2), GP_EDATA);

    const struct {
        size_t pos;
        double value;
    } bad[] = {
        {0, 0.0},       {1, 2.0},        {2, NAN},       {2, 1e300},     {2, 37.5},
        {3, 10.0},      {3, -1.0},       {3, 8.5},       {3, NAN},       {3, 0.0},
        {4, 4.0},       {4, 0.0},        {5, 1.0},       {6, 1.0},       {7, 16.0},
        {7, -1.0},      {11, 1.0},       {12, 0.0},      {12, 3.0},      {12, 1e300},
        {14, 0.0},      {14, 1e12},      {15, 1e9},      {15, 3.0},      {16, 3.0},
        {16, 1.5},      {17, 2.0},       {18, 0.0},      {18, 2.0},      {19, 0.5},
        {20, NAN},      {21, INFINITY},  {22, -INFINITY}, {23, 3.0},     {23, 1.0},
        {24, NAN},      {26, 1.0},       {28, 4.0},      {30, 1.0},      {35, 2.0},
        {36, INFINITY}, {37, 1.0},       {13, 8.0},      {27, 9.0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_corrupt_at(bad[i].pos, bad[i].value);
}

/* Whatever one value is replaced with, decoding fails cleanly or succeeds. */
static void test_decode_fuzz(void **state)
{
    (void)state;
    const double values[] = {NAN, -1.0, 0.0, 1.0, 2.0, 3.0, 7.0, 8.0, 9.0, 10.0, 0.5, 1e18, -0.0,
                             INFINITY, 38.0, 100.0};
    double code[CODE_LEN];
    for (size_t pos = 0; pos < CODE_LEN; pos++)
        for (size_t v = 0; v < sizeof values / sizeof values[0] + 1; v++) {
            small_code(code);
            code[pos] = v < sizeof values / sizeof values[0] ? values[v] : code[pos] + 1.0;
            int rc = try_decode(code, CODE_LEN);
            assert_true(rc == GP_OK || rc == GP_EDATA);
        }
}

/* Depth: a code nesting 40 one-term sums is refused (no stack exhaustion), and
 * so is building such a tree. */
static void test_depth_limit(void **state)
{
    (void)state;
    enum { DEPTH = 40 };
    double code[3 + DEPTH * 10 + 10];
    size_t n = 3;
    for (int d = 0; d < DEPTH; d++) {
        const double node[10] = {GP_KERNEL_SUM, 1, 0, 0, 0, 0, 0, 0, 0, 1};
        memcpy(code + n, node, sizeof node);
        n += 10;
    }
    const double white[10] = {GP_KERNEL_WHITE, 1, 0, 0, 0, 0, 0, 0, 0, 0};
    memcpy(code + n, white, sizeof white);
    n += 10;
    code[0] = 1196444494.0;
    code[1] = 1.0;
    code[2] = (double)n;
    assert_int_equal(try_decode(code, n), GP_EDATA);
    /* Shallow enough: the same shape with 3 sums decodes. */
    double small[3 + 40];
    memcpy(small + 3, code + 3, 30 * sizeof *code);
    memcpy(small + 33, white, sizeof white);
    small[0] = code[0];
    small[1] = code[1];
    small[2] = 43;
    assert_int_equal(try_decode(small, 43), GP_OK);

    gp_kernel *k = NULL, *t;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, GP_KERNEL_WHITE, 1, 0, NULL, 0, &err), GP_OK);
    int rc = GP_OK;
    for (int d = 0; d < DEPTH && rc == GP_OK; d++) {
        rc = gp_kernel_composite(&t, GP_KERNEL_SUM, &k, 1, &err);
        if (rc == GP_OK)
            k = t;
    }
    assert_int_equal(rc, GP_EINVAL);
    assert_string_equal(err.field, "terms");
    gp_kernel_free(k);
}

/* ------------------------------------------------------------------------ */
/* validation                                                                 */

static void test_type_names(void **state)
{
    (void)state;
    for (int t = 0; t < GP_KERNEL_TYPE_COUNT; t++)
        assert_int_equal(gp_kernel_type_from_name(gp_kernel_type_name((gp_kernel_type)t)), t);
    assert_string_equal(gp_kernel_type_name(GP_KERNEL_MATERN52), "matern52");
    assert_int_equal(gp_kernel_type_from_name("product"), GP_KERNEL_PRODUCT);
    assert_int_equal(gp_kernel_type_from_name("gaussian"), -1);
    assert_int_equal(gp_kernel_type_from_name(NULL), -1);
    assert_null(gp_kernel_type_name(GP_KERNEL_TYPE_COUNT));
}

static void expect_leaf_error(gp_kernel_type type, size_t input_dim, const size_t *dims, size_t n,
                              const char *field)
{
    gp_kernel *k = (gp_kernel *)&k;
    gp_error err;
    gp_error_clear(&err);
    assert_int_equal(gp_kernel_leaf(&k, type, input_dim, 1, dims, n, &err), GP_EINVAL);
    assert_null(k);
    assert_int_equal(err.code, GP_EINVAL);
    assert_string_equal(err.field, field);
    assert_true(strlen(err.message) > 0);
}

static void test_leaf_validation(void **state)
{
    (void)state;
    const size_t ok[] = {2, 0}, out_of_range[] = {0, 3}, repeated[] = {1, 0, 1};
    expect_leaf_error(GP_KERNEL_SUM, 3, NULL, 0, "type");
    expect_leaf_error(GP_KERNEL_PRODUCT, 3, NULL, 0, "type");
    expect_leaf_error(GP_KERNEL_TYPE_COUNT, 3, NULL, 0, "type");
    expect_leaf_error(GP_KERNEL_RBF, 0, NULL, 0, "input_dim");
    expect_leaf_error(GP_KERNEL_RBF, 3, out_of_range, 2, "active_dims");
    expect_leaf_error(GP_KERNEL_RBF, 3, repeated, 3, "active_dims");
    expect_leaf_error(GP_KERNEL_RBF, 3, NULL, 2, "active_dims");
    expect_leaf_error(GP_KERNEL_RBF, 1, ok, 2, "active_dims");

    gp_kernel *k;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, GP_KERNEL_RBF, 3, 1, ok, 2, &err), GP_OK);
    assert_int_equal(k->n_active, 2);
    assert_int_equal(k->n_lengthscale, 2);
    assert_true(k->active_dims != ok && k->active_dims[0] == 2 && k->active_dims[1] == 0);
    gp_kernel_free(k);
    const struct {
        gp_kernel_type type;
        int ard;
        size_t n_ls;
    } shapes[] = {
        {GP_KERNEL_RBF, 0, 1},      {GP_KERNEL_MATERN12, 1, 3}, {GP_KERNEL_MATERN32, 1, 3},
        {GP_KERNEL_MATERN52, 0, 1}, {GP_KERNEL_RQ, 1, 3},       {GP_KERNEL_PERIODIC, 1, 1},
        {GP_KERNEL_LINEAR, 1, 0},   {GP_KERNEL_WHITE, 1, 0},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        assert_int_equal(gp_kernel_leaf(&k, shapes[i].type, 3, shapes[i].ard, NULL, 0, &err),
                         GP_OK);
        assert_int_equal(k->n_lengthscale, shapes[i].n_ls);
        assert_int_equal(k->n_active, 3);
        assert_null(k->active_dims);
        assert_int_equal(gp_kernel_n_params(k), 1 + shapes[i].n_ls +
                                                    (shapes[i].type == GP_KERNEL_RQ) +
                                                    (shapes[i].type == GP_KERNEL_PERIODIC));
        assert_true(k->log_variance == 0.0 && k->log_alpha == 0.0 && k->log_period == 0.0);
        gp_kernel_free(k);
    }
}

static void expect_composite_error(gp_kernel_type type, gp_kernel **terms, size_t n,
                                   const char *field)
{
    gp_kernel *k = (gp_kernel *)&k;
    gp_error err;
    gp_error_clear(&err);
    assert_int_equal(gp_kernel_composite(&k, type, terms, n, &err), GP_EINVAL);
    assert_null(k);
    assert_string_equal(err.field, field);
    assert_true(strlen(err.message) > 0);
}

static void test_composite_validation(void **state)
{
    (void)state;
    gp_kernel *a = leaf(GP_KERNEL_RBF, 0, NULL, 0), *b = leaf(GP_KERNEL_LINEAR, 0, NULL, 0);
    gp_kernel *other = NULL;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&other, GP_KERNEL_RBF, 2, 0, NULL, 0, &err), GP_OK);
    gp_kernel *terms[3] = {a, b, other};
    expect_composite_error(GP_KERNEL_RBF, terms, 2, "type");
    expect_composite_error(GP_KERNEL_SUM, terms, 0, "terms");
    expect_composite_error(GP_KERNEL_SUM, NULL, 2, "terms");
    expect_composite_error(GP_KERNEL_PRODUCT, terms, 3, "terms");
    gp_kernel *dup[2] = {a, a}, *hole[2] = {a, NULL};
    expect_composite_error(GP_KERNEL_SUM, dup, 2, "terms");
    expect_composite_error(GP_KERNEL_SUM, hole, 2, "terms");
    /* The failures left the terms with the caller; a success takes them. */
    gp_kernel *k = NULL;
    assert_int_equal(gp_kernel_composite(&k, GP_KERNEL_PRODUCT, terms, 2, &err), GP_OK);
    terms[0] = terms[1] = NULL; /* the composite's own array is a copy */
    assert_int_equal(k->n_terms, 2);
    assert_true(k->terms[0] == a && k->terms[1] == b);
    assert_int_equal(k->input_dim, DIM);
    assert_int_equal(gp_kernel_n_params(k), 3);
    gp_kernel_free(k);
    gp_kernel_free(other);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_type_names),
        cmocka_unit_test(test_leaf_validation),
        cmocka_unit_test(test_composite_validation),
        cmocka_unit_test(test_params_roundtrip),
        cmocka_unit_test(test_free_mask),
        cmocka_unit_test(test_param_names),
        cmocka_unit_test(test_copy),
        cmocka_unit_test(test_encode_roundtrip),
        cmocka_unit_test(test_decode_rejects),
        cmocka_unit_test(test_decode_fuzz),
        cmocka_unit_test(test_depth_limit),
    };
    return cmocka_run_group_tests_name("kernel", tests, NULL, NULL);
}
