/* Benchmark / test support: dataset CSVs and split files (see dataset.h). */
#include "bench/support/dataset.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/base/rng.h"

#define MAX_FILE_BYTES ((size_t)1 << 30) /* 1 GiB: far above any shared dataset */
#define MAX_COLUMNS 100000

/* ---- small helpers ---- */

static int read_whole_file(const char *path, char **out, size_t *out_len, gp_error *err)
{
    *out = NULL;
    *out_len = 0;
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return gp_error_set(err, GP_EINVAL, NULL, "cannot open %s: %s", path, strerror(errno));
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap + 1);
    if (buf == NULL) {
        fclose(f);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory reading %s", path);
    }
    for (;;) {
        if (len == cap) {
            if (cap >= MAX_FILE_BYTES) {
                free(buf);
                fclose(f);
                return gp_error_set(err, GP_ETOOBIG, NULL, "%s is larger than %zu bytes", path,
                                    MAX_FILE_BYTES);
            }
            size_t ncap = cap * 2;
            char *nb = realloc(buf, ncap + 1);
            if (nb == NULL) {
                free(buf);
                fclose(f);
                return gp_error_set(err, GP_ENOMEM, NULL, "out of memory reading %s", path);
            }
            buf = nb;
            cap = ncap;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) {
            if (ferror(f)) {
                free(buf);
                fclose(f);
                return gp_error_set(err, GP_EINVAL, NULL, "error reading %s", path);
            }
            break;
        }
    }
    fclose(f);
    buf[len] = '\0';
    *out = buf;
    *out_len = len;
    return GP_OK;
}

/* Next line of buf[*pos..len): start and length without '\n' (and a final '\r').
 * Returns 0 at the end of the buffer. */
static int next_line(const char *buf, size_t len, size_t *pos, size_t *start, size_t *line_len)
{
    if (*pos >= len)
        return 0;
    size_t s = *pos, e = s;
    while (e < len && buf[e] != '\n')
        e++;
    *start = s;
    *pos = e < len ? e + 1 : e;
    if (e > s && buf[e - 1] == '\r')
        e--;
    *line_len = e - s;
    return 1;
}

static int valid_name(const char *name)
{
    if (name == NULL || name[0] == '\0' || strlen(name) >= GP_DATASET_NAME_LEN)
        return 0;
    if (name[0] == '.')
        return 0;
    for (const char *p = name; *p; p++) {
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.'))
            return 0;
    }
    return 1;
}

static int build_path(char *buf, size_t len, const char *fmt_dir, const char *sub,
                      const char *name, const char *suffix, gp_error *err)
{
    int w = snprintf(buf, len, "%s/%s%s%s", fmt_dir, sub, name, suffix);
    if (w < 0 || (size_t)w >= len)
        return gp_error_set(err, GP_EINVAL, NULL, "path too long for dataset '%s'", name);
    return GP_OK;
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

/* Parse a non-negative decimal integer token [s, e) (digits only). */
static int parse_index(const char *s, const char *e, size_t *out)
{
    if (s == e)
        return 0;
    size_t v = 0;
    for (const char *p = s; p < e; p++) {
        if (*p < '0' || *p > '9')
            return 0;
        size_t dgt = (size_t)(*p - '0');
        if (v > (SIZE_MAX - dgt) / 10)
            return 0;
        v = v * 10 + dgt;
    }
    *out = v;
    return 1;
}

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

/* ---- directory ---- */

int gp_datasets_dir(char *buf, size_t len, gp_error *err)
{
    const char *env = getenv("GPSERVE_DATASETS");
    const char *dir = (env != NULL && env[0] != '\0') ? env : "../shared/datasets";
    int w = snprintf(buf, len, "%s", dir);
    if (w < 0 || (size_t)w >= len)
        return gp_error_set(err, GP_EINVAL, NULL, "datasets directory path too long");
    /* drop trailing slashes (but keep "/") */
    size_t l = (size_t)w;
    while (l > 1 && buf[l - 1] == '/')
        buf[--l] = '\0';
    return GP_OK;
}

int gp_datasets_present(char *why, size_t why_len)
{
    char dir[GP_DATASET_PATH_LEN], sub[GP_DATASET_PATH_LEN + 16];
    gp_error err;
    gp_error_clear(&err);
    if (gp_datasets_dir(dir, sizeof dir, &err) != GP_OK) {
        if (why != NULL && why_len > 0)
            snprintf(why, why_len, "%s", err.message);
        return 0;
    }
    struct stat st;
    const char *src = getenv("GPSERVE_DATASETS");
    const char *how = (src != NULL && src[0] != '\0') ? "$GPSERVE_DATASETS" : "default";
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        if (why != NULL && why_len > 0)
            snprintf(why, why_len, "datasets directory %s (%s) not found", dir, how);
        return 0;
    }
    snprintf(sub, sizeof sub, "%s/splits", dir);
    if (stat(sub, &st) != 0 || !S_ISDIR(st.st_mode)) {
        if (why != NULL && why_len > 0)
            snprintf(why, why_len, "datasets directory %s (%s) has no splits/ folder", dir, how);
        return 0;
    }
    if (why != NULL && why_len > 0)
        why[0] = '\0';
    return 1;
}

int gp_dataset_exists(const char *name)
{
    char dir[GP_DATASET_PATH_LEN], path[GP_DATASET_PATH_LEN + 2 * GP_DATASET_NAME_LEN];
    if (!valid_name(name) || gp_datasets_dir(dir, sizeof dir, NULL) != GP_OK)
        return 0;
    if (build_path(path, sizeof path, dir, "", name, ".csv", NULL) != GP_OK)
        return 0;
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* ---- CSV ---- */

void gp_dataset_free(gp_dataset *ds)
{
    if (ds == NULL)
        return;
    free(ds->X);
    free(ds->y);
    memset(ds, 0, sizeof *ds);
}

/* Next whitespace-separated token in [*p, end), or NULL at the end; *p moves
 * past it. */
static const char *next_token(const char **p, const char *end)
{
    while (*p < end && is_space(**p))
        (*p)++;
    if (*p >= end)
        return NULL;
    const char *t = *p;
    while (*p < end && !is_space(**p))
        (*p)++;
    return t;
}

static int parse_csv(const char *path, char *buf, size_t len, gp_dataset *ds, gp_error *err)
{
    size_t pos = 0, start, llen;
    if (!next_line(buf, len, &pos, &start, &llen) || llen == 0)
        return gp_error_set(err, GP_EDATA, NULL, "%s: missing header line", path);
    size_t ncols = 1;
    for (size_t i = 0; i < llen; i++)
        if (buf[start + i] == ',')
            ncols++;
    if (ncols < 2)
        return gp_error_set(err, GP_EDATA, NULL,
                            "%s: header has %zu column; need features and y", path, ncols);
    if (ncols > MAX_COLUMNS)
        return gp_error_set(err, GP_ETOOBIG, NULL, "%s: %zu columns", path, ncols);

    /* Upper bound on data rows: the number of remaining lines. */
    size_t max_rows = 0;
    for (size_t i = pos; i < len; i++)
        if (buf[i] == '\n')
            max_rows++;
    if (len > pos && buf[len - 1] != '\n')
        max_rows++;
    if (max_rows == 0)
        return gp_error_set(err, GP_EDATA, NULL, "%s: no data rows", path);
    if (max_rows > SIZE_MAX / ncols / sizeof(double))
        return gp_error_set(err, GP_ETOOBIG, NULL, "%s: too many values", path);
    double *rm = malloc(max_rows * ncols * sizeof(double)); /* row-major while parsing */
    if (rm == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "%s: out of memory", path);

    size_t n = 0, line_no = 1, blank_line = 0;
    int rc = GP_OK;
    while (next_line(buf, len, &pos, &start, &llen)) {
        line_no++;
        if (llen == 0) {
            if (blank_line == 0)
                blank_line = line_no;
            continue;
        }
        if (blank_line != 0) {
            rc = gp_error_set(err, GP_EDATA, NULL, "%s:%zu: empty line inside the data", path,
                              blank_line);
            break;
        }
        if (n >= max_rows) { /* cannot happen; guard anyway */
            rc = gp_error_set(err, GP_EINTERNAL, NULL, "%s: row count overflow", path);
            break;
        }
        char *line = buf + start;
        line[llen] = '\0'; /* the '\n' or '\r' (or the final NUL) */
        char *p = line;
        size_t col = 0;
        for (;;) {
            char *fe = strchr(p, ','); /* field end */
            char *end_field = fe != NULL ? fe : line + llen;
            if (col >= ncols) {
                rc = gp_error_set(err, GP_EDATA, NULL, "%s:%zu: more than %zu columns", path,
                                  line_no, ncols);
                break;
            }
            char *q = NULL;
            errno = 0;
            double v = strtod(p, &q);
            while (q != NULL && q < end_field && (*q == ' ' || *q == '\t'))
                q++;
            if (q == p || q != end_field) {
                rc = gp_error_set(err, GP_EDATA, NULL, "%s:%zu: column %zu is not a number",
                                  path, line_no, col + 1);
                break;
            }
            if (!isfinite(v)) {
                rc = gp_error_set(err, GP_EDATA, NULL, "%s:%zu: column %zu is not finite",
                                  path, line_no, col + 1);
                break;
            }
            rm[n * ncols + col] = v;
            col++;
            if (fe == NULL)
                break;
            p = fe + 1;
        }
        if (rc != GP_OK)
            break;
        if (col != ncols) {
            rc = gp_error_set(err, GP_EDATA, NULL, "%s:%zu: %zu columns, header has %zu", path,
                              line_no, col, ncols);
            break;
        }
        n++;
    }
    if (rc == GP_OK && n == 0)
        rc = gp_error_set(err, GP_EDATA, NULL, "%s: no data rows", path);
    if (rc != GP_OK) {
        free(rm);
        return rc;
    }
    size_t d = ncols - 1;
    double *X = malloc(n * d * sizeof(double));
    double *y = malloc(n * sizeof(double));
    if (X == NULL || y == NULL) {
        free(X);
        free(y);
        free(rm);
        return gp_error_set(err, GP_ENOMEM, NULL, "%s: out of memory", path);
    }
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < d; j++)
            X[j * n + i] = rm[i * ncols + j];
        y[i] = rm[i * ncols + d];
    }
    free(rm);
    ds->n = n;
    ds->d = d;
    ds->X = X;
    ds->y = y;
    return GP_OK;
}

int gp_dataset_load_file(const char *path, gp_dataset *ds, gp_error *err)
{
    if (ds == NULL || path == NULL)
        return gp_error_set(err, GP_EINVAL, NULL, "gp_dataset_load_file: NULL argument");
    memset(ds, 0, sizeof *ds);
    char *buf;
    size_t len;
    int rc = read_whole_file(path, &buf, &len, err);
    if (rc != GP_OK)
        return rc;
    rc = parse_csv(path, buf, len, ds, err);
    free(buf);
    return rc;
}

int gp_dataset_load(const char *name, gp_dataset *ds, gp_error *err)
{
    if (ds == NULL)
        return gp_error_set(err, GP_EINVAL, NULL, "gp_dataset_load: NULL dataset");
    memset(ds, 0, sizeof *ds);
    if (!valid_name(name))
        return gp_error_set(err, GP_EINVAL, "name", "invalid dataset name '%s'",
                            name != NULL ? name : "(null)");
    char dir[GP_DATASET_PATH_LEN], path[GP_DATASET_PATH_LEN + 2 * GP_DATASET_NAME_LEN];
    int rc = gp_datasets_dir(dir, sizeof dir, err);
    if (rc == GP_OK)
        rc = build_path(path, sizeof path, dir, "", name, ".csv", err);
    if (rc == GP_OK)
        rc = gp_dataset_load_file(path, ds, err);
    if (rc == GP_OK)
        snprintf(ds->name, sizeof ds->name, "%s", name);
    return rc;
}

int gp_dataset_rows(const gp_dataset *ds, const size_t *rows, size_t count, gp_dataset *out,
                    gp_error *err)
{
    if (ds == NULL || out == NULL || (rows == NULL && count > 0))
        return gp_error_set(err, GP_EINVAL, NULL, "gp_dataset_rows: NULL argument");
    memset(out, 0, sizeof *out);
    if (count == 0)
        return gp_error_set(err, GP_EINVAL, NULL, "gp_dataset_rows: no rows");
    for (size_t i = 0; i < count; i++)
        if (rows[i] >= ds->n)
            return gp_error_set(err, GP_EINVAL, NULL, "row index %zu out of range (n = %zu)",
                                rows[i], ds->n);
    if (ds->d > 0 && count > SIZE_MAX / ds->d / sizeof(double))
        return gp_error_set(err, GP_ETOOBIG, NULL, "gp_dataset_rows: too many values");
    double *X = malloc((ds->d > 0 ? count * ds->d : 1) * sizeof(double));
    double *y = malloc(count * sizeof(double));
    if (X == NULL || y == NULL) {
        free(X);
        free(y);
        return gp_error_set(err, GP_ENOMEM, NULL, "gp_dataset_rows: out of memory");
    }
    for (size_t j = 0; j < ds->d; j++)
        for (size_t i = 0; i < count; i++)
            X[j * count + i] = ds->X[j * ds->n + rows[i]];
    for (size_t i = 0; i < count; i++)
        y[i] = ds->y[rows[i]];
    snprintf(out->name, sizeof out->name, "%s", ds->name);
    out->n = count;
    out->d = ds->d;
    out->X = X;
    out->y = y;
    return GP_OK;
}

/* ---- splits ---- */

void gp_split_free(gp_split *sp)
{
    if (sp == NULL)
        return;
    free(sp->train);
    free(sp->test);
    memset(sp, 0, sizeof *sp);
}

/* Build sp from a test-membership mask (1 = test). */
static int split_from_mask(const unsigned char *is_test, size_t n_rows, const char *what,
                           gp_split *sp, gp_error *err)
{
    size_t nt = 0;
    for (size_t i = 0; i < n_rows; i++)
        nt += is_test[i] ? 1 : 0;
    if (nt == 0)
        return gp_error_set(err, GP_EDATA, NULL, "%s: empty test set", what);
    if (nt == n_rows)
        return gp_error_set(err, GP_EDATA, NULL, "%s: empty training set", what);
    sp->test = malloc(nt * sizeof(size_t));
    sp->train = malloc((n_rows - nt) * sizeof(size_t));
    if (sp->test == NULL || sp->train == NULL) {
        gp_split_free(sp);
        return gp_error_set(err, GP_ENOMEM, NULL, "%s: out of memory", what);
    }
    for (size_t i = 0; i < n_rows; i++) {
        if (is_test[i])
            sp->test[sp->n_test++] = i;
        else
            sp->train[sp->n_train++] = i;
    }
    return GP_OK;
}

static int parse_test20(const char *path, const char *buf, size_t len, int k, size_t n_rows,
                        unsigned char *is_test, gp_error *err)
{
    size_t pos = 0, start = 0, llen = 0, line = 0;
    int found = 0;
    while (next_line(buf, len, &pos, &start, &llen)) {
        if ((int)line == k) {
            found = 1;
            break;
        }
        line++;
    }
    if (!found)
        return gp_error_set(err, GP_EINVAL, "split", "%s: no split %d (the file has %zu lines)",
                            path, k, line);
    const char *p = buf + start, *end = buf + start + llen;
    const char *t;
    while ((t = next_token(&p, end)) != NULL) {
        size_t idx;
        if (!parse_index(t, p, &idx))
            return gp_error_set(err, GP_EDATA, NULL, "%s:%d: '%.*s' is not a row index", path,
                                k + 1, (int)(p - t > 40 ? 40 : p - t), t);
        if (idx >= n_rows)
            return gp_error_set(err, GP_EDATA, NULL,
                                "%s:%d: row index %zu out of range (%zu rows)", path, k + 1, idx,
                                n_rows);
        if (is_test[idx])
            return gp_error_set(err, GP_EDATA, NULL, "%s:%d: row index %zu repeated", path,
                                k + 1, idx);
        is_test[idx] = 1;
    }
    return GP_OK;
}

static int parse_fold10(const char *path, const char *buf, size_t len, int k, size_t n_rows,
                        unsigned char *is_test, gp_error *err)
{
    if (k < 0 || k > 9)
        return gp_error_set(err, GP_EINVAL, "split", "fold10 split %d not in 0..9", k);
    const char *p = buf, *end = buf + len;
    size_t row = 0;
    const char *t;
    while ((t = next_token(&p, end)) != NULL) {
        size_t v;
        if (!parse_index(t, p, &v) || v > 9)
            return gp_error_set(err, GP_EDATA, NULL, "%s: entry %zu ('%.*s') is not a fold 0..9",
                                path, row + 1, (int)(p - t > 40 ? 40 : p - t), t);
        if (row >= n_rows)
            return gp_error_set(err, GP_EDATA, NULL, "%s: more entries than the %zu data rows",
                                path, n_rows);
        is_test[row++] = (v == (size_t)k);
    }
    if (row != n_rows)
        return gp_error_set(err, GP_EDATA, NULL, "%s: %zu entries for %zu data rows", path, row,
                            n_rows);
    return GP_OK;
}

int gp_split_load_file(const char *path, const char *scheme, int k, size_t n_rows, gp_split *sp,
                       gp_error *err)
{
    if (sp == NULL || path == NULL || scheme == NULL)
        return gp_error_set(err, GP_EINVAL, NULL, "gp_split_load_file: NULL argument");
    memset(sp, 0, sizeof *sp);
    int is20 = strcmp(scheme, "test20") == 0;
    if (!is20 && strcmp(scheme, "fold10") != 0)
        return gp_error_set(err, GP_EINVAL, "scheme",
                            "split file scheme '%s' is neither test20 nor fold10", scheme);
    if (k < 0)
        return gp_error_set(err, GP_EINVAL, "split", "split number %d is negative", k);
    if (n_rows == 0)
        return gp_error_set(err, GP_EINVAL, NULL, "split of an empty dataset");
    char *buf;
    size_t len;
    int rc = read_whole_file(path, &buf, &len, err);
    if (rc != GP_OK)
        return rc;
    unsigned char *is_test = calloc(n_rows, 1);
    if (is_test == NULL) {
        free(buf);
        return gp_error_set(err, GP_ENOMEM, NULL, "%s: out of memory", path);
    }
    rc = is20 ? parse_test20(path, buf, len, k, n_rows, is_test, err)
              : parse_fold10(path, buf, len, k, n_rows, is_test, err);
    if (rc == GP_OK) {
        char what[GP_DATASET_PATH_LEN + 32];
        snprintf(what, sizeof what, "%s split %d", path, k);
        rc = split_from_mask(is_test, n_rows, what, sp, err);
    }
    free(is_test);
    free(buf);
    return rc;
}

/* The documented fixed splits (README: first rows train, the rest test). */
static const struct {
    const char *name;
    size_t n_rows, n_train;
} fixed_splits[] = {
    {"kin40k", 40000, 10000},
    {"pol", 15000, 10000},
    {"pumadyn32nm", 8192, 7168},
};

int gp_split_load(const char *name, const char *scheme, int k, size_t n_rows, gp_split *sp,
                  gp_error *err)
{
    if (sp == NULL || scheme == NULL)
        return gp_error_set(err, GP_EINVAL, NULL, "gp_split_load: NULL argument");
    memset(sp, 0, sizeof *sp);
    if (!valid_name(name))
        return gp_error_set(err, GP_EINVAL, "name", "invalid dataset name '%s'",
                            name != NULL ? name : "(null)");
    if (strcmp(scheme, "fixed") == 0) {
        for (size_t i = 0; i < sizeof fixed_splits / sizeof fixed_splits[0]; i++) {
            if (strcmp(fixed_splits[i].name, name) != 0)
                continue;
            if (k != 0)
                return gp_error_set(err, GP_EINVAL, "split",
                                    "'%s' has one fixed split (k = 0), not %d", name, k);
            if (n_rows != fixed_splits[i].n_rows)
                return gp_error_set(err, GP_EDATA, NULL,
                                    "'%s' has %zu rows; its fixed split expects %zu", name,
                                    n_rows, fixed_splits[i].n_rows);
            size_t ntr = fixed_splits[i].n_train;
            sp->train = malloc(ntr * sizeof(size_t));
            sp->test = malloc((n_rows - ntr) * sizeof(size_t));
            if (sp->train == NULL || sp->test == NULL) {
                gp_split_free(sp);
                return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
            }
            for (size_t r = 0; r < n_rows; r++) {
                if (r < ntr)
                    sp->train[sp->n_train++] = r;
                else
                    sp->test[sp->n_test++] = r;
            }
            return GP_OK;
        }
        return gp_error_set(err, GP_EINVAL, "scheme",
                            "'%s' has no fixed split (only kin40k, pol, pumadyn32nm)", name);
    }
    if (strcmp(scheme, "test20") != 0 && strcmp(scheme, "fold10") != 0)
        return gp_error_set(err, GP_EINVAL, "scheme",
                            "unknown split scheme '%s' (test20, fold10, fixed)", scheme);
    char dir[GP_DATASET_PATH_LEN], path[GP_DATASET_PATH_LEN + 2 * GP_DATASET_NAME_LEN];
    char suffix[16];
    snprintf(suffix, sizeof suffix, "_%s.txt", scheme);
    int rc = gp_datasets_dir(dir, sizeof dir, err);
    if (rc == GP_OK)
        rc = build_path(path, sizeof path, dir, "splits/", name, suffix, err);
    if (rc == GP_OK)
        rc = gp_split_load_file(path, scheme, k, n_rows, sp, err);
    return rc;
}

int gp_split_subsample_train(gp_split *sp, size_t max_train, uint64_t seed, gp_error *err)
{
    if (sp == NULL)
        return gp_error_set(err, GP_EINVAL, NULL, "gp_split_subsample_train: NULL split");
    if (max_train == 0)
        return gp_error_set(err, GP_EINVAL, NULL, "subsample size must be positive");
    if (sp->n_train <= max_train)
        return GP_OK;
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    size_t n = sp->n_train;
    for (size_t i = 0; i < max_train; i++) {
        size_t j = i + (size_t)gp_rng_below(&rng, (uint64_t)(n - i));
        if (j >= n) /* a broken generator must not write out of bounds */
            return gp_error_set(err, GP_EINTERNAL, NULL, "gp_rng_below out of range");
        size_t t = sp->train[i];
        sp->train[i] = sp->train[j];
        sp->train[j] = t;
    }
    qsort(sp->train, max_train, sizeof(size_t), cmp_size);
    sp->n_train = max_train;
    size_t *shrunk = realloc(sp->train, max_train * sizeof(size_t));
    if (shrunk != NULL)
        sp->train = shrunk;
    return GP_OK;
}

int gp_dataset_load_split(const char *name, const char *scheme, int k, size_t max_train,
                          uint64_t seed, gp_dataset *train, gp_dataset *test, gp_split *sp,
                          gp_error *err)
{
    if (train == NULL || test == NULL)
        return gp_error_set(err, GP_EINVAL, NULL, "gp_dataset_load_split: NULL argument");
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    if (sp != NULL)
        memset(sp, 0, sizeof *sp);
    gp_dataset all;
    gp_split s;
    memset(&s, 0, sizeof s);
    int rc = gp_dataset_load(name, &all, err);
    if (rc != GP_OK)
        return rc;
    rc = gp_split_load(name, scheme, k, all.n, &s, err);
    if (rc == GP_OK && max_train > 0)
        rc = gp_split_subsample_train(&s, max_train, seed, err);
    if (rc == GP_OK)
        rc = gp_dataset_rows(&all, s.train, s.n_train, train, err);
    if (rc == GP_OK)
        rc = gp_dataset_rows(&all, s.test, s.n_test, test, err);
    gp_dataset_free(&all);
    if (rc != GP_OK) {
        gp_dataset_free(train);
        gp_dataset_free(test);
        gp_split_free(&s);
        return rc;
    }
    if (sp != NULL)
        *sp = s;
    else
        gp_split_free(&s);
    return GP_OK;
}

int gp_indices_write(const char *path, const size_t *idx, size_t count, gp_error *err)
{
    if (path == NULL || (idx == NULL && count > 0))
        return gp_error_set(err, GP_EINVAL, NULL, "gp_indices_write: NULL argument");
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return gp_error_set(err, GP_EINVAL, NULL, "cannot create %s: %s", path, strerror(errno));
    int bad = 0;
    for (size_t i = 0; i < count && !bad; i++)
        bad = fprintf(f, i ? " %zu" : "%zu", idx[i]) < 0;
    if (!bad)
        bad = fputc('\n', f) == EOF;
    if (fclose(f) != 0)
        bad = 1;
    if (bad)
        return gp_error_set(err, GP_EINTERNAL, NULL, "error writing %s", path);
    return GP_OK;
}
