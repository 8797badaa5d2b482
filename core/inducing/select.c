/* gpserve core: choosing the inducing inputs Z (see core/inducing/inducing.h).
 *
 *   greedy  pivoted Cholesky of Kff: the n x M partial factor and the
 *           residual diagonal, one kernel column k(X, x_p) per pivot.
 *   random  distinct input values (found by sorting the point indices
 *           lexicographically), then a partial Fisher-Yates shuffle of them.
 *   kmeans  k-means++ seeding on the distinct values, then Lloyd iterations
 *           over all n points (duplicates weigh as often as they occur). The
 *           assignment runs over fixed point blocks through gp_parallel_for;
 *           a dgemm screens the centres and each point's nearest centre is
 *           then decided by exact sums of squared differences (ties: lowest
 *           centre index), so the result does not depend on the thread count
 *           or on BLAS rounding.
 *
 * Two points are the same value when all their coordinates compare equal. */
#include "core/inducing/select.h"

#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/parallel.h"
#include "core/base/rng.h"
#include "core/linalg/linalg.h"

#define GREEDY_REL_TOL 1e-12
#define KMEANS_MAX_ITER 100
#define KMEANS_BLOCK 1024 /* points per assignment task (fixed: thread-count free) */
#define KMEANS_SCRATCH 262144 /* doubles of dot products per dgemm */

static const char *const selection_names[] = {"greedy", "kmeans", "random"};
#define N_SELECTIONS (sizeof selection_names / sizeof selection_names[0])

int gp_inducing_selection_from_name(const char *name)
{
    if (name == NULL)
        return -1;
    for (size_t s = 0; s < N_SELECTIONS; s++)
        if (strcmp(name, selection_names[s]) == 0)
            return (int)s;
    return -1;
}

const char *gp_inducing_selection_name(gp_inducing_selection s)
{
    return (unsigned)s < N_SELECTIONS ? selection_names[s] : NULL;
}

/* ------------------------------------------------------------------------ */
/* distinct values                                                            */

/* Lexicographic order of points a and b (d coordinates each), then index. */
static int point_cmp(const double *X, size_t d, size_t a, size_t b)
{
    const double *pa = X + a * d, *pb = X + b * d;
    for (size_t c = 0; c < d; c++) {
        if (pa[c] < pb[c])
            return -1;
        if (pa[c] > pb[c])
            return 1;
    }
    return 0;
}

/* Stable bottom-up merge sort of idx (n entries) by point value. */
static void sort_points(const double *X, size_t d, size_t *idx, size_t *tmp, size_t n)
{
    size_t *src = idx, *dst = tmp;
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi)
                dst[o++] = point_cmp(X, d, src[j], src[i]) < 0 ? src[j++] : src[i++];
            while (i < mid)
                dst[o++] = src[i++];
            while (j < hi)
                dst[o++] = src[j++];
        }
        size_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != idx)
        memcpy(idx, src, n * sizeof *idx);
}

/* The lowest index of every distinct value, in increasing index order, into
 * out (n entries); returns how many. */
static int distinct_points(const double *X, size_t n, size_t d, size_t *out, size_t *count,
                           gp_error *err)
{
    size_t *idx = malloc(n * sizeof *idx), *tmp = malloc(n * sizeof *tmp);
    unsigned char *first = calloc(n, 1);
    if (idx == NULL || tmp == NULL || first == NULL) {
        free(idx);
        free(tmp);
        free(first);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory sorting %zu points", n);
    }
    for (size_t i = 0; i < n; i++)
        idx[i] = i;
    sort_points(X, d, idx, tmp, n);
    /* Stable: the first of each run of equal values has the lowest index. */
    for (size_t r = 0; r < n; r++)
        if (r == 0 || point_cmp(X, d, idx[r - 1], idx[r]) != 0)
            first[idx[r]] = 1;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (first[i])
            out[m++] = i;
    *count = m;
    free(idx);
    free(tmp);
    free(first);
    return GP_OK;
}

static double sqdist(const double *a, const double *b, size_t d)
{
    double s = 0.0;
    for (size_t c = 0; c < d; c++) {
        double t = a[c] - b[c];
        s += t * t;
    }
    return s;
}

/* ------------------------------------------------------------------------ */
/* greedy: pivoted Cholesky                                                   */

static int select_greedy(const gp_kernel *k, const double *X, size_t n, size_t d, size_t M,
                         double *Z, size_t *m_out, gp_error *err)
{
    size_t mm = M < n ? M : n, size;
    int rc = gp_checked_size(n, mm, &size, err);
    if (rc != GP_OK)
        return rc;
    double *L = gp_alloc_doubles(size, err);
    double *res = gp_alloc_doubles(n, err);
    gp_kernel_points *Xp = NULL;
    if (L == NULL || res == NULL) {
        rc = err ? err->code : GP_ENOMEM;
        goto done;
    }
    rc = gp_kernel_points_new(k, X, n, &Xp, err);
    if (rc != GP_OK)
        goto done;
    double vmax = 0.0;
    for (size_t i = 0; i < n; i++) {
        res[i] = gp_kernel_diag(k, X + i * d);
        if (!isfinite(res[i]) || res[i] < 0.0) {
            rc = gp_error_set(err, GP_EDATA, "X", "prior variance k(x, x) = %g at point %zu",
                              res[i], i);
            goto done;
        }
        if (res[i] > vmax)
            vmax = res[i];
    }
    if (!(vmax > 0.0)) {
        rc = gp_error_set(err, GP_EDATA, "X", "the prior variance is zero at every point");
        goto done;
    }
    double tol = GREEDY_REL_TOL * vmax;
    size_t m = 0;
    for (; m < mm; m++) {
        size_t p = 0;
        for (size_t i = 1; i < n; i++) /* strict: ties go to the lowest index */
            if (res[i] > res[p])
                p = i;
        if (!(res[p] >= tol)) /* the largest residual below tol: stop */
            break;
        double *col = L + m * n;
        gp_kernel_cross_points(k, Xp, X + p * d, 1, col, n);
        if (m > 0)
            cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)n, (blasint)m, -1.0, L,
                        (blasint)n, L + p, (blasint)n, 1.0, col, 1);
        double piv = sqrt(res[p]);
        for (size_t i = 0; i < n; i++) {
            col[i] /= piv;
            double r = res[i] - col[i] * col[i];
            res[i] = r > 0.0 ? r : 0.0;
        }
        res[p] = 0.0;
        memcpy(Z + m * d, X + p * d, d * sizeof *Z);
    }
    *m_out = m;
done:
    gp_kernel_points_free(Xp);
    free(L);
    free(res);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* random                                                                     */

static int select_random(const double *X, size_t n, size_t d, size_t M, uint64_t seed, double *Z,
                         size_t *m_out, gp_error *err)
{
    size_t *u = malloc(n * sizeof *u), nd;
    if (u == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory for %zu indices", n);
    int rc = distinct_points(X, n, d, u, &nd, err);
    if (rc != GP_OK) {
        free(u);
        return rc;
    }
    size_t m = M < nd ? M : nd;
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    for (size_t j = 0; j < m; j++) { /* partial Fisher-Yates */
        size_t r = j + (size_t)gp_rng_below(&rng, (uint64_t)(nd - j));
        size_t t = u[j];
        u[j] = u[r];
        u[r] = t;
        memcpy(Z + j * d, X + u[j] * d, d * sizeof *Z);
    }
    *m_out = m;
    free(u);
    return GP_OK;
}

/* ------------------------------------------------------------------------ */
/* kmeans                                                                     */

typedef struct assign_task {
    const double *X, *C;
    const double *cnorm; /* ||c||^2 of every centre */
    double cnorm_max;
    size_t n, d, m;
    size_t *assign; /* out: the nearest centre */
    double *dist;   /* out: squared distance to it */
} assign_task;

/* Exact nearest centre of x (lowest index on ties) by direct sums. */
static size_t nearest_exact(const double *x, const double *C, size_t d, size_t m, double *bd)
{
    size_t best = 0;
    double b = sqdist(x, C, d);
    for (size_t c = 1; c < m; c++) {
        double s = sqdist(x, C + c * d, d);
        if (s < b) {
            b = s;
            best = c;
        }
    }
    *bd = b;
    return best;
}

/* Point i from its row g of centre dot products. */
static void assign_point(const assign_task *a, size_t i, const double *g)
{
    size_t d = a->d, m = a->m;
    const double *x = a->X + i * d;
    double xn = 0.0;
    for (size_t q = 0; q < d; q++)
        xn += x[q] * x[q];
    double emin = INFINITY;
    for (size_t c = 0; c < m; c++) {
        double e = xn + a->cnorm[c] - 2.0 * g[c];
        if (e < emin)
            emin = e;
    }
    /* twice a generous bound on the rounding of one screened distance */
    double margin = 2.0 * 8.0 * (double)(d + 4) * DBL_EPSILON * (xn + a->cnorm_max);
    size_t best = m;
    double bd = INFINITY;
    for (size_t c = 0; c < m; c++) {
        if (!(xn + a->cnorm[c] - 2.0 * g[c] <= emin + margin))
            continue;
        double s = sqdist(x, a->C + c * d, d);
        if (s < bd) {
            bd = s;
            best = c;
        }
    }
    if (best == m) /* NaN from BLAS: cannot happen for finite data */
        best = nearest_exact(x, a->C, d, m, &bd);
    a->assign[i] = best;
    a->dist[i] = bd;
}

/* Points [t * KMEANS_BLOCK, ...). A dgemm gives ||x||^2 + ||c||^2 - 2 x.c
 * for every centre; those within twice its rounding bound of the smallest
 * are the candidates (every exact minimiser among them), and the exact
 * squared distances decide among them, lowest index on ties. So the answer
 * is the exact one whatever BLAS does with its rounding. */
static void assign_run(void *ctx, size_t t)
{
    const assign_task *a = ctx;
    size_t lo = t * KMEANS_BLOCK, hi = lo + KMEANS_BLOCK < a->n ? lo + KMEANS_BLOCK : a->n;
    size_t d = a->d, m = a->m;
    /* Sub-blocks keep the scratch near KMEANS_SCRATCH doubles however large m is. */
    size_t sub = KMEANS_SCRATCH / m > 0 ? KMEANS_SCRATCH / m : 1;
    if (sub > hi - lo)
        sub = hi - lo;
    double *G = malloc(sub * m * sizeof *G);
    if (G == NULL) { /* slow but exact */
        for (size_t i = lo; i < hi; i++)
            a->assign[i] = nearest_exact(a->X + i * d, a->C, d, m, &a->dist[i]);
        return;
    }
    for (size_t s0 = lo; s0 < hi; s0 += sub) {
        size_t b = s0 + sub < hi ? sub : hi - s0;
        cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, (blasint)m, (blasint)b, (blasint)d,
                    1.0, a->C, (blasint)d, a->X + s0 * d, (blasint)d, 0.0, G, (blasint)m);
        for (size_t i = s0; i < s0 + b; i++)
            assign_point(a, i, G + (i - s0) * m);
    }
    free(G);
}

/* Assign every point; returns how many assignments changed. */
static size_t kmeans_assign(assign_task *a, size_t *prev, double *cnorm)
{
    memcpy(prev, a->assign, a->n * sizeof *prev);
    a->cnorm_max = 0.0;
    for (size_t c = 0; c < a->m; c++) {
        cnorm[c] = 0.0;
        for (size_t q = 0; q < a->d; q++)
            cnorm[c] += a->C[c * a->d + q] * a->C[c * a->d + q];
        if (cnorm[c] > a->cnorm_max)
            a->cnorm_max = cnorm[c];
    }
    a->cnorm = cnorm;
    gp_blas_serial_begin(); /* the tasks call BLAS concurrently */
    gp_parallel_for((a->n + KMEANS_BLOCK - 1) / KMEANS_BLOCK, assign_run, a);
    gp_blas_serial_end();
    size_t changed = 0;
    for (size_t i = 0; i < a->n; i++)
        changed += prev[i] != a->assign[i];
    return changed;
}

/* k-means++ on the nd distinct points u: m centres into C. Returns how many
 * (fewer only if the remaining distances all underflow to zero). */
static size_t kmeans_seed(const double *X, size_t d, const size_t *u, size_t nd, size_t m,
                          uint64_t seed, double *C, double *mind)
{
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    size_t p = u[gp_rng_below(&rng, (uint64_t)nd)];
    memcpy(C, X + p * d, d * sizeof *C);
    for (size_t r = 0; r < nd; r++)
        mind[r] = sqdist(X + u[r] * d, C, d);
    size_t k = 1;
    for (; k < m; k++) {
        double total = 0.0;
        for (size_t r = 0; r < nd; r++)
            total += mind[r];
        if (!(total > 0.0))
            break;
        double target = gp_rng_uniform(&rng) * total, cum = 0.0;
        size_t pick = nd, last = nd;
        for (size_t r = 0; r < nd; r++) {
            if (mind[r] <= 0.0)
                continue;
            last = r;
            cum += mind[r];
            if (cum > target) {
                pick = r;
                break;
            }
        }
        if (pick == nd) /* rounding at the top end */
            pick = last;
        double *c = C + k * d;
        memcpy(c, X + u[pick] * d, d * sizeof *C);
        for (size_t r = 0; r < nd; r++) {
            double s = sqdist(X + u[r] * d, c, d);
            if (s < mind[r])
                mind[r] = s;
        }
    }
    return k;
}

/* Centres = means of their clusters; an empty cluster is moved to the point
 * farthest from its centre. Returns how many were re-seeded. */
static size_t kmeans_update(assign_task *a, double *C, double *sums, size_t *counts)
{
    size_t d = a->d, m = a->m, n = a->n;
    memset(sums, 0, d * m * sizeof *sums);
    memset(counts, 0, m * sizeof *counts);
    for (size_t i = 0; i < n; i++) {
        size_t c = a->assign[i];
        counts[c]++;
        for (size_t q = 0; q < d; q++)
            sums[c * d + q] += a->X[i * d + q];
    }
    size_t reseeded = 0;
    for (size_t c = 0; c < m; c++) {
        if (counts[c] > 0) {
            for (size_t q = 0; q < d; q++)
                C[c * d + q] = sums[c * d + q] / (double)counts[c];
            continue;
        }
        size_t far = 0;
        for (size_t i = 1; i < n; i++)
            if (a->dist[i] > a->dist[far])
                far = i;
        if (!(a->dist[far] > 0.0))
            continue; /* every point sits on a centre: nothing to move to */
        memcpy(C + c * d, a->X + far * d, d * sizeof *C);
        /* The points it now covers (its duplicates included) are no longer far. */
        for (size_t i = 0; i < n; i++) {
            double s = sqdist(a->X + i * d, C + c * d, d);
            if (s < a->dist[i])
                a->dist[i] = s;
        }
        reseeded++;
    }
    return reseeded;
}

static int select_kmeans(const double *X, size_t n, size_t d, size_t M, uint64_t seed, double *Z,
                         size_t *m_out, gp_error *err)
{
    size_t *u = malloc(n * sizeof *u), *assign = malloc(n * sizeof *assign);
    size_t *prev = malloc(n * sizeof *prev), *counts = NULL, nd, sz;
    double *dist = gp_alloc_doubles(n, err), *sums = NULL;
    int rc = GP_OK;
    if (u == NULL || assign == NULL || prev == NULL || dist == NULL) {
        rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory for k-means on %zu points", n);
        goto done;
    }
    rc = distinct_points(X, n, d, u, &nd, err);
    if (rc != GP_OK)
        goto done;
    size_t m = M < nd ? M : nd;
    rc = gp_checked_size(d, m, &sz, err);
    if (rc != GP_OK)
        goto done;
    sums = gp_alloc_doubles(sz + m, err); /* then the m centre norms */
    counts = malloc(m * sizeof *counts);
    if (sums == NULL || counts == NULL) {
        rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory for %zu centres", m);
        goto done;
    }
    /* dist doubles as the seeding's distance to the nearest centre (nd <= n). */
    m = kmeans_seed(X, d, u, nd, m, seed, Z, dist);
    for (size_t i = 0; i < n; i++)
        assign[i] = 0;
    assign_task a = {.X = X, .C = Z, .n = n, .d = d, .m = m, .assign = assign, .dist = dist};
    kmeans_assign(&a, prev, sums + sz);
    for (int it = 0; it < KMEANS_MAX_ITER; it++) {
        size_t reseeded = kmeans_update(&a, Z, sums, counts);
        size_t changed = kmeans_assign(&a, prev, sums + sz);
        if (changed == 0 && reseeded == 0)
            break;
    }
    *m_out = m;
done:
    free(u);
    free(assign);
    free(prev);
    free(counts);
    free(dist);
    free(sums);
    return rc;
}

/* ------------------------------------------------------------------------ */

int gp_inducing_select(gp_inducing_selection sel, const gp_kernel *k, const double *X, size_t n,
                       size_t d, size_t M, uint64_t seed, double *Z, size_t *m_out,
                       gp_error *err)
{
    if ((unsigned)sel >= N_SELECTIONS)
        return gp_error_set(err, GP_EINVAL, "options.inducing_selection",
                            "unknown inducing selection %d", (int)sel);
    if (M < 1)
        return gp_error_set(err, GP_EINVAL, "options.inducing",
                            "need at least 1 inducing point");
    if (n < 1)
        return gp_error_set(err, GP_EINVAL, "X", "need at least 1 point to choose from");
    if (d < 1)
        return gp_error_set(err, GP_EINVAL, "X", "input dimension must be at least 1");
    if (X == NULL || Z == NULL || m_out == NULL)
        return gp_error_set(err, GP_EINVAL, NULL, "X, Z and m_out are required");
    if (sel == GP_INDUCING_GREEDY && k == NULL)
        return gp_error_set(err, GP_EINVAL, "kernel", "greedy selection needs a kernel");
    if (sel == GP_INDUCING_GREEDY && k->input_dim != d)
        return gp_error_set(err, GP_EDATA, "X",
                            "points have %zu dimensions, the kernel expects %zu", d,
                            k->input_dim);
    size_t count, bad;
    int rc = gp_checked_size(d, n, &count, err);
    if (rc != GP_OK)
        return rc;
    if (!gp_all_finite(X, count, &bad))
        return gp_error_set(err, GP_EDATA, "X", "non-finite value in point %zu", bad / d);
    *m_out = 0;
    switch (sel) {
    case GP_INDUCING_GREEDY: return select_greedy(k, X, n, d, M, Z, m_out, err);
    case GP_INDUCING_RANDOM: return select_random(X, n, d, M, seed, Z, m_out, err);
    case GP_INDUCING_KMEANS: return select_kmeans(X, n, d, M, seed, Z, m_out, err);
    }
    return gp_error_set(err, GP_EINTERNAL, NULL, "unreachable selection");
}
