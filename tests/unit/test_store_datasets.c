/* Unit tests for the store's data sets (store.h, "data sets"): an upload's
 * parts invisible until its finish, the finish that replaces a ready data
 * set of the name, an abort and the prune of abandoned uploads leaving
 * nothing, the quota, parts out of order, rows read back bit for bit across
 * part boundaries, the users (a queued job, a reader lease) that hold a
 * data set against delete and replace, and the migration of a version 7
 * database.
 *
 * Runs on SQLite files and again on PostgreSQL when GPSERVE_TEST_PG_URL names
 * a server (store_fixture.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/store.h"
#include "store/store_internal.h"
#include "tests/unit/store_model_fixture.h"

#define PR GP_STORE_DATASET_PART_ROWS

/* The value of cell (row, col) of the test data sets: exact, distinct. */
static double cell(uint64_t row, size_t col, double salt)
{
    return (double)row * 8.0 + (double)col + salt;
}

/* Rows [first, first + rows) of a cols-wide data set, column-major. */
static double *block(uint64_t first, size_t rows, size_t cols, double salt)
{
    double *b = malloc(rows * cols * sizeof *b);
    assert_non_null(b);
    for (size_t j = 0; j < cols; j++)
        for (size_t i = 0; i < rows; i++)
            b[i + j * rows] = cell(first + i, j, salt);
    return b;
}

static double wall(void)
{
    return (double)time(NULL);
}

/* An upload of n rows x cols of name, parts of PR rows, left unfinished. */
static int64_t upload(gp_store *s, const char *name, uint64_t n, size_t cols, double salt)
{
    gp_error err;
    int64_t id = 0;
    assert_int_equal(gp_store_dataset_begin(s, name, cols, "[\"pending\"]", "alice", wall(), &id,
                                            &err),
                     GP_OK);
    assert_true(id > 0);
    for (uint64_t p = 0; p * PR < n; p++) {
        size_t rows = n - p * PR < PR ? (size_t)(n - p * PR) : PR;
        double *b = block(p * PR, rows, cols, salt);
        if (gp_store_dataset_put_part(s, id, p, rows, cols, b, 0, wall(), &err))
            fail_msg("put_part %llu: %s", (unsigned long long)p, err.message);
        free(b);
    }
    return id;
}

static int finish(gp_store *s, int64_t id, uint64_t n, const char *columns, int *replaced,
                  gp_dataset_row *row, gp_error *err)
{
    gp_dataset_done d = {n, columns, "ab12", 1234};
    return gp_store_dataset_finish(s, id, &d, wall(), NULL, replaced, row, err);
}

static long long parts_of(const char *path, int64_t id)
{
    return sf_raw_intf(path, "SELECT count(*) FROM dataset_parts WHERE dataset_id = %lld",
                       (long long)id);
}

/* An upload is seen by nobody until its finish; then its row and rows read
 * back bit for bit, any range across the parts, any columns. */
static void test_dataset_upload_and_read(void **state)
{
    (void)state;
    char path[512];
    sf_db_path(path, sizeof path, "ds_read.db");
    gp_store *s = sf_open_store("ds_read.db");
    gp_error err;
    const uint64_t n = 2 * PR + 100;
    int64_t id = upload(s, "iris", n, 3, 0.25);
    gp_dataset_row row;
    assert_int_equal(gp_store_dataset_get(s, "iris", &row, &err), GP_ENOTFOUND);
    assert_string_equal(err.field, "name");
    assert_int_equal(gp_store_dataset_get_id(s, id, &row, &err), GP_ENOTFOUND);
    gp_dataset_row *rows = NULL;
    size_t count = 9;
    assert_int_equal(gp_store_dataset_list(s, &rows, &count, &err), GP_OK);
    assert_int_equal(count, 0);
    assert_int_equal(gp_store_dataset_delete(s, "iris", wall(), NULL, &err), GP_ENOTFOUND);
    int replaced = 7;
    assert_int_equal(finish(s, id, n, "[\"a\",\"b\",\"c\"]", &replaced, &row, &err), GP_OK);
    assert_int_equal(replaced, 0);
    assert_int_equal(row.id, id);
    assert_string_equal(row.state, "ready");
    assert_int_equal(row.n_rows, n);
    assert_int_equal(row.n_cols, 3);
    assert_int_equal(row.bytes, n * 3 * 8);
    assert_int_equal(row.bytes_received, 1234);
    assert_string_equal(row.sha256, "ab12");
    assert_string_equal(row.created_by, "alice");
    assert_string_equal(row.columns, "[\"a\",\"b\",\"c\"]");
    assert_true(is_iso_time(row.created_at));
    gp_dataset_row_free(&row);
    assert_int_equal(gp_store_dataset_get(s, "iris", &row, &err), GP_OK);
    assert_int_equal(row.id, id);
    gp_dataset_row_free(&row);
    assert_int_equal(gp_store_dataset_list(s, &rows, &count, &err), GP_OK);
    assert_int_equal(count, 1);
    assert_string_equal(rows[0].name, "iris");
    gp_dataset_row_free_array(rows, count);
    /* ranges: inside a part, across one and two boundaries, the short tail */
    const uint64_t firsts[] = {0, 5, PR - 3, PR - 1, 2 * PR, n - 1, 0};
    const size_t counts[] = {PR, 17, 10, PR + 2, 100, 1, (size_t)n};
    const size_t cols[] = {2, 0};
    for (size_t k = 0; k < sizeof firsts / sizeof firsts[0]; k++) {
        double *a = calloc(counts[k], sizeof *a), *b = calloc(counts[k], sizeof *b);
        double *const out[] = {a, b};
        assert_int_equal(gp_store_dataset_read(s, id, n, firsts[k], counts[k], cols, 2, out, &err),
                         GP_OK);
        for (size_t i = 0; i < counts[k]; i++) {
            assert_true(a[i] == cell(firsts[k] + i, 2, 0.25));
            assert_true(b[i] == cell(firsts[k] + i, 0, 0.25));
        }
        free(a);
        free(b);
    }
    double one;
    double *const out1[] = {&one};
    assert_int_equal(gp_store_dataset_read(s, id, n, n, 1, cols, 1, out1, &err), GP_EINVAL);
    const size_t far[] = {3};
    assert_int_equal(gp_store_dataset_read(s, id, n, 0, 1, far, 1, out1, &err), GP_EDATA);
    gp_store_close(s);
}

/* A finish replaces the ready data set of its name, whose parts go with it. */
static void test_dataset_replace(void **state)
{
    (void)state;
    char path[512];
    sf_db_path(path, sizeof path, "ds_replace.db");
    gp_store *s = sf_open_store("ds_replace.db");
    gp_error err;
    int64_t a = upload(s, "d", PR + 1, 2, 0.0);
    int replaced = 0;
    assert_int_equal(finish(s, a, PR + 1, "[1]", &replaced, NULL, &err), GP_OK);
    int64_t b = upload(s, "d", 10, 4, 0.5);
    gp_dataset_row row;
    assert_int_equal(gp_store_dataset_get(s, "d", &row, &err), GP_OK);
    assert_int_equal(row.id, a); /* the upload replaces nothing before its finish */
    gp_dataset_row_free(&row);
    assert_int_equal(finish(s, b, 10, "[2]", &replaced, &row, &err), GP_OK);
    assert_int_equal(replaced, 1);
    assert_int_equal(row.n_cols, 4);
    gp_dataset_row_free(&row);
    assert_int_equal(parts_of(path, a), 0);
    assert_int_equal(parts_of(path, b), 1);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM datasets", NULL), 1);
    assert_int_equal(gp_store_dataset_get(s, "d", &row, &err), GP_OK);
    assert_int_equal(row.id, b);
    gp_dataset_row_free(&row);
    /* a finish with rows that its parts do not hold fails, the upload stays */
    int64_t c = upload(s, "d", 10, 4, 0.5);
    assert_int_equal(finish(s, c, 11, "[3]", &replaced, NULL, &err), GP_EDATA);
    assert_int_equal(gp_store_dataset_get(s, "d", &row, &err), GP_OK);
    assert_int_equal(row.id, b);
    gp_dataset_row_free(&row);
    assert_int_equal(parts_of(path, c), 1);
    assert_int_equal(gp_store_dataset_abort(s, c, &err), GP_OK);
    gp_store_close(s);
}

/* An abort deletes the upload and its parts, never a ready data set; twice
 * is no error. */
static void test_dataset_abort(void **state)
{
    (void)state;
    char path[512];
    sf_db_path(path, sizeof path, "ds_abort.db");
    gp_store *s = sf_open_store("ds_abort.db");
    gp_error err;
    int64_t id = upload(s, "gone", 3 * PR, 2, 0.0);
    assert_int_equal(parts_of(path, id), 3);
    assert_int_equal(gp_store_dataset_abort(s, id, &err), GP_OK);
    assert_int_equal(parts_of(path, id), 0);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM datasets", NULL), 0);
    assert_int_equal(gp_store_dataset_abort(s, id, &err), GP_OK);
    double b[2] = {1, 2};
    assert_int_equal(gp_store_dataset_put_part(s, id, 0, 1, 2, b, 0, wall(), &err), GP_ENOTFOUND);
    assert_int_equal(gp_store_dataset_touch(s, id, wall(), &err), GP_ENOTFOUND);
    int64_t r = upload(s, "kept", 5, 2, 0.0);
    assert_int_equal(finish(s, r, 5, "[]", NULL, NULL, &err), GP_OK);
    assert_int_equal(gp_store_dataset_abort(s, r, &err), GP_OK);
    gp_dataset_row row;
    assert_int_equal(gp_store_dataset_get(s, "kept", &row, &err), GP_OK);
    gp_dataset_row_free(&row);
    gp_store_close(s);
}

/* Parts come in order, of the upload's width, the short one last. */
static void test_dataset_part_order(void **state)
{
    (void)state;
    gp_store *s = sf_open_store("ds_order.db");
    gp_error err;
    int64_t id = 0;
    assert_int_equal(gp_store_dataset_begin(s, "o", 2, "[]", NULL, wall(), &id, &err), GP_OK);
    double *b = block(0, PR, 3, 0.0);
    assert_int_equal(gp_store_dataset_put_part(s, id, 1, PR, 2, b, 0, wall(), &err), GP_EINVAL);
    assert_int_equal(gp_store_dataset_put_part(s, id, 0, PR, 3, b, 0, wall(), &err), GP_EINVAL);
    assert_int_equal(gp_store_dataset_put_part(s, id, 0, 10, 2, b, 0, wall(), &err), GP_OK);
    /* after a short part nothing follows */
    assert_int_equal(gp_store_dataset_put_part(s, id, 1, 10, 2, b, 0, wall(), &err), GP_EINVAL);
    assert_int_equal(gp_store_dataset_put_part(s, id, 0, PR + 1, 2, b, 0, wall(), &err),
                     GP_EINVAL);
    assert_int_equal(gp_store_dataset_begin(s, "", 2, "[]", NULL, wall(), &id, &err), GP_EINVAL);
    assert_string_equal(err.field, "name");
    free(b);
    gp_store_close(s);
}

/* The quota counts every data set's bytes, uploads included; a part that
 * would pass it writes nothing. */
static void test_dataset_quota(void **state)
{
    (void)state;
    char path[512];
    sf_db_path(path, sizeof path, "ds_quota.db");
    gp_store *s = sf_open_store("ds_quota.db");
    gp_error err;
    int64_t done = upload(s, "first", 100, 2, 0.0); /* 1600 bytes */
    assert_int_equal(finish(s, done, 100, "[]", NULL, NULL, &err), GP_OK);
    int64_t id = 0;
    assert_int_equal(gp_store_dataset_begin(s, "second", 2, "[]", NULL, wall(), &id, &err), GP_OK);
    double *b = block(0, PR, 2, 0.0);
    const uint64_t quota = 1600 + PR * 16 + 100;
    assert_int_equal(gp_store_dataset_put_part(s, id, 0, PR, 2, b, quota, wall(), &err), GP_OK);
    assert_int_equal(gp_store_dataset_put_part(s, id, 1, 10, 2, b, quota, wall(), &err),
                     GP_ESTORAGE);
    assert_string_equal(err.field, "dataset");
    assert_int_equal(parts_of(path, id), 1);
    assert_int_equal(sf_raw_intf(path, "SELECT n_rows FROM datasets WHERE id = %lld",
                                 (long long)id),
                     PR);
    assert_int_equal(gp_store_dataset_put_part(s, id, 1, 6, 2, b, quota, wall(), &err), GP_OK);
    free(b);
    gp_store_close(s);
}

static gp_job_row job_naming(const char *id, int64_t dataset)
{
    gp_job_row j;
    memset(&j, 0, sizeof j);
    snprintf(j.id, sizeof j.id, "%s", id);
    snprintf(j.model_name, sizeof j.model_name, "m");
    snprintf(j.status, sizeof j.status, "queued");
    j.dataset_id = dataset;
    return j;
}

/* A queued or running job naming a data set holds it against delete and
 * replace; so does a reader's lease while it lasts. */
static void test_dataset_in_use(void **state)
{
    (void)state;
    char path[512];
    sf_db_path(path, sizeof path, "ds_use.db");
    gp_store *s = sf_open_store("ds_use.db");
    gp_error err;
    int64_t id = upload(s, "u", 20, 2, 0.0);
    assert_int_equal(finish(s, id, 20, "[]", NULL, NULL, &err), GP_OK);
    gp_job_row j = job_naming("job-1", id);
    assert_int_equal(gp_store_job_create(s, &j, "{}", NULL, "me", wall() + 60, &err), GP_OK);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM job_arrays", NULL), 0);
    assert_int_equal(gp_store_dataset_delete(s, "u", wall(), NULL, &err), GP_ECONFLICT);
    assert_string_equal(err.field, "name");
    assert_non_null(strstr(err.message, "job-1"));
    assert_int_equal(gp_store_dataset_check_unused(s, "u", wall(), 0, &err), GP_ECONFLICT);
    /* a replace is refused too, and the upload stays for its caller */
    int64_t next = upload(s, "u", 5, 2, 1.0);
    assert_int_equal(finish(s, next, 5, "[]", NULL, NULL, &err), GP_ECONFLICT);
    assert_non_null(strstr(err.message, "job-1"));
    assert_int_equal(parts_of(path, next), 1);
    assert_int_equal(gp_store_dataset_abort(s, next, &err), GP_OK);
    j.progress = NULL;
    snprintf(j.status, sizeof j.status, "failed");
    assert_int_equal(gp_store_job_finish(s, &j, "me", &err), GP_OK);
    assert_int_equal(gp_store_dataset_check_unused(s, "u", wall(), 0, &err), GP_OK);
    /* a reader's lease */
    assert_int_equal(gp_store_dataset_reader_add(s, id, "tok-1", "a fit of model 'm'",
                                                 wall() + 60, &err),
                     GP_OK);
    assert_int_equal(gp_store_dataset_delete(s, "u", wall(), NULL, &err), GP_ECONFLICT);
    assert_non_null(strstr(err.message, "a fit of model 'm'"));
    /* expired (its daemon died): it holds no more */
    assert_int_equal(gp_store_dataset_reader_renew(s, "tok-1", wall() - 1, &err), GP_OK);
    assert_int_equal(gp_store_dataset_check_unused(s, "u", wall(), 0, &err), GP_OK);
    assert_int_equal(gp_store_dataset_reader_renew(s, "tok-1", wall() + 60, &err), GP_OK);
    assert_int_equal(gp_store_dataset_check_unused(s, "u", wall(), 0, &err), GP_ECONFLICT);
    assert_int_equal(gp_store_dataset_reader_drop(s, "tok-1", &err), GP_OK);
    assert_int_equal(gp_store_dataset_delete(s, "u", wall(), NULL, &err), GP_OK);
    assert_int_equal(parts_of(path, id), 0);
    /* nothing takes a data set that is gone */
    gp_job_row k = job_naming("job-2", id);
    assert_int_equal(gp_store_job_create(s, &k, "{}", NULL, "me", wall() + 60, &err),
                     GP_ENOTFOUND);
    assert_string_equal(err.field, "data.dataset");
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM jobs WHERE id = 'job-2'", NULL), 0);
    assert_int_equal(gp_store_dataset_reader_add(s, id, "tok-2", "x", wall() + 60, &err),
                     GP_ENOTFOUND);
    int64_t up = upload(s, "v", 5, 2, 0.0);
    assert_int_equal(gp_store_dataset_reader_add(s, up, "tok-3", "x", wall() + 60, &err),
                     GP_ENOTFOUND);
    assert_int_equal(gp_store_dataset_check_unused(s, "nothing", wall(), 1, &err), GP_OK);
    assert_int_equal(gp_store_dataset_check_unused(s, "nothing", wall(), 0, &err), GP_ENOTFOUND);
    gp_store_close(s);
}

/* The prune removes uploads untouched for the bound (with their parts), and
 * expired leases; never a ready data set or a live upload. */
static void test_dataset_prune(void **state)
{
    (void)state;
    char path[512];
    sf_db_path(path, sizeof path, "ds_prune.db");
    gp_store *s = sf_open_store("ds_prune.db");
    gp_error err;
    int64_t ready = upload(s, "r", 10, 2, 0.0);
    assert_int_equal(finish(s, ready, 10, "[]", NULL, NULL, &err), GP_OK);
    int64_t dead = upload(s, "dead", PR + 5, 2, 0.0);
    int64_t live = upload(s, "live", 5, 2, 0.0);
    sf_raw_exec(path, "UPDATE datasets SET touched_at = 1000", NULL);
    assert_int_equal(gp_store_dataset_touch(s, live, wall(), &err), GP_OK);
    assert_int_equal(gp_store_dataset_reader_add(s, ready, "old", "x", 1500, &err), GP_OK);
    size_t deleted = 0;
    assert_int_equal(gp_store_dataset_prune(s, 2000, &deleted, &err), GP_OK);
    assert_int_equal(deleted, 1);
    assert_int_equal(parts_of(path, dead), 0);
    assert_int_equal(parts_of(path, live), 1);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM dataset_readers", NULL), 0);
    gp_dataset_row row;
    assert_int_equal(gp_store_dataset_get(s, "r", &row, &err), GP_OK);
    gp_dataset_row_free(&row);
    gp_store_close(s);
}

/* A part of the wrong size is corrupt data, not a crash. */
static void test_dataset_corrupt_part(void **state)
{
    (void)state;
    char path[512];
    sf_db_path(path, sizeof path, "ds_corrupt.db");
    gp_store *s = sf_open_store("ds_corrupt.db");
    gp_error err;
    int64_t id = upload(s, "c", PR + 3, 2, 0.0);
    assert_int_equal(finish(s, id, PR + 3, "[]", NULL, NULL, &err), GP_OK);
    sf_raw_exec(path, "UPDATE dataset_parts SET rows = 2 WHERE part = 1", NULL);
    double v[4];
    double *const out[] = {v};
    const size_t col[] = {1};
    assert_int_equal(gp_store_dataset_read(s, id, PR + 3, PR - 1, 4, col, 1, out, &err), GP_EDATA);
    sf_raw_exec(path, "DELETE FROM dataset_parts WHERE part = 1", NULL);
    assert_int_equal(gp_store_dataset_read(s, id, PR + 3, PR - 1, 4, col, 1, out, &err), GP_EDATA);
    assert_int_equal(gp_store_dataset_read(s, id, PR + 3, 0, 4, col, 1, out, &err), GP_OK);
    gp_store_close(s);
}

/* A version 7 file gains the tables and keeps what it holds. */
static void test_dataset_migrates_v7(void **state)
{
    (void)state;
    char path[512];
    sf_db_path(path, sizeof path, "ds_v7.db");
    gp_store *s = sf_open_store("ds_v7.db");
    gp_state st;
    make_state(&st);
    gp_error err;
    assert_int_equal(gp_store_save(s, "m", "exact", "{}", "{}", 5, 2, &st, NULL, &err), GP_OK);
    gp_store_close(s);
    sf_raw_script(path, "DROP TABLE trials; DROP TABLE studies;"
                        " DROP TABLE dataset_readers; DROP TABLE dataset_parts;"
                        " DROP TABLE datasets; DROP INDEX jobs_dataset;"
                        " ALTER TABLE jobs DROP COLUMN dataset_id; PRAGMA user_version = 7;");
    s = sf_open_store("ds_v7.db");
    assert_int_equal(sf_raw_int(path, "PRAGMA user_version", NULL), GP_STORE_SCHEMA_VERSION);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM models", NULL), 1);
    int64_t id = upload(s, "after", 3, 1, 0.0);
    assert_int_equal(finish(s, id, 3, "[]", NULL, NULL, &err), GP_OK);
    gp_state_free(&st);
    gp_store_close(s);
}

int main(void)
{
    const struct CMUnitTest both[] = {
        cmocka_unit_test(test_dataset_upload_and_read),
        cmocka_unit_test(test_dataset_replace),
        cmocka_unit_test(test_dataset_abort),
        cmocka_unit_test(test_dataset_part_order),
        cmocka_unit_test(test_dataset_quota),
        cmocka_unit_test(test_dataset_in_use),
        cmocka_unit_test(test_dataset_prune),
        cmocka_unit_test(test_dataset_corrupt_part),
    };
    const struct CMUnitTest sqlite_only[] = {
        cmocka_unit_test(test_dataset_migrates_v7),
    };
    return sf_run_groups("store_datasets", both, SF_COUNT(both), sqlite_only,
                         SF_COUNT(sqlite_only), NULL, 0);
}
