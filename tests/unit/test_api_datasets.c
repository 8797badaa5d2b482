/* Unit tests of data sets through the api: an upload fed in pieces of every
 * size ends as the CSV it was (the reader's rows bit for bit against the
 * file's numbers, parsed here with strtod), shards that add up to the whole,
 * a seeded subsample, the columns chosen and the target; a reader's lease
 * that holds a DELETE off (409 naming it); refusals (the quota 507 naming
 * its flag, a bad row, both leaving nothing); and the fits that name a data
 * set: the refusals of their "data" field, and of a method that needs its
 * rows in memory. */
#include "tests/unit/api_testutil.h"

#include <sqlite3.h>

#include "api/dataset_rows.h"
#include "core/model/rows_sync.h"

static gp_api *api;
static char dir[64], db[128];

/* 10000 rows of a, b, c, y: numbers with every digit (no two alike). */
#define ROWS 10000
#define COLS 4
static char *csv;
static size_t csv_len;
static double *cells; /* ROWS x COLS row-major, the file's numbers by strtod */

static void make_csv(void)
{
    size_t cap = (size_t)ROWS * COLS * 32 + 64;
    csv = malloc(cap);
    cells = malloc((size_t)ROWS * COLS * sizeof *cells);
    assert_non_null(csv);
    assert_non_null(cells);
    csv_len = (size_t)snprintf(csv, cap, "a,b,\"c\",y\r\n");
    gp_rng rng;
    gp_rng_seed(&rng, 42);
    for (size_t i = 0; i < ROWS; i++)
        for (size_t j = 0; j < COLS; j++) {
            char cell[32];
            snprintf(cell, sizeof cell, "%.17g", (gp_rng_uniform(&rng) - 0.3) * 1e3);
            cells[i * COLS + j] = strtod(cell, NULL);
            csv_len += (size_t)snprintf(csv + csv_len, cap - csv_len, "%s%s", cell,
                                        j + 1 < COLS ? "," : "\r\n");
        }
}

static int setup(void **state)
{
    (void)state;
    tmp_db(dir, sizeof dir, db, sizeof db);
    gp_api_config cfg;
    gp_api_default_config(&cfg);
    cfg.db_path = db;
    gp_error err;
    if (gp_api_open(&cfg, &api, &err) != GP_OK)
        return -1;
    make_csv();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    gp_api_close(api);
    rm_tree(dir);
    free(csv);
    free(cells);
    return 0;
}

/* PUT body (len bytes) as name, fed in pieces of `piece` bytes. */
static void upload(gp_api *a, const char *name, const char *ctype, const char *body, size_t len,
                   size_t piece, gp_response *res)
{
    memset(res, 0, sizeof *res);
    gp_request req = make_req(ctype, NULL, NULL, 0);
    gp_dataset_upload *up = NULL;
    if (gp_api_dataset_upload_begin(a, name, &req, &up, res) != GP_OK)
        return;
    for (size_t at = 0; at < len; at += piece)
        if (gp_api_dataset_upload_feed(up, body + at, len - at < piece ? len - at : piece, res)) {
            gp_api_dataset_upload_abort(up);
            return;
        }
    gp_api_dataset_upload_finish(up, res);
}

static long long count_rows(const char *sql)
{
    sqlite3 *h = NULL;
    assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    long long v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(h);
    return v;
}

/* What a reader delivered, row by row, against the file's cells. */
typedef struct check_ctx {
    const size_t *rows; /* the data set's row of each sequence row (NULL: the same) */
    size_t first;
    const size_t *cols; /* the file's column of each input */
    size_t d, target, seen;
} check_ctx;

static int check_chunk(void *vctx, size_t i, size_t count, const double *X, const double *y,
                       gp_error *err)
{
    (void)err;
    check_ctx *c = vctx;
    assert_int_equal(i, c->seen);
    for (size_t k = 0; k < count; k++) {
        size_t g = c->first + i + k, r = c->rows ? c->rows[g] : g;
        for (size_t j = 0; j < c->d; j++)
            assert_memory_equal(&X[k + j * count], &cells[r * COLS + c->cols[j]], sizeof(double));
        assert_memory_equal(&y[k], &cells[r * COLS + c->target], sizeof(double));
    }
    c->seen += count;
    return GP_OK;
}

/* Every chunk of a shard through fn, as a fit's pass reads them (alone: the
 * sum is the identity). */
static int each_chunk(const gp_rows *rows, gp_rows_chunk_fn fn, void *ctx, gp_error *err)
{
    gp_rows_sync s;
    double slots[GP_ROWS_SYNC_SLOTS];
    int rc = gp_rows_sync_init(&s, rows, NULL, err);
    if (rc == GP_OK) {
        gp_rows_sync_each_chunk(&s, fn, ctx);
        rc = gp_rows_sync_sum(&s, slots, 0, err);
    }
    gp_rows_sync_free(&s);
    return rc;
}

static void test_upload_then_read_every_row(void **state)
{
    (void)state;
    gp_response res;
    upload(api, "tbl", "text/csv; charset=utf-8", csv, csv_len, 7777, &res);
    expect_status(&res, 201);
    json_t *j = res_json(&res);
    assert_int_equal(json_integer_value(json_object_get(j, "rows")), ROWS);
    assert_int_equal(json_array_size(json_object_get(j, "columns")), COLS);
    assert_int_equal(json_integer_value(json_object_get(j, "bytes_received")), csv_len);
    json_decref(j);
    gp_response_free(&res);
    /* every row, inputs c and a, target b */
    const char *const names[] = {"c", "a"};
    gp_dataset_ref ref = {.name = "tbl", .target = "b", .columns = names, .n_columns = 2};
    gp_dataset_rows *r = NULL;
    gp_error err;
    assert_int_equal(gp_dataset_rows_open(api->store, &ref, 0, SIZE_MAX, "test", &r, &err),
                     GP_OK);
    gp_rows *rows = gp_dataset_rows_get(r);
    assert_int_equal(rows->n, ROWS);
    assert_int_equal(rows->n_total, ROWS);
    assert_int_equal(rows->d, 2);
    assert_int_equal(rows->chunk, GP_ROWS_DEFAULT_CHUNK);
    const size_t cols[] = {2, 0};
    check_ctx c = {NULL, 0, cols, 2, 1, 0};
    assert_int_equal(each_chunk(rows, check_chunk, &c, &err), GP_OK);
    assert_int_equal(c.seen, ROWS);
    gp_dataset_rows_close(r);
    /* three shards of fixed boundaries add up to the whole */
    const size_t bounds[] = {0, 3333, 7001, ROWS};
    for (int s = 0; s < 3; s++) {
        assert_int_equal(gp_dataset_rows_open(api->store, &ref, bounds[s],
                                              bounds[s + 1] - bounds[s], "shard", &r, &err),
                         GP_OK);
        rows = gp_dataset_rows_get(r);
        assert_int_equal(rows->first, bounds[s]);
        check_ctx cs = {NULL, bounds[s], cols, 2, 1, 0};
        assert_int_equal(each_chunk(rows, check_chunk, &cs, &err), GP_OK);
        assert_int_equal(cs.seen, bounds[s + 1] - bounds[s]);
        gp_dataset_rows_close(r);
    }
    assert_int_equal(gp_dataset_rows_open(api->store, &ref, 5, ROWS, "x", &r, &err), GP_EINVAL);
}

/* A seeded subsample: the rows gp_rows_sample_indices names, in order. */
static void test_read_subsample(void **state)
{
    (void)state;
    gp_dataset_ref ref = {.name = "tbl", .target = "y", .sample = 1500, .seed = 9};
    gp_dataset_rows *r = NULL;
    gp_error err;
    assert_int_equal(gp_dataset_rows_open(api->store, &ref, 0, SIZE_MAX, "s", &r, &err), GP_OK);
    gp_rows *rows = gp_dataset_rows_get(r);
    assert_int_equal(rows->n_total, 1500);
    assert_int_equal(rows->d, 3);
    size_t *idx = malloc(1500 * sizeof *idx);
    assert_int_equal(gp_rows_sample_indices(ROWS, 1500, 9, idx, &err), GP_OK);
    const size_t cols[] = {0, 1, 2};
    check_ctx c = {idx, 0, cols, 3, 3, 0};
    assert_int_equal(each_chunk(rows, check_chunk, &c, &err), GP_OK);
    assert_int_equal(c.seen, 1500);
    gp_dataset_rows_close(r);
    /* a shard of the subsample */
    assert_int_equal(gp_dataset_rows_open(api->store, &ref, 700, 800, "s", &r, &err), GP_OK);
    check_ctx cs = {idx, 700, cols, 3, 3, 0};
    assert_int_equal(each_chunk(gp_dataset_rows_get(r), check_chunk, &cs, &err), GP_OK);
    assert_int_equal(cs.seen, 800);
    gp_dataset_rows_close(r);
    free(idx);
    /* a sample of more rows than there are: every row */
    ref.sample = ROWS + 5;
    gp_dataset_resolved res;
    assert_int_equal(gp_dataset_resolve(api->store, &ref, &res, &err), GP_OK);
    assert_int_equal(res.n, ROWS);
}

static void test_reference_refusals(void **state)
{
    (void)state;
    gp_dataset_resolved res;
    gp_error err;
    gp_dataset_ref ref = {.name = "nothing", .target = "y"};
    assert_int_equal(gp_dataset_resolve(api->store, &ref, &res, &err), GP_ENOTFOUND);
    assert_string_equal(err.field, "data.dataset");
    ref.name = "tbl";
    ref.target = "z";
    assert_int_equal(gp_dataset_resolve(api->store, &ref, &res, &err), GP_EDATA);
    assert_string_equal(err.field, "data.target");
    assert_non_null(strstr(err.message, "its columns: a, b, c, y"));
    const char *const bad[] = {"a", "q"};
    ref.target = "y";
    ref.columns = bad;
    ref.n_columns = 2;
    assert_int_equal(gp_dataset_resolve(api->store, &ref, &res, &err), GP_EDATA);
    assert_string_equal(err.field, "data.columns[1]");
    const char *const twice[] = {"a", "a"};
    ref.columns = twice;
    assert_int_equal(gp_dataset_resolve(api->store, &ref, &res, &err), GP_EINVAL);
    assert_string_equal(err.field, "data.columns[1]");
    const char *const target[] = {"y"};
    ref.columns = target;
    ref.n_columns = 1;
    assert_int_equal(gp_dataset_resolve(api->store, &ref, &res, &err), GP_EDATA);
    assert_string_equal(err.field, "data.columns[0]");
    /* a pinned id of another data set, or of none */
    ref.columns = NULL;
    ref.n_columns = 0;
    assert_int_equal(gp_dataset_resolve(api->store, &ref, &res, &err), GP_OK);
    ref.id = res.id + 1000;
    assert_int_equal(gp_dataset_resolve(api->store, &ref, &res, &err), GP_ENOTFOUND);
    assert_string_equal(err.field, "data.dataset");
}

/* An open reader holds the data set: DELETE is 409 naming it; closed, 204. */
static void test_reader_lease_holds_delete(void **state)
{
    (void)state;
    gp_response res;
    upload(api, "held", "text/csv", "x,y\n1,2\n3,4\n", 12, 5, &res);
    expect_status(&res, 201);
    gp_response_free(&res);
    gp_dataset_ref ref = {.name = "held", .target = "y"};
    gp_dataset_rows *r = NULL;
    gp_error err;
    assert_int_equal(gp_dataset_rows_open(api->store, &ref, 0, SIZE_MAX, "a fit of model 'm'", &r,
                                          &err),
                     GP_OK);
    gp_request req = make_req(NULL, NULL, NULL, 0);
    memset(&res, 0, sizeof res);
    gp_api_delete_dataset(api, "held", &req, &res);
    expect_error(&res, 409, "conflict", "name");
    assert_non_null(strstr(res.body, "a fit of model 'm'"));
    gp_response_free(&res);
    /* a replace is refused too, before its body */
    upload(api, "held", "text/csv", "x,y\n5,6\n", 8, 8, &res);
    expect_error(&res, 409, "conflict", "name");
    gp_response_free(&res);
    gp_dataset_rows_close(r);
    memset(&res, 0, sizeof res);
    gp_api_delete_dataset(api, "held", &req, &res);
    expect_status(&res, 204);
    gp_response_free(&res);
}

/* Refused uploads keep nothing: a bad cell, the quota (507 naming its flag). */
static void test_refused_uploads_keep_nothing(void **state)
{
    (void)state;
    long long before = count_rows("SELECT count(*) FROM dataset_parts");
    char *bad = malloc(csv_len + 32);
    memcpy(bad, csv, csv_len);
    memcpy(bad + csv_len, "1,2,x,4\n", 9);
    gp_response res;
    upload(api, "bad", "text/csv", bad, csv_len + 8, 4096, &res);
    expect_error(&res, 422, "invalid_data", "rows[10000].c");
    assert_non_null(strstr(res.body, "row 10001 (line 10002), column 'c'"));
    gp_response_free(&res);
    free(bad);
    assert_int_equal(count_rows("SELECT count(*) FROM dataset_parts"), before);
    assert_int_equal(count_rows("SELECT count(*) FROM datasets WHERE name = 'bad'"), 0);
    /* a quota below what the data sets hold */
    gp_api_config cfg;
    gp_api_default_config(&cfg);
    cfg.db_path = db;
    cfg.dataset_quota_bytes = (uint64_t)ROWS * COLS * 8 + 100;
    gp_api *small = NULL;
    gp_error err;
    assert_int_equal(gp_api_open(&cfg, &small, &err), GP_OK);
    upload(small, "more", "text/csv", csv, csv_len, 65536, &res);
    expect_error(&res, 507, "insufficient_storage", "dataset");
    assert_non_null(strstr(res.body, "--dataset-quota-mb"));
    gp_response_free(&res);
    assert_int_equal(count_rows("SELECT count(*) FROM dataset_parts"), before);
    upload(small, "more", "application/x-ndjson", "{\"x\": 1}\n", 9, 9, &res);
    expect_status(&res, 201); /* 8 bytes fit */
    gp_response_free(&res);
    upload(small, "more", "application/json", "{}", 2, 2, &res);
    expect_error(&res, 415, "unsupported_media_type", "");
    gp_response_free(&res);
    gp_api_close(small);
}

static void fit_expect(const char *body, int status, const char *code, const char *field)
{
    gp_response res;
    fit_json(api, body, &res);
    expect_error(&res, status, code, field);
    gp_response_free(&res);
}

/* A fit's "data": its refusals; every method that reads its rows in memory
 * (every one of this build until the streaming ones land) is refused 422
 * naming data.dataset, and nothing is stored. */
static void test_fit_data_refusals(void **state)
{
    (void)state;
    fit_expect("{\"name\":\"f\",\"data\":{\"dataset\":\"nothing\",\"target\":\"y\"}}", 404,
               "not_found", "data.dataset");
    fit_expect("{\"name\":\"f\",\"data\":{\"dataset\":\"tbl\",\"target\":\"q\"}}", 422,
               "invalid_data", "data.target");
    fit_expect("{\"name\":\"f\",\"data\":{\"dataset\":\"tbl\",\"target\":\"y\",\"columns\":"
               "[\"a\",\"nope\"]}}",
               422, "invalid_data", "data.columns[1]");
    fit_expect("{\"name\":\"f\",\"X\":[[1]],\"y\":[1],\"data\":{\"dataset\":\"tbl\",\"target\":"
               "\"y\"}}",
               400, "invalid_argument", "data");
    fit_expect("{\"name\":\"f\",\"data\":{\"dataset\":\"tbl\"}}", 400, "invalid_argument",
               "data.target");
    fit_expect("{\"name\":\"f\",\"data\":{\"dataset\":\"tbl\",\"target\":\"y\",\"rows\":"
               "{\"sample\":0}}}",
               400, "invalid_argument", "data.rows.sample");
    fit_expect("{\"name\":\"f\",\"data\":{\"dataset\":\"tbl\",\"target\":\"y\",\"rows\":"
               "{\"seed\":1}}}",
               400, "invalid_argument", "data.rows.sample");
    fit_expect("{\"name\":\"f\",\"data\":{\"dataset\":\"tbl\",\"target\":\"y\",\"x\":1}}", 400,
               "invalid_argument", "data.x");
    fit_expect("{\"name\":\"f\",\"dataset_id\":1,\"data\":{\"dataset\":\"tbl\",\"target\":"
               "\"y\"}}",
               400, "invalid_argument", "dataset_id");
    fit_expect("{\"name\":\"f\",\"likelihood\":\"bernoulli\",\"method\":\"svgp\",\"data\":"
               "{\"dataset\":\"tbl\",\"target\":\"y\"}}",
               422, "unsupported", "likelihood");
    for (size_t i = 0; i < gp_method_count(); i++) {
        const gp_method *m = gp_method_at(i);
        if (m->streams_rows)
            continue;
        char body[256];
        snprintf(body, sizeof body,
                 "{\"name\":\"f\",\"method\":\"%s\",\"data\":{\"dataset\":\"tbl\",\"target\":"
                 "\"y\",\"rows\":{\"sample\":50,\"seed\":1}}}",
                 m->name);
        fit_expect(body, 422, "unsupported", "data.dataset");
    }
    assert_int_equal(count_rows("SELECT count(*) FROM models"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_upload_then_read_every_row),
        cmocka_unit_test(test_read_subsample),
        cmocka_unit_test(test_reference_refusals),
        cmocka_unit_test(test_reader_lease_holds_delete),
        cmocka_unit_test(test_refused_uploads_keep_nothing),
        cmocka_unit_test(test_fit_data_refusals),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
