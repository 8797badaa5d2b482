/* A data set's rows as a fit reads them (api/dataset_rows.h): the reference
 * resolved against the data set's columns, the subsample drawn, and the
 * gp_rows read callback over the store's parts, with the reader's lease
 * renewed as it reads. */
#include "api/dataset_rows.h"

#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/internal.h"

struct gp_dataset_rows {
    gp_store *store;
    gp_rows rows;
    gp_dataset_resolved res;
    size_t *cols;       /* the d input columns, then the target's */
    size_t *idx;        /* the subsample's rows of the data set, increasing (NULL: every row) */
    double *scratch;    /* GP_STORE_DATASET_PART_ROWS x (d + 1) for a subsample's reads */
    double **outs;      /* d + 1 destinations of one read */
    char token[GP_JOB_ID_LEN];
    double lease_until; /* when the lease runs out (wall seconds) */
};

/* ---- the reference ---- */

/* "a, b, c" (the data set's columns) into out, cut to fit. */
static void names_list(json_t *cols, char *out, size_t size)
{
    size_t used = 0, j;
    json_t *c;
    out[0] = '\0';
    json_array_foreach(cols, j, c) {
        const char *n = json_string_value(json_object_get(c, "name"));
        int w = snprintf(out + used, size - used, "%s%s", j ? ", " : "", n ? n : "?");
        if (w < 0 || (size_t)w >= size - used) {
            if (size > 5) /* cut: say so */
                memcpy(out + size - 5, " ...", 5);
            return;
        }
        used += (size_t)w;
    }
}

/* The index of column name among cols, or SIZE_MAX. */
static size_t column_of(json_t *cols, const char *name)
{
    size_t j;
    json_t *c;
    json_array_foreach(cols, j, c) {
        const char *n = json_string_value(json_object_get(c, "name"));
        if (n && name && strcmp(n, name) == 0)
            return j;
    }
    return SIZE_MAX;
}

static int no_column(const gp_dataset_row *row, json_t *cols, const char *field, const char *name,
                     gp_error *err)
{
    char names[160];
    names_list(cols, names, sizeof names);
    return gp_error_set(err, GP_EDATA, field, "data set '%s' has no column '%.64s'; its columns: %s",
                        row->name, name ? name : "", names);
}

/* The columns ref takes of row (d inputs, then the target) into *cols. */
static int pick_columns(const gp_dataset_row *row, const gp_dataset_ref *ref, size_t **cols,
                        size_t *d, gp_error *err)
{
    json_t *all = json_loads(row->columns, 0, NULL);
    if (!json_is_array(all) || json_array_size(all) != row->n_cols) {
        json_decref(all);
        return gp_error_set(err, GP_EINTERNAL, "data.dataset",
                            "data set '%s' has a corrupt description", row->name);
    }
    size_t target = column_of(all, ref->target);
    size_t want = ref->columns ? ref->n_columns : row->n_cols - 1;
    size_t *c = calloc(want + 1, sizeof *c);
    int rc = c ? GP_OK : gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    if (rc == GP_OK && target == SIZE_MAX)
        rc = no_column(row, all, "data.target", ref->target, err);
    for (size_t i = 0, k = 0; rc == GP_OK && i < (ref->columns ? want : row->n_cols); i++) {
        char field[48];
        snprintf(field, sizeof field, "data.columns[%zu]", i);
        size_t j = ref->columns ? column_of(all, ref->columns[i]) : i;
        if (j == SIZE_MAX)
            rc = no_column(row, all, field, ref->columns[i], err);
        else if (j == target && ref->columns)
            rc = gp_error_set(err, GP_EDATA, field, "'%.64s' is the target (data.target): it "
                              "cannot be an input too", ref->columns[i]);
        for (size_t q = 0; rc == GP_OK && q < k; q++)
            if (c[q] == j)
                rc = gp_error_set(err, GP_EINVAL, field, "data.columns names '%.64s' twice",
                                  ref->columns[i]);
        if (rc == GP_OK && j != target)
            c[k++] = j;
    }
    if (rc == GP_OK && want == 0)
        rc = gp_error_set(err, GP_EDATA, "data.columns", "data set '%s' has no column but the "
                          "target: a fit needs inputs", row->name);
    json_decref(all);
    if (rc) {
        free(c);
        return rc;
    }
    c[want] = target;
    *cols = c;
    *d = want;
    return GP_OK;
}

/* The data set row of ref: the ready one of its name, or the one pinned. */
static int find_row(gp_store *store, const gp_dataset_ref *ref, gp_dataset_row *row,
                    gp_error *err)
{
    int rc = ref->id > 0 ? gp_store_dataset_get_id(store, ref->id, row, err)
                         : gp_store_dataset_get(store, ref->name ? ref->name : "", row, err);
    if (rc == GP_OK && ref->id > 0 && strcmp(row->name, ref->name ? ref->name : "") != 0) {
        gp_dataset_row_free(row);
        rc = GP_ENOTFOUND;
    }
    if (rc == GP_ENOTFOUND)
        return gp_error_set(err, GP_ENOTFOUND, "data.dataset",
                            ref->id > 0 ? "data set '%s' was deleted or replaced since the fit "
                                          "was submitted"
                                        : "data set '%s' not found (PUT /v1/datasets/%s first)",
                            ref->name ? ref->name : "", ref->name ? ref->name : "");
    return rc;
}

static int resolve(gp_store *store, const gp_dataset_ref *ref, gp_dataset_resolved *out,
                   size_t **cols, gp_error *err)
{
    memset(out, 0, sizeof *out);
    gp_dataset_row row;
    int rc = find_row(store, ref, &row, err);
    if (rc)
        return rc;
    rc = pick_columns(&row, ref, cols, &out->d, err);
    if (rc == GP_OK && row.n_rows > SIZE_MAX / 2)
        rc = gp_error_set(err, GP_ETOOBIG, "data.dataset", "data set '%s' has too many rows",
                          row.name);
    if (rc == GP_OK) {
        out->id = row.id;
        memcpy(out->sha256, row.sha256, sizeof out->sha256);
        out->rows = row.n_rows;
        out->n = ref->sample && ref->sample < row.n_rows ? (size_t)ref->sample
                                                          : (size_t)row.n_rows;
    }
    gp_dataset_row_free(&row);
    return rc;
}

int gp_dataset_resolve(gp_store *store, const gp_dataset_ref *ref, gp_dataset_resolved *out,
                       gp_error *err)
{
    size_t *cols = NULL;
    int rc = resolve(store, ref, out, &cols, err);
    free(cols);
    return rc;
}

/* ---- reading ---- */

/* A lease token no other reader has: random bytes, else the clock and pid. */
static void new_token(char *out, size_t size)
{
    static atomic_uint counter;
    unsigned char b[8] = {0};
    int fd = open("/dev/urandom", O_RDONLY);
    ssize_t got = fd >= 0 ? read(fd, b, sizeof b) : -1;
    if (fd >= 0)
        close(fd);
    if (got != (ssize_t)sizeof b) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t v = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^
                     ((uint64_t)getpid() << 40) ^ atomic_fetch_add(&counter, 1);
        memcpy(b, &v, sizeof b);
    }
    snprintf(out, size, "ds-%02x%02x%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4], b[5],
             b[6], b[7]);
}

/* Renew the lease once a third of it has gone by. */
static int keep_lease(gp_dataset_rows *r, gp_error *err)
{
    double now = gp_api_wall_seconds();
    if (r->lease_until - now > GP_DATASET_LEASE_SECONDS * 2.0 / 3.0)
        return GP_OK;
    r->lease_until = now + GP_DATASET_LEASE_SECONDS;
    return gp_store_dataset_reader_renew(r->store, r->token, r->lease_until, err);
}

/* Every value of the count rows just read is finite (the upload checked;
 * a damaged store is refused here rather than fed to a fit). */
static int check_finite(const gp_dataset_rows *r, size_t count, double *const *outs,
                        gp_error *err)
{
    for (size_t j = 0; j <= r->res.d; j++)
        for (size_t i = 0; i < count; i++)
            if (!isfinite(outs[j][i]))
                return gp_error_set(err, GP_EDATA, "data.dataset",
                                    "data set row %lld holds a value that is not finite",
                                    (long long)r->res.id);
    return GP_OK;
}

/* Sequence rows [g, g + count) of a subsample: each run of them within one
 * part is one read into scratch, then copied to X and y. */
static int read_sampled(gp_dataset_rows *r, size_t g, size_t count, double *X, double *y,
                        gp_error *err)
{
    const size_t d = r->res.d;
    int rc = GP_OK;
    for (size_t a = 0; a < count && rc == GP_OK;) {
        const size_t part = r->idx[g + a] / GP_STORE_DATASET_PART_ROWS;
        size_t b = a;
        while (b + 1 < count && r->idx[g + b + 1] / GP_STORE_DATASET_PART_ROWS == part)
            b++;
        const size_t lo = r->idx[g + a], span = r->idx[g + b] - lo + 1;
        for (size_t j = 0; j <= d; j++)
            r->outs[j] = r->scratch + j * span;
        rc = gp_store_dataset_read(r->store, r->res.id, r->res.rows, lo, span, r->cols, d + 1,
                                   r->outs, err);
        for (size_t k = a; rc == GP_OK && k <= b; k++) {
            const size_t at = r->idx[g + k] - lo;
            for (size_t j = 0; j < d; j++)
                X[k + j * count] = r->outs[j][at];
            y[k] = r->outs[d][at];
        }
        a = b + 1;
    }
    return rc;
}

static int read_rows(void *ctx, size_t i, size_t count, double *X, double *y, gp_error *err)
{
    gp_dataset_rows *r = ctx;
    const size_t d = r->res.d, g = r->rows.first + i;
    if (i > r->rows.n || count > r->rows.n - i || count > r->rows.chunk)
        return gp_error_set(err, GP_EINVAL, "data", "rows %zu..%zu are not rows of the shard", i,
                            i + count);
    int rc = keep_lease(r, err);
    if (rc == GP_OK && r->idx) {
        rc = read_sampled(r, g, count, X, y, err);
    } else if (rc == GP_OK) {
        for (size_t j = 0; j < d; j++)
            r->outs[j] = X + j * count;
        r->outs[d] = y;
        rc = gp_store_dataset_read(r->store, r->res.id, r->res.rows, g, count, r->cols, d + 1,
                                   r->outs, err);
    }
    if (rc == GP_OK) {
        for (size_t j = 0; j < d; j++)
            r->outs[j] = X + j * count;
        r->outs[d] = y;
        rc = check_finite(r, count, r->outs, err);
    }
    return rc;
}

/* The subsample's rows, and room to read them a part at a time. */
static int draw_sample(gp_dataset_rows *r, const gp_dataset_ref *ref, gp_error *err)
{
    if (ref->sample == 0 || r->res.n == r->res.rows)
        return GP_OK; /* every row, in order */
    r->idx = malloc(r->res.n * sizeof *r->idx);
    r->scratch = calloc((size_t)GP_STORE_DATASET_PART_ROWS * (r->res.d + 1), sizeof *r->scratch);
    if (r->idx == NULL || r->scratch == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory for a subsample of %zu rows",
                            r->res.n);
    return gp_rows_sample_indices((size_t)r->res.rows, r->res.n, ref->seed, r->idx, err);
}

int gp_dataset_rows_open(gp_store *store, const gp_dataset_ref *ref, size_t first, size_t count,
                         const char *label, gp_dataset_rows **out, gp_error *err)
{
    *out = NULL;
    gp_dataset_rows *r = calloc(1, sizeof *r);
    if (r == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    r->store = store;
    int rc = resolve(store, ref, &r->res, &r->cols, err);
    if (rc == GP_OK && first > r->res.n)
        rc = gp_error_set(err, GP_EINVAL, "data", "the shard starts at row %zu of %zu", first,
                          r->res.n);
    if (rc == GP_OK && count == SIZE_MAX)
        count = r->res.n - first;
    if (rc == GP_OK && count > r->res.n - first)
        rc = gp_error_set(err, GP_EINVAL, "data", "the shard %zu..%zu passes the %zu rows",
                          first, first + count, r->res.n);
    if (rc == GP_OK && (r->outs = calloc(r->res.d + 1, sizeof *r->outs)) == NULL)
        rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    if (rc == GP_OK)
        rc = draw_sample(r, ref, err);
    if (rc == GP_OK) {
        new_token(r->token, sizeof r->token);
        r->lease_until = gp_api_wall_seconds() + GP_DATASET_LEASE_SECONDS;
        rc = gp_store_dataset_reader_add(store, r->res.id, r->token, label, r->lease_until, err);
        if (rc)
            r->token[0] = '\0';
    }
    if (rc) {
        gp_dataset_rows_close(r);
        return rc;
    }
    r->rows = (gp_rows){.n = count,
                        .first = first,
                        .n_total = r->res.n,
                        .d = r->res.d,
                        .chunk = GP_ROWS_DEFAULT_CHUNK,
                        .read = read_rows,
                        .read_ctx = r};
    *out = r;
    return GP_OK;
}

gp_rows *gp_dataset_rows_get(gp_dataset_rows *r)
{
    return &r->rows;
}

const gp_dataset_resolved *gp_dataset_rows_resolved(const gp_dataset_rows *r)
{
    return &r->res;
}

void gp_dataset_rows_close(gp_dataset_rows *r)
{
    if (r == NULL)
        return;
    if (r->token[0]) /* a lease the store cannot drop now lapses by itself */
        (void)gp_store_dataset_reader_drop(r->store, r->token, NULL);
    free(r->cols);
    free(r->idx);
    free(r->scratch);
    free(r->outs);
    free(r);
}
