/* gpserve store: named arrays as rows of `arrays` (a model's fitted state),
 * `job_arrays` (a durable job's request data), `observations` (the entries of
 * an online model's log) and `snapshots` (its latest snapshot).
 *
 * Each array is rows x cols float64, column-major, stored little-endian. An
 * array of more than part_bytes bytes is split into rows part = 0, 1, ..., k
 * (each a multiple of 8 bytes; every part row repeats rows and cols); an empty
 * array (rows * cols == 0) is one part 0 holding a zero-length blob. Loading
 * concatenates the parts in order and checks that they are consecutive from 0,
 * agree on the shape and add up to exactly rows * cols * 8 bytes: anything else
 * is GP_EDATA naming the array. */
#include "store/store_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/linalg/linalg.h"

_Static_assert(sizeof(double) == 8, "the store writes IEEE 754 binary64 doubles");

void gp_store_le_encode(const double *src, size_t count, unsigned char *dst)
{
    for (size_t i = 0; i < count; i++) {
        uint64_t u;
        memcpy(&u, &src[i], sizeof u);
        for (int b = 0; b < 8; b++)
            dst[8 * i + (size_t)b] = (unsigned char)(u >> (8 * b));
    }
}

void gp_store_le_decode(const unsigned char *src, size_t count, double *dst)
{
    for (size_t i = 0; i < count; i++) {
        uint64_t u = 0;
        for (int b = 0; b < 8; b++)
            u |= (uint64_t)src[8 * i + (size_t)b] << (8 * b);
        memcpy(&dst[i], &u, sizeof u);
    }
}

int gp_store_host_is_le(void)
{
#ifdef GP_STORE_PORTABLE_CODEC
    /* Build with -DGP_STORE_PORTABLE_CODEC to exercise the big-endian code
     * path (encode/decode every blob) on a little-endian machine. */
    return 0;
#endif
    const uint64_t one = 1;
    unsigned char first;
    memcpy(&first, &one, 1);
    return first == 1;
}

/* Byte size of a rows x cols float64 array, overflow-checked. */
static int array_bytes(size_t rows, size_t cols, size_t *count, size_t *bytes, gp_error *err)
{
    int rc = gp_checked_size(rows, cols, count, err);
    if (rc)
        return rc;
    if (*count > SIZE_MAX / sizeof(double))
        return gp_error_set(err, GP_ETOOBIG, NULL, "array of %zu x %zu is too large", rows, cols);
    *bytes = *count * sizeof(double);
    return GP_OK;
}

/* The statements of each table: insert one part; select every part of an
 * owner in (key, part) order; summarise one array's parts. They all bind the
 * owner to parameter 1 and the array's name to 2 (insert, summary); the
 * log's and the snapshots' take the entry number as the parameter *_seq
 * says (0: none). */
static const struct {
    enum gp_store_stmt insert, select, summary;
    int insert_seq, select_seq, summary_seq;
} table_stmts[] = {
    [GP_ARRAYS_MODEL] = {GPS_INSERT_ARRAY, GPS_ARRAYS, GPS_ARRAY_SUMMARY, 0, 0, 0},
    [GP_ARRAYS_JOB] = {GPS_JOB_INSERT_ARRAY, GPS_JOB_ARRAYS, GPS_JOB_ARRAY_SUMMARY, 0, 0, 0},
    [GP_ARRAYS_OBSERVATIONS] = {GPS_OBS_INSERT_ARRAY, GPS_OBS_ARRAYS, GPS_OBS_ARRAY_SUMMARY, 7, 2,
                                3},
    [GP_ARRAYS_SNAPSHOT] = {GPS_SNAP_INSERT_ARRAY, GPS_SNAP_ARRAYS, GPS_SNAP_ARRAY_SUMMARY, 7, 0,
                            0},
};

/* Bind the owner of an array row (model row id or job id) to parameter 1, and
 * its entry number to parameter seq_param when the statement has one. */
static int bind_owner(gp_db_stmt *st, const gp_array_owner *o, int seq_param)
{
    int src = o->table == GP_ARRAYS_JOB ? gp_db_bind_text(st, 1, o->job_id)
                                        : gp_db_bind_int64(st, 1, o->model_id);
    if (src == GP_DB_OK && seq_param > 0)
        src = gp_db_bind_int64(st, seq_param, o->seq);
    return src;
}

void gp_array_owner_label(const gp_array_owner *o, char *out, size_t size)
{
    switch (o->table) {
    case GP_ARRAYS_JOB:
        snprintf(out, size, "job %s", o->job_id);
        break;
    case GP_ARRAYS_OBSERVATIONS:
        snprintf(out, size, "entry %lld of model row %lld's log", (long long)o->seq,
                 (long long)o->model_id);
        break;
    case GP_ARRAYS_SNAPSHOT:
        snprintf(out, size, "model row %lld's snapshot", (long long)o->model_id);
        break;
    default:
        snprintf(out, size, "model row %lld", (long long)o->model_id);
        break;
    }
}

int gp_store_check_arrays(const gp_state *state, gp_error *err)
{
    for (size_t i = 0; i < state->count; i++) {
        const gp_named_array *a = &state->arrays[i];
        size_t count = 0, bytes = 0;
        int rc = array_bytes(a->rows, a->cols, &count, &bytes, err);
        if (rc)
            return gp_error_set(err, rc, a->name, "array '%s' of %zu x %zu is too large",
                                a->name, a->rows, a->cols);
        if ((uint64_t)a->rows > INT64_MAX || (uint64_t)a->cols > INT64_MAX)
            return gp_error_set(err, GP_ETOOBIG, a->name,
                                "array '%s' has too many rows or columns", a->name);
        if (count > 0 && a->data == NULL)
            return gp_error_set(err, GP_EINVAL, a->name, "array '%s' has no data", a->name);
    }
    return GP_OK;
}

int gp_store_append_state(gp_state *state, gp_state *tmp, gp_error *err)
{
    int rc = GP_OK;
    for (size_t i = 0; i < tmp->count && rc == GP_OK; i++)
        if (gp_state_find(state, tmp->arrays[i].name))
            rc = gp_error_set(err, GP_EINVAL, tmp->arrays[i].name,
                              "the state already holds an array '%s'", tmp->arrays[i].name);
    if (rc == GP_OK && state->count + tmp->count > state->capacity) {
        /* One allocation for all of them, so that state is unchanged on
         * failure. */
        const size_t cap = state->count + tmp->count;
        gp_named_array *a = realloc(state->arrays, cap * sizeof *a);
        if (a == NULL)
            rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory growing a model state");
        else {
            state->arrays = a;
            state->capacity = cap;
        }
    }
    if (rc) {
        gp_state_free(tmp);
        return rc;
    }
    if (tmp->count > 0)
        memcpy(state->arrays + state->count, tmp->arrays, tmp->count * sizeof *tmp->arrays);
    state->count += tmp->count;
    free(tmp->arrays);
    gp_state_init(tmp);
    return GP_OK;
}

int gp_store_write_arrays(gp_store *s, const gp_array_owner *owner, const gp_state *state,
                          gp_error *err)
{
    gp_store_conn *c = s->w;
    const int le = gp_store_host_is_le();
    const size_t pb = s->part_bytes;
    unsigned char *buf = NULL; /* byte-swapped part (big-endian hosts only) */
    int rc = GP_OK;
    for (size_t i = 0; i < state->count && rc == GP_OK; i++) {
        const gp_named_array *a = &state->arrays[i];
        size_t count = 0, bytes = 0;
        rc = array_bytes(a->rows, a->cols, &count, &bytes, err);
        if (rc)
            break;
        if ((uint64_t)a->rows > INT64_MAX || (uint64_t)a->cols > INT64_MAX) {
            rc = gp_error_set(err, GP_ETOOBIG, a->name, "array '%s' has too many rows or columns",
                              a->name);
            break;
        }
        if (count > 0 && a->data == NULL) {
            rc = gp_error_set(err, GP_EINVAL, a->name, "array '%s' has no data", a->name);
            break;
        }
        const size_t nparts = bytes == 0 ? 1 : (bytes - 1) / pb + 1;
        if (!le && buf == NULL && bytes > 0) {
            buf = malloc(bytes < pb ? bytes : pb);
            if (buf == NULL) {
                rc = gp_error_set(err, GP_ENOMEM, a->name, "out of memory encoding array '%s'",
                                  a->name);
                break;
            }
        }
        for (size_t p = 0; p < nparts && rc == GP_OK; p++) {
            const size_t off = p * pb;
            const size_t len = bytes - off < pb ? bytes - off : pb;
            gp_db_stmt *st = gp_store_stmt(c, table_stmts[owner->table].insert);
            int src = bind_owner(st, owner, table_stmts[owner->table].insert_seq);
            if (src == GP_DB_OK)
                src = gp_db_bind_text(st, 2, a->name);
            if (src == GP_DB_OK)
                src = gp_db_bind_int64(st, 3, (int64_t)p);
            if (src == GP_DB_OK)
                src = gp_db_bind_int64(st, 4, (int64_t)a->rows);
            if (src == GP_DB_OK)
                src = gp_db_bind_int64(st, 5, (int64_t)a->cols);
            if (src == GP_DB_OK) {
                if (len == 0) {
                    src = gp_db_bind_blob(st, 6, NULL, 0); /* an empty blob, not NULL */
                } else if (le) {
                    src = gp_db_bind_blob(st, 6, (const unsigned char *)a->data + off, len);
                } else {
                    gp_store_le_encode(a->data + off / sizeof(double), len / sizeof(double),
                                       buf);
                    src = gp_db_bind_blob(st, 6, buf, len);
                }
            }
            if (src == GP_DB_OK)
                src = gp_db_step(st);
            if (src != GP_DB_DONE)
                rc = gp_store_sql_error(c, src, err, "saving an array");
            gp_store_stmt_done(st);
        }
    }
    free(buf);
    return rc;
}

/* The array being assembled from its parts. */
typedef struct array_acc {
    char key[GP_STATE_NAME_LEN];
    size_t rows, cols, bytes, filled;
    int64_t next_part;
    double *data;
    char who[96]; /* gp_array_owner_label, for messages */
} array_acc;

static int acc_finish(array_acc *acc, gp_state *tmp, gp_error *err)
{
    if (acc->filled != acc->bytes) {
        free(acc->data);
        acc->data = NULL;
        return gp_error_set(err, GP_EDATA, acc->key,
                            "stored array '%s' of %s is corrupt: its parts hold %zu "
                            "of %zu bytes (%zu x %zu)",
                            acc->key, acc->who, acc->filled, acc->bytes, acc->rows,
                            acc->cols);
    }
    double *data = acc->data;
    acc->data = NULL;
    return gp_state_put_owned(tmp, acc->key, acc->rows, acc->cols, data, err);
}

/* Before allocating an array: do its parts (count, numbering, shapes, total
 * size) agree with rows x cols? Reads the sizes only, not the blobs. */
static int check_summary(gp_store_conn *c, const gp_array_owner *owner, const array_acc *acc,
                         gp_error *err)
{
    gp_db_stmt *st = gp_store_stmt(c, table_stmts[owner->table].summary);
    int src = bind_owner(st, owner, table_stmts[owner->table].summary_seq);
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 2, acc->key);
    if (src == GP_DB_OK)
        src = gp_db_step(st);
    if (src != GP_DB_ROW) {
        int rc = gp_store_sql_error(c, src, err, "checking an array");
        gp_store_stmt_done(st);
        return rc;
    }
    const int64_t n = gp_db_col_int64(st, 0), maxpart = gp_db_col_int64(st, 1);
    const int64_t total = gp_db_col_int64(st, 2);
    const int uniform = gp_db_col_int64(st, 3) == (int64_t)acc->rows &&
                        gp_db_col_int64(st, 4) == (int64_t)acc->rows &&
                        gp_db_col_int64(st, 5) == (int64_t)acc->cols &&
                        gp_db_col_int64(st, 6) == (int64_t)acc->cols;
    gp_store_stmt_done(st);
    if (maxpart != n - 1)
        return gp_error_set(err, GP_EDATA, acc->key,
                            "stored array '%s' of %s is corrupt: %lld parts "
                            "numbered up to %lld (a part is missing)",
                            acc->key, acc->who, (long long)n, (long long)maxpart);
    if (!uniform)
        return gp_error_set(err, GP_EDATA, acc->key,
                            "stored array '%s' of %s is corrupt: its parts "
                            "disagree on the shape",
                            acc->key, acc->who);
    if (total < 0 || (uint64_t)total != (uint64_t)acc->bytes)
        return gp_error_set(err, GP_EDATA, acc->key,
                            "stored array '%s' of %s is corrupt: its parts hold "
                            "%lld of %zu bytes (%zu x %zu)",
                            acc->key, acc->who, (long long)total, acc->bytes,
                            acc->rows, acc->cols);
    return GP_OK;
}

/* Start a new array from its first row (which must be part 0). */
static int acc_start(gp_store_conn *c, array_acc *acc, const char *key, int64_t part,
                     int64_t rows, int64_t cols, const gp_array_owner *owner,
                     gp_error *err)
{
    memcpy(acc->key, key, strlen(key) + 1);
    acc->filled = 0;
    acc->next_part = 1;
    if (part != 0)
        return gp_error_set(err, GP_EDATA, key,
                            "stored array '%s' of %s is corrupt: part 0 is missing "
                            "(first part %lld)",
                            key, acc->who, (long long)part);
    if (rows < 0 || cols < 0 || (uint64_t)rows > SIZE_MAX || (uint64_t)cols > SIZE_MAX)
        return gp_error_set(err, GP_EDATA, key,
                            "stored array '%s' of %s has an invalid shape %lld x %lld",
                            key, acc->who, (long long)rows, (long long)cols);
    acc->rows = (size_t)rows;
    acc->cols = (size_t)cols;
    size_t count = 0;
    int rc = array_bytes(acc->rows, acc->cols, &count, &acc->bytes, err);
    if (rc)
        return gp_error_set(err, GP_EDATA, key,
                            "stored array '%s' of %s has an invalid shape %zu x %zu",
                            key, acc->who, acc->rows, acc->cols);
    rc = check_summary(c, owner, acc, err);
    if (rc)
        return rc;
    acc->data = gp_alloc_doubles(count, err);
    if (acc->data == NULL)
        return err ? err->code : GP_ENOMEM;
    return GP_OK;
}

int gp_store_read_arrays(gp_store_conn *c, const gp_array_owner *owner, gp_state *tmp,
                         gp_error *err)
{
    const int le = gp_store_host_is_le();
    array_acc acc = {.data = NULL};
    gp_array_owner_label(owner, acc.who, sizeof acc.who);
    int have = 0; /* acc holds an array being assembled */
    int rc = GP_OK;
    gp_db_stmt *st = gp_store_stmt(c, table_stmts[owner->table].select);
    int src = bind_owner(st, owner, table_stmts[owner->table].select_seq);
    if (src != GP_DB_OK) {
        rc = gp_store_sql_error(c, src, err, "loading arrays");
        goto out;
    }
    while ((src = gp_db_step(st)) == GP_DB_ROW) {
        const char *key = gp_db_col_text(st, 0);
        const size_t keylen = key ? strlen(key) : 0;
        if (keylen == 0 || keylen >= GP_STATE_NAME_LEN) {
            rc = gp_error_set(err, GP_EDATA, NULL,
                              "%s has an array with an invalid name", acc.who);
            goto out;
        }
        const int64_t part = gp_db_col_int64(st, 1);
        const int64_t rows = gp_db_col_int64(st, 2);
        const int64_t cols = gp_db_col_int64(st, 3);
        if (!have || strcmp(acc.key, key) != 0) {
            if (have) {
                have = 0;
                rc = acc_finish(&acc, tmp, err);
                if (rc)
                    goto out;
            }
            have = 1;
            rc = acc_start(c, &acc, key, part, rows, cols, owner, err);
            if (rc)
                goto out;
        } else {
            if (part != acc.next_part) {
                rc = gp_error_set(err, GP_EDATA, acc.key,
                                  "stored array '%s' of %s is corrupt: part %lld "
                                  "is missing",
                                  acc.key, acc.who, (long long)acc.next_part);
                goto out;
            }
            acc.next_part++;
            if (rows != (int64_t)acc.rows || cols != (int64_t)acc.cols) {
                rc = gp_error_set(err, GP_EDATA, acc.key,
                                  "stored array '%s' of %s is corrupt: part %lld "
                                  "has shape %lld x %lld, part 0 %zu x %zu",
                                  acc.key, acc.who, (long long)part,
                                  (long long)rows, (long long)cols, acc.rows, acc.cols);
                goto out;
            }
        }
        if (gp_db_col_type(st, 4) != GP_DB_BLOB) {
            rc = gp_error_set(err, GP_EDATA, acc.key,
                              "stored array '%s' of %s is corrupt: part %lld is "
                              "not a blob",
                              acc.key, acc.who, (long long)part);
            goto out;
        }
        const unsigned char *blob = gp_db_col_blob(st, 4);
        const size_t n = gp_db_col_bytes(st, 4);
        if (n > acc.bytes - acc.filled || n % 8 != 0 || (n > 0 && !blob)) {
            if (blob == NULL && n > 0) {
                rc = gp_store_sql_error(c, GP_DB_ENOMEM, err, "reading an array");
                goto out;
            }
            rc = gp_error_set(err, GP_EDATA, acc.key,
                              "stored array '%s' of %s is corrupt: part %lld has "
                              "%zu bytes, %zu of %zu remain",
                              acc.key, acc.who, (long long)part, n,
                              acc.bytes - acc.filled, acc.bytes);
            goto out;
        }
        if (n > 0) {
            if (le)
                memcpy((unsigned char *)acc.data + acc.filled, blob, n);
            else
                gp_store_le_decode(blob, n / 8, acc.data + acc.filled / 8);
        }
        acc.filled += (size_t)n;
    }
    if (src != GP_DB_DONE) {
        rc = gp_store_sql_error(c, src, err, "loading arrays");
        goto out;
    }
    if (have) {
        have = 0;
        rc = acc_finish(&acc, tmp, err);
    }
out:
    if (have)
        free(acc.data);
    gp_store_stmt_done(st);
    return rc;
}
