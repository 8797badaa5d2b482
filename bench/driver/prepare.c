/* See prepare.h. */
#include "bench/driver/prepare.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"
#include "core/base/rng.h"

#define MAX_LEVELS 16

int gpb_prepare_wanted(const json_t *ds)
{
    const char *scheme = json_string_value(json_object_get(ds, "scheme"));
    return json_object_get(ds, "preprocess") != NULL ||
           json_object_get(ds, "split_file") != NULL ||
           (scheme != NULL && strcmp(scheme, "permutation") == 0);
}

/* Column col (n rows) scaled in place: MinMax to [0, 1] or standardised
 * (population std); a constant column becomes 0. */
static void scale_column(double *col, size_t n, int standard)
{
    double lo = col[0], hi = col[0], mean = 0.0, ss = 0.0;
    for (size_t i = 0; i < n; i++) {
        lo = col[i] < lo ? col[i] : lo;
        hi = col[i] > hi ? col[i] : hi;
        mean += col[i];
    }
    mean /= (double)n;
    for (size_t i = 0; i < n; i++)
        ss += (col[i] - mean) * (col[i] - mean);
    double sd = sqrt(ss / (double)n);
    for (size_t i = 0; i < n; i++) {
        if (standard)
            col[i] = sd > 0.0 ? (col[i] - mean) / sd : 0.0;
        else
            col[i] = hi > lo ? (col[i] - lo) / (hi - lo) : 0.0;
    }
}

/* The distinct values of src (n), ascending, into vals; their count, or 0
 * when there are more than MAX_LEVELS. */
static size_t levels(const double *src, size_t n, double *vals)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        while (j < k && vals[j] != src[i])
            j++;
        if (j == k) {
            if (k == MAX_LEVELS)
                return 0;
            vals[k++] = src[i];
        }
    }
    for (size_t a = 1; a < k; a++) /* insertion sort */
        for (size_t b = a; b > 0 && vals[b - 1] > vals[b]; b--) {
            double t = vals[b];
            vals[b] = vals[b - 1];
            vals[b - 1] = t;
        }
    return k;
}

static int is_one_hot(const json_t *one_hot, size_t j)
{
    size_t i;
    json_t *v;
    json_array_foreach(one_hot, i, v) if (json_is_integer(v) && (size_t)json_integer_value(v) == j)
        return 1;
    return 0;
}

/* X rebuilt: the other columns scaled (standard or MinMax), then the one-hot
 * columns' levels. */
static int design(gp_dataset *ds, const json_t *one_hot, int standard, gp_error *err)
{
    const size_t n = ds->n;
    size_t width = 0, i;
    json_t *v;
    double vals[MAX_LEVELS];
    json_array_foreach(one_hot, i, v)
    {
        json_int_t c = json_integer_value(v);
        size_t k = json_is_integer(v) && c >= 0 && (size_t)c < ds->d
                       ? levels(ds->X + (size_t)c * n, n, vals)
                       : 0;
        if (k == 0)
            return gp_error_set(err, GP_EDATA, "one_hot",
                                "column %lld: not a column with at most %d values",
                                (long long)c, MAX_LEVELS);
        width += k;
    }
    for (size_t j = 0; j < ds->d; j++)
        width += !is_one_hot(one_hot, j);
    double *X = calloc(n * width + 1, sizeof *X);
    if (X == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    size_t out = 0;
    for (size_t j = 0; j < ds->d; j++)
        if (!is_one_hot(one_hot, j)) {
            memcpy(X + out * n, ds->X + j * n, n * sizeof *X);
            scale_column(X + out++ * n, n, standard);
        }
    json_array_foreach(one_hot, i, v)
    {
        const double *src = ds->X + (size_t)json_integer_value(v) * n;
        size_t k = levels(src, n, vals);
        for (size_t l = 0; l < k; l++, out++)
            for (size_t r = 0; r < n; r++)
                X[out * n + r] = src[r] == vals[l] ? 1.0 : 0.0;
    }
    free(ds->X);
    ds->X = X;
    ds->d = width;
    return GP_OK;
}

int gpb_preprocess(const json_t *spec, gp_dataset *ds, double *y_sd, gp_error *err)
{
    *y_sd = 1.0;
    if (spec == NULL)
        return GP_OK;
    const char *x = json_string_value(json_object_get(spec, "x"));
    const char *y = json_string_value(json_object_get(spec, "y"));
    if (x != NULL && strcmp(x, "minmax") != 0 && strcmp(x, "standard") != 0)
        return gp_error_set(err, GP_EINVAL, "preprocess.x", "'%s': minmax or standard", x);
    if (y != NULL && strcmp(y, "standard") != 0)
        return gp_error_set(err, GP_EINVAL, "preprocess.y", "'%s': standard", y);
    if (x != NULL && ds->n > 0) {
        json_t *none = json_array();
        const json_t *oh = json_object_get(spec, "one_hot");
        int rc = design(ds, oh != NULL ? oh : none, strcmp(x, "standard") == 0, err);
        json_decref(none);
        if (rc != GP_OK)
            return rc;
    }
    if (y != NULL && ds->n > 0) {
        double m = 0.0, ss = 0.0;
        for (size_t i = 0; i < ds->n; i++)
            m += ds->y[i];
        m /= (double)ds->n;
        for (size_t i = 0; i < ds->n; i++)
            ss += (ds->y[i] - m) * (ds->y[i] - m);
        *y_sd = sqrt(ss / (double)ds->n);
        for (size_t i = 0; i < ds->n; i++)
            ds->y[i] = (ds->y[i] - m) / *y_sd;
    }
    return GP_OK;
}

int gpb_prepare_all(const json_t *ds, gp_dataset *all, double *y_sd, gp_error *err)
{
    memset(all, 0, sizeof *all);
    int rc = gp_dataset_load(json_string_value(json_object_get(ds, "name")), all, err);
    if (rc == GP_OK)
        rc = gpb_preprocess(json_object_get(ds, "preprocess"), all, y_sd, err);
    return rc;
}

static int compare_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

/* Split k of the permutation scheme (prepare.h). */
static int permutation_split(const json_t *ds, const gp_dataset *all, int k, gp_dataset *train,
                             gp_dataset *test, gp_error *err)
{
    size_t n = all->n;
    double frac = json_number_value(json_object_get(ds, "test_fraction"));
    if (!(frac > 0.0 && frac < 1.0))
        return gp_error_set(err, GP_EINVAL, "test_fraction", "must be in (0, 1)");
    size_t n_test = (size_t)floor(frac * (double)n);
    size_t *perm = malloc((n + 1) * sizeof *perm);
    if (perm == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < n; i++)
        perm[i] = i;
    gp_rng rng;
    gp_rng_seed(&rng, (uint64_t)json_integer_value(json_object_get(ds, "permutation_seed")) *
                          1000u +
                      (uint64_t)k);
    for (size_t i = 0; i + 1 < n; i++) {
        size_t j = i + (size_t)gp_rng_below(&rng, n - i);
        size_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    qsort(perm, n_test, sizeof *perm, compare_size);
    qsort(perm + n_test, n - n_test, sizeof *perm, compare_size);
    int rc = gp_dataset_rows(all, perm, n_test, test, err);
    if (rc == GP_OK)
        rc = gp_dataset_rows(all, perm + n_test, n - n_test, train, err);
    free(perm);
    return rc;
}

int gpb_prepare_split(const json_t *ds, const gp_dataset *all, int k, gp_dataset *train,
                      gp_dataset *test, gp_error *err)
{
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    const char *scheme = json_string_value(json_object_get(ds, "scheme"));
    if (scheme != NULL && strcmp(scheme, "permutation") == 0)
        return permutation_split(ds, all, k, train, test, err);
    gp_split sp;
    memset(&sp, 0, sizeof sp);
    const char *file = json_string_value(json_object_get(ds, "split_file"));
    scheme = scheme != NULL ? scheme : "test20";
    int rc = file != NULL ? gp_split_load_file(file, scheme, k, all->n, &sp, err)
                          : gp_split_load(all->name, scheme, k, all->n, &sp, err);
    if (rc == GP_OK)
        rc = gp_dataset_rows(all, sp.test, sp.n_test, test, err);
    if (rc == GP_OK)
        rc = gp_dataset_rows(all, sp.train, sp.n_train, train, err);
    gp_split_free(&sp);
    return rc;
}
