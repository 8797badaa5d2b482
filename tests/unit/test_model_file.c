/* The portable model file (api/model_file.c, api/model_file_read.c,
 * docs/design/model-file.md):
 * - every registered method, fitted with its quick preset as the contract
 *   test fits it, written to a file and read back: the arrays are the same
 *   bits, and the model imported from them predicts (mean, variance,
 *   covariance, quantiles) and samples bit for bit as the original;
 * - the container: 8-byte length, a header padded so the arrays are
 *   8-aligned, the arrays raw and tiling the rest;
 * - the refusals, one case each: a truncated file, a flipped byte, an
 *   altered file with its old checksum, a newer format version, a method
 *   this build lacks, a short array, overlapping / gapped / uncovering
 *   offsets, an absurd header length, a header that is not JSON, a foreign
 *   dtype, a non-finite value (checksum made right where it matters):
 *   GP_EDATA / GP_EUNSUPPORTED naming the field, nothing returned. */
#include "tests/unit/api_testutil.h"

#define N 40
#define D 2
#define M 7
#define S 4
#define MAX_OPTS 8

typedef struct problem {
    double X[N * D], y[N], Xs[M * D];
} problem;

static void make_problem(problem *p)
{
    gp_rng rng;
    gp_rng_seed(&rng, 2024);
    for (size_t i = 0; i < N * D; i++)
        p->X[i] = 4.0 * gp_rng_uniform(&rng) - 2.0;
    for (size_t i = 0; i < N; i++)
        p->y[i] = sin(2.0 * p->X[i]) + 0.5 * cos(p->X[N + i]) + 0.1 * gp_rng_normal(&rng);
    for (size_t i = 0; i < M * D; i++)
        p->Xs[i] = 3.0 * gp_rng_uniform(&rng) - 1.5;
}

/* m fitted with its quick preset on the problem (an rbf kernel). */
static gp_model *fit_quick(const gp_method *m, const problem *p)
{
    gp_option_value opts[MAX_OPTS];
    assert_true(m->n_quick <= MAX_OPTS);
    for (size_t i = 0; i < m->n_quick; i++)
        opts[i] = (gp_option_value){.name = m->quick[i].name, .number = m->quick[i].number};
    gp_error err;
    gp_kernel *k = NULL;
    assert_int_equal(gp_kernel_leaf(&k, GP_KERNEL_RBF, D, 1, NULL, 0, &err), GP_OK);
    gp_fit_request req;
    memset(&req, 0, sizeof req);
    req.X = p->X;
    req.y = p->y;
    req.n = N;
    req.d = D;
    req.kernel = k;
    req.standardize = 1;
    req.seed = 7;
    req.options = opts;
    req.n_options = m->n_quick;
    gp_model *model = NULL;
    int rc = gp_model_fit(m, &req, &model, &err);
    gp_kernel_free(k);
    if (rc != GP_OK)
        fail_msg("%s: fit failed: %s", m->name, err.message);
    return model;
}

typedef struct answers {
    double mean[M], var[M], cov[M * M], q[M * 3], draws[M * S];
} answers;

static void answer(const gp_model *model, const double *Xs, answers *a)
{
    static const double levels[3] = {0.1, 0.5, 0.9};
    memset(a, 0, sizeof *a);
    gp_predict_request pr = {.X = Xs, .m = M, .d = D, .include_noise = 1,
                             .full_covariance = 1, .quantiles = levels, .n_quantiles = 3};
    gp_prediction o = {.mean = a->mean, .variance = a->var, .covariance = a->cov,
                       .quantiles = a->q};
    gp_error err;
    if (gp_model_predict(model, &pr, &o, &err) != GP_OK)
        fail_msg("%s: predict failed: %s", model->method->name, err.message);
    gp_sample_request sr = {.X = Xs, .m = M, .d = D, .n_samples = S, .seed = 11};
    if (gp_model_sample(model, &sr, a->draws, &err) != GP_OK)
        fail_msg("%s: sample failed: %s", model->method->name, err.message);
}

/* A stored row of model as the fit route writes one. */
static void row_of(const gp_model *model, gp_model_meta *meta)
{
    memset(meta, 0, sizeof *meta);
    snprintf(meta->name, sizeof meta->name, "m_%s", model->method->name);
    meta->version = 3;
    snprintf(meta->method, sizeof meta->method, "%s", model->method->name);
    snprintf(meta->created_at, sizeof meta->created_at, "2026-11-29T00:00:00Z");
    char spec[160];
    snprintf(spec, sizeof spec,
             "{\"name\":\"%s\",\"method\":\"%s\",\"kernel\":{\"type\":\"rbf\"},\"seed\":7}",
             meta->name, meta->method);
    meta->spec = strdup(spec);
    meta->info = strdup("{\"noise_variance\":0.0123,\"outputs\":[\"y\"]}");
    meta->n_train = model->n_train;
    meta->input_dim = model->input_dim;
}

/* The file of model (b initialised by the caller). */
static void write_file(const gp_model *model, gp_buf *b)
{
    gp_model_meta meta;
    row_of(model, &meta);
    gp_state st;
    gp_state_init(&st);
    gp_error err;
    assert_int_equal(gp_model_export(model, &st, &err), GP_OK);
    gp_model_file_source src = {model->n_train, model->input_dim, 5};
    if (gp_model_file_write(&meta, &src, &st, b, &err) != GP_OK)
        fail_msg("%s: write failed: %s", model->method->name, err.message);
    gp_state_free(&st);
    gp_model_meta_free(&meta);
}

static void same_state(const char *name, const gp_state *a, const gp_state *b)
{
    assert_int_equal(a->count, b->count);
    for (size_t i = 0; i < a->count; i++) {
        const gp_named_array *x = &a->arrays[i], *y = &b->arrays[i];
        if (strcmp(x->name, y->name) || x->rows != y->rows || x->cols != y->cols ||
            (x->rows * x->cols > 0 && memcmp(x->data, y->data, x->rows * x->cols * sizeof(double))))
            fail_msg("%s: array %zu ('%s') differs after the file", name, i, x->name);
    }
}

static uint64_t u64_at(const char *p)
{
    uint64_t v = 0;
    for (int k = 0; k < 8; k++)
        v |= (uint64_t)(unsigned char)p[k] << (8 * k);
    return v;
}

/* The container's shape: a header length that ends inside the file and
 * leaves the arrays 8-aligned, a header that is JSON, and arrays that are
 * the state's bytes as they are in memory (little-endian hosts). */
static void same_layout(const char *name, const gp_buf *b)
{
    uint64_t n = u64_at(b->data);
    if (n + 8 > b->len || (8 + n) % 8 != 0)
        fail_msg("%s: header length %llu of a %zu-byte file", name, (unsigned long long)n,
                 b->len);
    json_error_t je;
    json_t *h = json_loadb(b->data + 8, (size_t)n, 0, &je);
    assert_true(json_is_object(h));
    assert_string_equal(json_string_value(json_object_get(json_object_get(h, "__metadata__"),
                                                          "format")),
                        "gpserve-model");
    json_decref(h);
}

static void test_roundtrip_every_method(void **state)
{
    (void)state;
    problem p;
    make_problem(&p);
    for (size_t k = 0; k < gp_method_count(); k++) {
        const gp_method *m = gp_method_at(k);
        gp_model *model = fit_quick(m, &p);
        gp_buf b;
        gp_buf_init(&b);
        write_file(model, &b);
        /* the names the model JSON holds, gathered in one block */
        assert_non_null(strstr(b.data + 8, "\\\"names\\\":{\\\"outputs\\\":[\\\"y\\\"]}"));
        assert_non_null(strstr(b.data + 8, "\\\"observations\\\":{\\\"seq\\\":5}"));
        same_layout(m->name, &b);
        gp_model_file f;
        gp_error err;
        if (gp_model_file_read(b.data, b.len, &f, &err) != GP_OK)
            fail_msg("%s: read failed: %s (field %s)", m->name, err.message, err.field);
        assert_ptr_equal(f.method, m);
        char want[GP_NAME_MAX + 1];
        snprintf(want, sizeof want, "m_%s", m->name);
        assert_string_equal(f.source_name, want);
        assert_int_equal(f.n_train, model->n_train);
        assert_int_equal(f.input_dim, model->input_dim);
        assert_int_equal(f.obs_seq, 5);
        assert_non_null(strstr(f.info, "\"outputs\":[\"y\"]"));
        gp_state st;
        gp_state_init(&st);
        assert_int_equal(gp_model_export(model, &st, &err), GP_OK);
        same_state(m->name, &st, &f.state);
        gp_state_free(&st);
        gp_model *back = NULL;
        if (gp_model_import(f.method, &f.state, &back, &err) != GP_OK)
            fail_msg("%s: import of the file's arrays failed: %s", m->name, err.message);
        answers a, c;
        answer(model, p.Xs, &a);
        answer(back, p.Xs, &c);
        if (memcmp(&a, &c, sizeof a) != 0)
            fail_msg("%s: predictions or samples differ after the file", m->name);
        gp_model_free(back);
        gp_model_file_free(&f);
        gp_buf_free(&b);
        gp_model_free(model);
    }
}

/* ---- refusals ---- */

/* The file of an exact model fitted once for the refusal cases. */
static gp_buf exact_file;

static int setup_exact(void **state)
{
    (void)state;
    problem p;
    make_problem(&p);
    gp_model *model = fit_quick(gp_method_find("exact"), &p);
    gp_buf_init(&exact_file);
    write_file(model, &exact_file);
    gp_model_free(model);
    return 0;
}

static int teardown_exact(void **state)
{
    (void)state;
    gp_buf_free(&exact_file);
    return 0;
}

static char *copy_file(size_t *len)
{
    char *t = malloc(exact_file.len + 1);
    assert_non_null(t);
    memcpy(t, exact_file.data, exact_file.len + 1);
    *len = exact_file.len;
    return t;
}

/* Replace the first `from` by `to` (same length) in t. */
static void edit(char *t, const char *from, const char *to)
{
    char *at = strstr(t, from);
    assert_non_null(at);
    assert_int_equal(strlen(from), strlen(to));
    memcpy(at, to, strlen(to));
}

/* Rebuild a file from a header object and the data bytes, its checksum
 * made right (the writer's rule: the hash of the file with the value's 64
 * hex digits read as '0's). */
static char *rebuild(json_t *h, const char *data, size_t dlen, size_t *len)
{
    json_t *meta = json_object_get(h, "__metadata__");
    json_object_set_new(meta, "sha256", json_string("0000000000000000000000000000000000000000000000000000000000000000"));
    char *text = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER);
    assert_non_null(text);
    size_t n = strlen(text);
    *len = 8 + n + dlen;
    char *t = malloc(*len + 1);
    assert_non_null(t);
    for (int k = 0; k < 8; k++)
        t[k] = (char)((uint64_t)n >> (8 * k));
    memcpy(t + 8, text, n);
    if (dlen)
        memcpy(t + 8 + n, data, dlen);
    t[*len] = '\0';
    free(text);
    char *zeros = strstr(t + 8, "\"sha256\":\"0000");
    assert_non_null(zeros);
    gp_sha256 sh;
    gp_sha256_init(&sh);
    gp_sha256_update(&sh, t, *len);
    char hex[65];
    gp_sha256_hex(&sh, hex);
    memcpy(zeros + 10, hex, 64);
    return t;
}

/* The exact file's header, parsed (the caller edits and rebuilds it). */
static json_t *exact_header(const char **data, size_t *dlen)
{
    uint64_t n = u64_at(exact_file.data);
    json_error_t je;
    json_t *h = json_loadb(exact_file.data + 8, (size_t)n, JSON_PRESERVE_ORDER, &je);
    assert_true(json_is_object(h));
    *data = exact_file.data + 8 + n;
    *dlen = exact_file.len - 8 - (size_t)n;
    return h;
}

/* The __metadata__.model text of h, edited: from -> to. */
static void edit_model(json_t *h, const char *from, const char *to)
{
    json_t *meta = json_object_get(h, "__metadata__");
    const char *text = json_string_value(json_object_get(meta, "model"));
    const char *at = strstr(text, from);
    assert_non_null(at);
    size_t a = (size_t)(at - text), fl = strlen(from), tl = strlen(to), n = strlen(text);
    char *out = malloc(n - fl + tl + 1);
    memcpy(out, text, a);
    memcpy(out + a, to, tl);
    memcpy(out + a + tl, at + fl, n - a - fl + 1);
    json_object_set_new(meta, "model", json_string(out));
    free(out);
}

static void refused(const char *t, size_t len, int code, const char *field)
{
    gp_model_file f;
    gp_error err;
    gp_error_clear(&err);
    int rc = gp_model_file_read(t, len, &f, &err);
    if (rc != code || strcmp(err.field, field) != 0)
        fail_msg("expected %s naming '%s', got %s naming '%s': %s", gp_status_name(code), field,
                 gp_status_name(rc), err.field, err.message);
    assert_null(f.spec);
    assert_int_equal(f.state.count, 0);
}

/* Rebuild h over data and expect the refusal. */
static void refused_header(json_t *h, const char *data, size_t dlen, int code,
                           const char *field)
{
    size_t len;
    char *t = rebuild(h, data, dlen, &len);
    refused(t, len, code, field);
    free(t);
    json_decref(h);
}

static void test_intact_file_reads(void **state)
{
    (void)state;
    gp_model_file f;
    gp_error err;
    assert_int_equal(gp_model_file_read(exact_file.data, exact_file.len, &f, &err), GP_OK);
    gp_model_file_free(&f);
    /* the test's own rebuild of the untouched header reads too: the cases
     * below fail for their edit, not for the rebuild */
    const char *data;
    size_t dlen, len;
    json_t *h = exact_header(&data, &dlen);
    char *t = rebuild(h, data, dlen, &len);
    assert_int_equal(gp_model_file_read(t, len, &f, &err), GP_OK);
    gp_model_file_free(&f);
    free(t);
    json_decref(h);
}

static void test_truncated(void **state)
{
    (void)state;
    size_t len;
    char *t = copy_file(&len);
    refused(t, len / 2, GP_EDATA, "body"); /* inside the arrays */
    refused(t, len - 3, GP_EDATA, "body"); /* only the last array's end cut */
    refused(t, 20, GP_EDATA, "body");      /* inside the header */
    refused(t, 5, GP_EDATA, "body");       /* inside the header length */
    refused(t, 0, GP_EDATA, "body");
    free(t);
}

static void test_flipped_byte(void **state)
{
    (void)state;
    size_t len;
    char *t = copy_file(&len);
    t[len - 20] ^= 0x10; /* inside the last array */
    refused(t, len, GP_EDATA, "sha256");
    free(t);
}

static void test_checksum_mismatch(void **state)
{
    (void)state;
    size_t len;
    char *t = copy_file(&len);
    edit(t + 8, "\\\"seed\\\":7", "\\\"seed\\\":8"); /* an edited fit request, the old checksum */
    refused(t, len, GP_EDATA, "sha256");
    free(t);
}

static void test_newer_format(void **state)
{
    (void)state;
    const char *data;
    size_t dlen;
    json_t *h = exact_header(&data, &dlen);
    json_object_set_new(json_object_get(h, "__metadata__"), "format_version", json_string("2"));
    refused_header(h, data, dlen, GP_EDATA, "format_version");
}

static void test_not_a_model_file(void **state)
{
    (void)state;
    const char *data;
    size_t dlen;
    json_t *h = exact_header(&data, &dlen);
    json_object_del(json_object_get(h, "__metadata__"), "format");
    refused_header(h, data, dlen, GP_EDATA, "format");
    h = exact_header(&data, &dlen);
    json_object_set_new(json_object_get(h, "__metadata__"), "model", json_string("{\"method\""));
    refused_header(h, data, dlen, GP_EDATA, "model");
}

static void test_unknown_method(void **state)
{
    (void)state;
    const char *data;
    size_t dlen;
    json_t *h = exact_header(&data, &dlen);
    edit_model(h, "\"method\":\"exact\"", "\"method\":\"exakt\"");
    refused_header(h, data, dlen, GP_EUNSUPPORTED, "method");
}

static void test_short_array(void **state)
{
    (void)state;
    const char *data;
    size_t dlen;
    json_t *h = exact_header(&data, &dlen);
    /* one more row than its bytes hold */
    json_t *shape = json_object_get(json_object_get(h, "kernel"), "shape");
    json_array_set_new(shape, 1, json_integer(json_integer_value(json_array_get(shape, 1)) + 1));
    refused_header(h, data, dlen, GP_EDATA, "kernel.data_offsets");
    h = exact_header(&data, &dlen);
    json_object_set_new(json_object_get(h, "kernel"), "dtype", json_string("F32"));
    refused_header(h, data, dlen, GP_EDATA, "kernel.dtype");
}

/* Offsets that overlap, leave a gap, leave bytes no array owns, or are
 * impossible. */
static void test_bad_offsets(void **state)
{
    (void)state;
    const char *data;
    size_t dlen;
    json_t *h = exact_header(&data, &dlen);
    json_t *off = json_object_get(json_object_get(h, "format_version"), "data_offsets");
    json_int_t b = json_integer_value(json_array_get(off, 0));
    json_array_set_new(off, 0, json_integer(b - 8)); /* over the end of "kernel" */
    json_array_set_new(off, 1, json_integer(b));
    refused_header(h, data, dlen, GP_EDATA, "format_version.data_offsets");
    h = exact_header(&data, &dlen);
    off = json_object_get(json_object_get(h, "kernel"), "data_offsets");
    json_int_t e = json_integer_value(json_array_get(off, 1));
    json_array_set_new(off, 0, json_integer(8)); /* begins after a gap */
    json_array_set_new(off, 1, json_integer(8 + e));
    refused_header(h, data, dlen, GP_EDATA, "kernel.data_offsets");
    h = exact_header(&data, &dlen);
    off = json_object_get(json_object_get(h, "kernel"), "data_offsets");
    json_array_set_new(off, 0, json_integer(64)); /* begin > end */
    json_array_set_new(off, 1, json_integer(0));
    refused_header(h, data, dlen, GP_EDATA, "kernel.data_offsets");
    h = exact_header(&data, &dlen);
    json_object_del(h, "max_train_points"); /* the last array's bytes owned by none */
    refused_header(h, data, dlen, GP_EDATA, "data_offsets");
}

static void test_absurd_header(void **state)
{
    (void)state;
    size_t len;
    char *t = copy_file(&len);
    t[6] = 1; /* 2^48 + n bytes of header */
    refused(t, len, GP_EDATA, "header_length");
    free(t);
    t = copy_file(&len);
    uint64_t n = (uint64_t)len; /* plausible, but past the end */
    for (int k = 0; k < 8; k++)
        t[k] = (char)(n >> (8 * k));
    refused(t, len, GP_EDATA, "body");
    free(t);
    t = copy_file(&len);
    t[8] = '['; /* not a JSON object */
    refused(t, len, GP_EDATA, "header");
    free(t);
}

static void test_non_finite(void **state)
{
    (void)state;
    const char *data;
    size_t dlen;
    json_t *h = exact_header(&data, &dlen);
    char *d = malloc(dlen);
    memcpy(d, data, dlen);
    double nan = NAN;
    memcpy(d + dlen - 8, &nan, 8); /* max_train_points, the last array */
    size_t len;
    char *t = rebuild(h, d, dlen, &len);
    refused(t, len, GP_EDATA, "state.max_train_points[0]");
    free(t);
    free(d);
    json_decref(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_every_method),
        cmocka_unit_test_setup_teardown(test_intact_file_reads, setup_exact, teardown_exact),
        cmocka_unit_test_setup_teardown(test_truncated, setup_exact, teardown_exact),
        cmocka_unit_test_setup_teardown(test_flipped_byte, setup_exact, teardown_exact),
        cmocka_unit_test_setup_teardown(test_checksum_mismatch, setup_exact, teardown_exact),
        cmocka_unit_test_setup_teardown(test_newer_format, setup_exact, teardown_exact),
        cmocka_unit_test_setup_teardown(test_not_a_model_file, setup_exact, teardown_exact),
        cmocka_unit_test_setup_teardown(test_unknown_method, setup_exact, teardown_exact),
        cmocka_unit_test_setup_teardown(test_short_array, setup_exact, teardown_exact),
        cmocka_unit_test_setup_teardown(test_bad_offsets, setup_exact, teardown_exact),
        cmocka_unit_test_setup_teardown(test_absurd_header, setup_exact, teardown_exact),
        cmocka_unit_test_setup_teardown(test_non_finite, setup_exact, teardown_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
