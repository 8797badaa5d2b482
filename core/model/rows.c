/* Rows read in chunks and the sums over them: see core/model/rows.h. */
#include "core/model/rows.h"

#include "core/base/rng.h"

int gp_rows_check(const gp_rows *rows, gp_error *err)
{
    if (rows == NULL || rows->read == NULL || rows->d == 0 || rows->chunk == 0 ||
        rows->n > rows->n_total || rows->first > rows->n_total - rows->n)
        return gp_error_set(err, GP_EINVAL, "data",
                            "the rows of the fit are not a shard of the data set");
    return GP_OK;
}

int gp_rows_sum(const gp_rows *rows, double *buf, size_t len, gp_error *err)
{
    if (rows->allreduce == NULL || len == 0)
        return GP_OK;
    return rows->allreduce(rows->reduce_ctx, buf, len, err);
}

/* ---- subsamples by global index ---- */

/* Is v among the sorted first `count` entries of s? */
static int sorted_has(const size_t *s, size_t count, size_t v)
{
    size_t lo = 0, hi = count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s[mid] == v)
            return 1;
        if (s[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

/* Insert v into the sorted array s of count entries (room for one more). */
static void sorted_insert(size_t *s, size_t count, size_t v)
{
    size_t at = count;
    while (at > 0 && s[at - 1] > v) {
        s[at] = s[at - 1];
        at--;
    }
    s[at] = v;
}

int gp_rows_sample_indices(size_t n_total, size_t k, uint64_t seed, size_t *out, gp_error *err)
{
    (void)err;
    if (k >= n_total) {
        for (size_t i = 0; i < n_total; i++)
            out[i] = i;
        return GP_OK;
    }
    /* Floyd: for j = n - k .. n - 1 take t uniform in [0, j]; t if new, else
     * j. Each k-subset is equally likely. The insertion keeps out sorted for
     * the membership test (O(k^2) moves at worst; k is a few thousand). */
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    size_t count = 0;
    for (size_t j = n_total - k; j < n_total; j++) {
        size_t t = (size_t)gp_rng_below(&rng, (uint64_t)j + 1);
        size_t v = sorted_has(out, count, t) ? j : t;
        sorted_insert(out, count, v);
        count++;
    }
    return GP_OK;
}
