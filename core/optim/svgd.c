/* gpserve core: the SVGD particle step (see svgd.h, docs/methods/stein-random-features.md §2).
 *
 * One step costs one n x n kernel: the pair distances come from a Gram
 * matrix (dsyrk) rather than an O(n^2 d) double loop, the attraction and
 * repulsion sums and the kernel row sums from one dsymm against [G | P | 1],
 * the TOTAL median bandwidth from quickselect on a reused buffer and the
 * PER_DIM ones from the sorted coordinates (gp_median_pair_sqdiff), one
 * dimension per parallel task. Everything is a fixed sequence of BLAS calls,
 * serial loops and gp_parallel_for loops whose tasks (fixed by n and d) write
 * disjoint outputs, so the result does not depend on gp_parallel_threads(). */
#include "core/optim/svgd.h"

#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/parallel.h"
#include "core/linalg/fastmath.h"
#include "core/linalg/linalg.h"

/* Column ranges of the kernel's exp loop: a constant, so the split depends
 * only on n (and each entry is computed on its own anyway). */
#define EXP_PARTS 8

struct gp_svgd_work {
    size_t n, d;
    double *K;    /* n x n: Gram, then distances, then kernel (lower triangle used) */
    double *pair; /* n(n-1)/2 pair values for the medians */
    double *S;    /* n x d scaled particles (PER_DIM) */
    double *med;  /* n x d: one sort buffer per dimension (PER_DIM medians as parallel tasks) */
    double *B;    /* n x (2d + 1): [G | P | 1] */
    double *C;    /* n x (2d + 1): K B */
    double *sq;   /* n squared norms */
    double *hk;   /* d bandwidths of the current step */
};

void gp_svgd_default_options(gp_svgd_options *opt)
{
    opt->bandwidth = GP_SVGD_BANDWIDTH_TOTAL;
    opt->bandwidth_scale = 1.0;
    opt->min_bandwidth = 1e-12;
    opt->attraction = 1.0;
    opt->repulsion = 1.0;
    opt->normalize_rowsum = 0;
    opt->divisor = 0.0;
}

void gp_svgd_work_free(gp_svgd_work *w)
{
    if (w == NULL)
        return;
    free(w->K);
    free(w->pair);
    free(w->S);
    free(w->med);
    free(w->B);
    free(w->C);
    free(w->sq);
    free(w->hk);
    free(w);
}

int gp_svgd_work_new(size_t n, size_t d, gp_svgd_work **out, gp_error *err)
{
    *out = NULL;
    if (n == 0 || d == 0)
        return gp_error_set(err, GP_EINVAL, NULL, "SVGD needs n >= 1 particles and d >= 1 (got %zu, %zu)",
                            n, d);
    size_t nn = 0, nd = 0, nb = 0;
    int rc = gp_checked_size(n, n, &nn, err);
    if (rc == GP_OK)
        rc = gp_checked_size(n, d, &nd, err);
    if (rc == GP_OK)
        rc = gp_checked_size(n, 2 * d + 1, &nb, err);
    if (rc != GP_OK)
        return rc;
    gp_svgd_work *w = calloc(1, sizeof *w);
    if (w == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "cannot allocate the SVGD workspace");
    w->n = n;
    w->d = d;
    size_t npair = n * (n - 1) / 2;
    w->K = gp_alloc_doubles(nn, err);
    w->pair = gp_alloc_doubles(npair > 0 ? npair : 1, err);
    w->S = gp_alloc_doubles(nd, err);
    w->med = gp_alloc_doubles(nd, err);
    w->B = gp_alloc_doubles(nb, err);
    w->C = gp_alloc_doubles(nb, err);
    w->sq = gp_alloc_doubles(n, err);
    w->hk = gp_alloc_doubles(d, err);
    if (!w->K || !w->pair || !w->S || !w->med || !w->B || !w->C || !w->sq || !w->hk) {
        gp_svgd_work_free(w);
        return gp_error_set(err, GP_ENOMEM, NULL, "cannot allocate the SVGD workspace (n = %zu)", n);
    }
    *out = w;
    return GP_OK;
}

/* ---- selection ---------------------------------------------------------- */

static void swap_d(double *a, double *b)
{
    double t = *a;
    *a = *b;
    *b = t;
}

/* Rearrange a[0..m-1] so that a[k] is the k-th smallest (0-based), with
 * a[0..k-1] <= a[k] <= a[k+1..m-1]. Median-of-three pivots with a Hoare
 * partition: deterministic, O(m) expected on the pair distances seen here. */
static double select_kth(double *a, size_t m, size_t k)
{
    size_t lo = 0, hi = m - 1;
    while (hi > lo) {
        size_t mid = lo + (hi - lo) / 2;
        if (a[mid] < a[lo])
            swap_d(&a[mid], &a[lo]);
        if (a[hi] < a[lo])
            swap_d(&a[hi], &a[lo]);
        if (a[hi] < a[mid])
            swap_d(&a[hi], &a[mid]);
        double pivot = a[mid];
        size_t i = lo, j = hi;
        for (;;) {
            while (a[i] < pivot)
                i++;
            while (pivot < a[j])
                j--;
            if (i >= j)
                break;
            swap_d(&a[i], &a[j]);
            i++;
            j--;
        }
        /* Now a[lo..j] <= pivot <= a[j+1..hi]. */
        if (k <= j)
            hi = j;
        else
            lo = j + 1;
    }
    return a[k];
}

/* The k-th and (k+1)-th smallest (0-based) of a[0..m-1], k + 1 < m. */
static void select_two(double *a, size_t m, size_t k, double *first, double *second)
{
    *first = select_kth(a, m, k);
    double s = a[k + 1];
    for (size_t i = k + 2; i < m; i++)
        if (a[i] < s)
            s = a[i];
    *second = s;
}

#define SELECT_SAMPLE 8192
#define SELECT_MIN_FAST (8 * SELECT_SAMPLE)

/* The k-th smallest of a[0..m-1] (0-based; the (k+1)-th too when second is
 * not NULL), a destroyed. Quickselect over half a million pair distances
 * per SVGD step was the step's largest cost, so large arrays go through a
 * sample first: an evenly spaced sample brackets the wanted rank with a wide
 * margin, one branch-free pass counts the values below and inside the
 * bracket, and when the rank is inside, a second pass compacts those few
 * values and quickselect runs on them alone. If the bracket misses (or no
 * sample buffer), plain quickselect on the whole array: same answer, just
 * slower. Deterministic: the sample does not depend on anything random. */
static void select_ranks(double *a, size_t m, size_t k, double *first, double *second)
{
    int two = second != NULL;
    double *smp = m >= SELECT_MIN_FAST ? malloc(SELECT_SAMPLE * sizeof(double)) : NULL;
    if (smp != NULL) {
        size_t S = SELECT_SAMPLE;
        for (size_t i = 0; i < S; i++)
            smp[i] = a[(size_t)(((double)i + 0.5) * (double)m / (double)S)];
        /* Sample rank of the target and a margin of ~6 standard deviations
         * of a sample quantile (sqrt(S/4) = 45 ranks). */
        double q = (double)k / (double)m * (double)S;
        double margin = 280.0;
        size_t rlo = q - margin > 0.0 ? (size_t)(q - margin) : 0;
        size_t rhi = q + margin < (double)(S - 1) ? (size_t)(q + margin) : S - 1;
        double lo = select_kth(smp, S, rlo);
        double hi = select_kth(smp, S, rhi);
        free(smp);
        size_t below = 0, inside = 0;
        for (size_t i = 0; i < m; i++) {
            below += a[i] < lo;
            inside += (a[i] >= lo) & (a[i] <= hi);
        }
        if (below <= k && k + (size_t)two < below + inside) {
            size_t c = 0;
            for (size_t i = 0; i < m; i++)
                if (a[i] >= lo && a[i] <= hi)
                    a[c++] = a[i];
            if (two)
                select_two(a, c, k - below, first, second);
            else
                *first = select_kth(a, c, k - below);
            return;
        }
    }
    if (two)
        select_two(a, m, k, first, second);
    else
        *first = select_kth(a, m, k);
}

/* Median of the n(n-1)/2 values in u (destroyed) as the multiset of all n^2
 * ordered pairs would have it (with_self) or of the values themselves. The
 * with_self multiset is n zeros plus every value twice (docs/methods/stein-random-features.md §2.2), so its
 * rank r (1-based) is 0 for r <= n and u_(ceil((r - n) / 2)) above. */
static double median_of_pairs(double *u, size_t n, int with_self)
{
    size_t m = n * (n - 1) / 2;
    if (m == 0)
        return 0.0;
    if (!with_self) {
        double a = 0.0, b = 0.0;
        if (m % 2) {
            select_ranks(u, m, m / 2, &a, NULL);
            return a;
        }
        select_ranks(u, m, m / 2 - 1, &a, &b);
        return 0.5 * (a + b);
    }
    size_t N = n * n;
    size_t r1 = N % 2 ? (N + 1) / 2 : N / 2, r2 = N % 2 ? r1 : r1 + 1;
    double v[2] = {0.0, 0.0};
    size_t ranks[2] = {r1, r2};
    /* Both ranks map to u-ranks q1 <= q2 with q2 <= q1 + 1. */
    size_t q[2] = {0, 0};
    for (int t = 0; t < 2; t++)
        q[t] = ranks[t] <= n ? 0 : (ranks[t] - n + 1) / 2; /* 1-based; 0 means a zero */
    if (q[0] == 0 && q[1] == 0)
        return 0.0;
    if (q[0] == 0) {
        select_ranks(u, m, q[1] - 1, &v[1], NULL);
    } else if (q[1] == q[0]) {
        select_ranks(u, m, q[0] - 1, &v[0], NULL);
        v[1] = v[0];
    } else {
        select_ranks(u, m, q[0] - 1, &v[0], &v[1]);
    }
    return 0.5 * (v[0] + v[1]);
}

/* ---- the PER_DIM median: sort and count ----------------------------------- */

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* Pairs a < b of the sorted w[0..n-1] with w[b] - w[a] <= t (t >= 0). The
 * rounded difference fl(w[b] - w[a]) is non-decreasing in b and
 * non-increasing in a, so the first a that qualifies for b only moves
 * forward as b grows: O(n). */
static size_t count_diffs_le(const double *w, size_t n, double t)
{
    size_t count = 0, a = 0;
    for (size_t b = 1; b < n; b++) {
        while (w[b] - w[a] > t)
            a++;
        count += b - a;
    }
    return count;
}

/* The rank-th smallest (1-based, 1 <= rank <= n(n-1)/2) of the differences
 * fl(w[b] - w[a]), a < b, of the sorted w. Non-negative doubles order like
 * their bit patterns, and count_diffs_le steps up only at the differences
 * themselves, so the smallest pattern t with count(t) >= rank, found by
 * bisection over the patterns (at most 64 counts), is that difference
 * exactly. */
static double kth_sorted_diff(const double *w, size_t n, size_t rank)
{
    uint64_t lo = 0, hi = gp_double_bits(w[n - 1] - w[0]);
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (count_diffs_le(w, n, gp_bits_double(mid)) >= rank)
            hi = mid;
        else
            lo = mid + 1;
    }
    return gp_bits_double(lo);
}

/* The rank-th smallest (1-based) of the squared pair differences: IEEE
 * subtraction is antisymmetric, so (v_a - v_b)^2 over the original pairs is
 * the multiset of fl(w[b] - w[a])^2 over the sorted ones, and squaring a
 * non-negative value is monotone, so it commutes with taking order
 * statistics. */
static double kth_sqdiff(const double *w, size_t n, size_t rank)
{
    double t = kth_sorted_diff(w, n, rank);
    return t * t;
}

/* The median of the squared pair differences with median_of_pairs's ranks
 * and arithmetic (the same result bit for bit), from the sorted values in
 * O(n log n) (a sort and at most 2 x 64 linear counts) instead of
 * selecting among n(n-1)/2 pair values. buf holds n doubles. */
double gp_median_pair_sqdiff(const double *v, size_t n, size_t stride, int with_self,
                             double *buf)
{
    size_t m = n * (n - 1) / 2;
    if (m == 0)
        return 0.0;
    for (size_t a = 0; a < n; a++)
        buf[a] = v[a * stride];
    qsort(buf, n, sizeof *buf, cmp_double);
    if (!with_self) {
        if (m % 2)
            return kth_sqdiff(buf, n, m / 2 + 1);
        return 0.5 * (kth_sqdiff(buf, n, m / 2) + kth_sqdiff(buf, n, m / 2 + 1));
    }
    /* As in median_of_pairs: ranks r1 <= r2 of the n^2 ordered pairs map to
     * 1-based ranks q of the unordered values, 0 standing for a zero. */
    size_t N = n * n;
    size_t r1 = N % 2 ? (N + 1) / 2 : N / 2, r2 = N % 2 ? r1 : r1 + 1;
    size_t q1 = r1 <= n ? 0 : (r1 - n + 1) / 2, q2 = r2 <= n ? 0 : (r2 - n + 1) / 2;
    if (q1 == 0 && q2 == 0)
        return 0.0;
    if (q1 == 0)
        return 0.5 * (0.0 + kth_sqdiff(buf, n, q2));
    double v1 = kth_sqdiff(buf, n, q1);
    double v2 = q2 == q1 ? v1 : kth_sqdiff(buf, n, q2);
    return 0.5 * (v1 + v2);
}

/* ---- the direction -------------------------------------------------------- */

/* K (lower triangle, ld n) <- pairwise squared distances of the rows of X
 * (n x d, ld n), from the Gram matrix; rounding can make a distance slightly
 * negative, so it is clamped at 0. */
static void pair_sqdist(const double *X, size_t n, size_t d, double *K, double *sq,
                        double *pair)
{
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (int)n, (int)d, 1.0, X, (int)n, 0.0, K,
                (int)n);
    for (size_t i = 0; i < n; i++)
        sq[i] = K[i + i * n];
    for (size_t j = 0; j < n; j++) {
        double *col = K + j * n;
        double sj = sq[j];
        col[j] = 0.0;
        for (size_t i = j + 1; i < n; i++) {
            double t = sq[i] + sj - 2.0 * col[i];
            col[i] = t > 0.0 ? t : 0.0;
        }
        /* The copy the median destroys (TOTAL rule), while the column is hot. */
        if (pair != NULL) {
            memcpy(pair, col + j + 1, (n - j - 1) * sizeof(double));
            pair += n - j - 1;
        }
    }
}

static double clamp_bw(double h, const gp_svgd_options *opt)
{
    double v = h * opt->bandwidth_scale;
    double lo = opt->min_bandwidth > 0.0 ? opt->min_bandwidth : 0.0;
    return v > lo ? v : lo;
}

/* PER_DIM: the median of one dimension (its own n-double buffer), the
 * bandwidth and the scaled column. Dimensions are independent tasks. */
typedef struct perdim_task {
    const double *P;
    size_t n;
    const gp_svgd_options *opt;
    gp_svgd_work *w;
} perdim_task;

static void perdim_bandwidth(void *ctx, size_t k)
{
    const perdim_task *t = ctx;
    size_t n = t->n;
    gp_svgd_work *w = t->w;
    const double *p = t->P + k * n;
    double hk = clamp_bw(gp_median_pair_sqdiff(p, n, 1, 1, w->med + k * n), t->opt);
    double s = 1.0 / sqrt(hk);
    for (size_t i = 0; i < n; i++)
        w->S[i + k * n] = p[i] * s;
    w->hk[k] = hk;
}

/* K = exp(e D) on the lower triangle, columns bounds[part] .. bounds[part+1]-1
 * (the diagonal is exp(0) = 1). */
typedef struct exp_task {
    double *K;
    size_t n;
    double e;
    const size_t *bounds;
} exp_task;

static void exp_columns(void *ctx, size_t part)
{
    const exp_task *t = ctx;
    size_t n = t->n;
    double e = t->e;
    for (size_t j = t->bounds[part]; j < t->bounds[part + 1]; j++) {
        double *col = t->K + j * n;
        col[j] = 1.0;
        for (size_t i = j + 1; i < n; i++)
            col[i] = exp(e * col[i]);
    }
}

void gp_svgd_direction(const double *P, const double *G, size_t n, size_t d,
                       const gp_svgd_options *opt, gp_svgd_work *w, double *phi, double *h)
{
    gp_svgd_options def;
    if (opt == NULL) {
        gp_svgd_default_options(&def);
        opt = &def;
    }
    double *K = w->K;
    double hk_total = 1.0;
    /* The bandwidths, and K (lower triangle) holding the exponent argument
     * D_ij = sum_k (p_ik - p_jk)^2 / h_k. */
    if (opt->bandwidth == GP_SVGD_BANDWIDTH_PER_DIM) {
        perdim_task pt = {P, n, opt, w};
        gp_parallel_for(d, perdim_bandwidth, &pt);
        if (h != NULL)
            memcpy(h, w->hk, d * sizeof *h);
        pair_sqdist(w->S, n, d, K, w->sq, NULL);
    } else {
        pair_sqdist(P, n, d, K, w->sq, w->pair);
        hk_total = clamp_bw(median_of_pairs(w->pair, n, 0), opt);
        if (h != NULL)
            h[0] = hk_total;
        for (size_t k = 0; k < d; k++)
            w->hk[k] = hk_total;
    }
    /* K = exp(-D / 2) on the lower triangle, with TOTAL's 1/h folded in:
     * column ranges of about equal pair counts as parallel tasks. */
    size_t bounds[EXP_PARTS + 1];
    exp_task et = {K, n, opt->bandwidth == GP_SVGD_BANDWIDTH_PER_DIM ? -0.5 : -0.5 / hk_total,
                   bounds};
    gp_parallel_for(gp_triangle_partition(n, EXP_PARTS, bounds), exp_columns, &et);
    /* C = K [G | P | 1]: the attraction sum, K P and the row sums at once. */
    size_t nb = 2 * d + 1;
    memcpy(w->B, G, n * d * sizeof(double));
    memcpy(w->B + n * d, P, n * d * sizeof(double));
    for (size_t i = 0; i < n; i++)
        w->B[i + 2 * d * n] = 1.0;
    cblas_dsymm(CblasColMajor, CblasLeft, CblasLower, (int)n, (int)nb, 1.0, K, (int)n, w->B,
                (int)n, 0.0, w->C, (int)n);
    const double *KG = w->C, *KP = w->C + n * d, *rs = w->C + 2 * n * d;
    double att = opt->attraction, rep = opt->repulsion;
    for (size_t k = 0; k < d; k++) {
        double inv_h = 1.0 / w->hk[k];
        for (size_t i = 0; i < n; i++) {
            double z = opt->divisor > 0.0   ? opt->divisor
                       : opt->normalize_rowsum ? rs[i]
                                               : (double)n;
            double r = (rs[i] * P[i + k * n] - KP[i + k * n]) * inv_h;
            phi[i + k * n] = (att * KG[i + k * n] + rep * r) / z;
        }
    }
}

/* ---- schedule and step ---------------------------------------------------- */

double gp_svgd_anneal(int t, int iterations, int cycles, double power)
{
    int c = cycles > 0 ? cycles : 1;
    int period = iterations / c;
    if (period < 1)
        period = 1;
    if (t < 0)
        t = 0;
    double x = (double)(t % period) / (double)period;
    /* pow(0, 0) = 1 in C, which is the 0^0 = 1 the schedule wants. */
    return pow(x, power);
}

void gp_svgd_adam_step(gp_adam *adam, double *P, const double *phi, double lr,
                       double weight_decay)
{
    adam->t++;
    double c1 = 1.0 - pow(adam->beta1, (double)adam->t);
    double c2 = 1.0 - pow(adam->beta2, (double)adam->t);
    double b1 = adam->beta1, b2 = adam->beta2, eps = adam->eps;
    for (size_t i = 0; i < adam->n; i++) {
        double g = isfinite(phi[i]) ? phi[i] : 0.0;
        adam->m[i] = b1 * adam->m[i] + (1.0 - b1) * g;
        adam->v[i] = b2 * adam->v[i] + (1.0 - b2) * g * g;
        double mhat = adam->m[i] / c1, vhat = adam->v[i] / c2;
        /* Ascent along phi; the decay uses the parameter before the step. */
        P[i] += lr * mhat / (sqrt(vhat) + eps) - lr * weight_decay * P[i];
    }
}
