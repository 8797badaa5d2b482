/* Choosing inducing inputs (core/inducing.h): greedy pivoted Cholesky,
 * k-means centres, or a seeded random subset of distinct inputs. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/inducing.h"
#include "core/linalg.h"
#include "core/rng.h"

#define GREEDY_STOP_REL 1e-12
#define KMEANS_MAX_ITER 100

static const char *const selection_names[] = {"greedy", "kmeans", "random"};

int gp_inducing_selection_from_name(const char *name)
{
    for (int i = 0; i < 3; i++)
        if (name && strcmp(name, selection_names[i]) == 0)
            return i;
    return -1;
}

const char *gp_inducing_selection_name(gp_inducing_selection s)
{
    return (unsigned)s < 3 ? selection_names[s] : NULL;
}

static double sq_dist(const double *a, const double *b, size_t d)
{
    double s = 0.0;
    for (size_t j = 0; j < d; j++)
        s += (a[j] - b[j]) * (a[j] - b[j]);
    return s;
}

/* ---- greedy: pivoted Cholesky of Kff, M pivots ---- */

static size_t argmax(const double *r, size_t n)
{
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (r[i] > r[best])
            best = i;
    return best;
}

/* Column j of the partial factor G (n x M) for pivot p, and the residuals r. */
static void greedy_column(const gp_kernel *k, const double *X, size_t n, size_t d, double *G,
                          size_t j, size_t p, double *r)
{
    double *col = G + j * n, piv = sqrt(r[p]);
    gp_kernel_cross(k, X, n, X + p * d, 1, col, n);
    if (j > 0)
        cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)n, (blasint)j, -1.0, G, (blasint)n,
                    G + p, (blasint)n, 1.0, col, 1);
    for (size_t i = 0; i < n; i++) {
        col[i] /= piv;
        r[i] -= col[i] * col[i];
    }
    r[p] = 0.0; /* exactly: a chosen point (and its duplicates) is never chosen again */
}

static int select_greedy(const gp_kernel *k, const double *X, size_t n, size_t d, size_t M,
                         double *Z, size_t *m_out, gp_error *err)
{
    size_t nM = 0;
    int rc = gp_checked_size(n, M, &nM, err);
    double *G = rc ? NULL : gp_alloc_doubles(nM, err), *r = gp_alloc_doubles(n, err);
    if (G == NULL || r == NULL) {
        free(G);
        free(r);
        return rc ? rc : GP_ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        r[i] = gp_kernel_diag(k, X + i * d);
    double stop = GREEDY_STOP_REL * r[argmax(r, n)];
    size_t j = 0;
    for (; j < M; j++) {
        size_t p = argmax(r, n);
        if (!(r[p] > stop))
            break;
        memcpy(Z + j * d, X + p * d, d * sizeof *Z);
        greedy_column(k, X, n, d, G, j, p, r);
    }
    *m_out = j;
    free(G);
    free(r);
    return GP_OK;
}

/* ---- random: distinct inputs, uniformly without replacement ---- */

static int is_chosen(const double *x, const double *Z, size_t m, size_t d)
{
    for (size_t j = 0; j < m; j++)
        if (memcmp(x, Z + j * d, d * sizeof *x) == 0)
            return 1;
    return 0;
}

static int select_random(const double *X, size_t n, size_t d, size_t M, uint64_t seed,
                         double *Z, size_t *m_out, gp_error *err)
{
    size_t *idx = malloc(n * sizeof *idx), m = 0;
    if (idx == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < n; i++)
        idx[i] = i;
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    for (size_t i = 0; i < n && m < M; i++) {
        size_t j = i + (size_t)gp_rng_below(&rng, (uint64_t)(n - i)), t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
        const double *x = X + idx[i] * d;
        if (!is_chosen(x, Z, m, d))
            memcpy(Z + (m++) * d, x, d * sizeof *Z);
    }
    *m_out = m;
    free(idx);
    return GP_OK;
}

/* ---- kmeans: k-means++ seeding, then Lloyd ---- */

/* Nearest centre of every point into lab, squared distance into dist. */
static void assign(const double *X, size_t n, size_t d, const double *Z, size_t m, size_t *lab,
                   double *dist, int *changed)
{
    *changed = 0;
    for (size_t i = 0; i < n; i++) {
        size_t best = 0;
        double bd = INFINITY;
        for (size_t j = 0; j < m; j++) {
            double s = sq_dist(X + i * d, Z + j * d, d);
            if (s < bd) {
                bd = s;
                best = j;
            }
        }
        if (lab[i] != best)
            *changed = 1;
        lab[i] = best;
        dist[i] = bd;
    }
}

/* k-means++: each new centre drawn with probability proportional to the
 * squared distance to the nearest chosen one; stops when every point sits on
 * a centre (fewer distinct inputs than M). */
static size_t kmeanspp(const double *X, size_t n, size_t d, size_t M, gp_rng *rng, double *Z,
                       double *dist)
{
    size_t first = (size_t)gp_rng_below(rng, (uint64_t)n), m = 1;
    memcpy(Z, X + first * d, d * sizeof *Z);
    for (size_t i = 0; i < n; i++)
        dist[i] = sq_dist(X + i * d, Z, d);
    while (m < M) {
        double total = 0.0;
        for (size_t i = 0; i < n; i++)
            total += dist[i];
        if (!(total > 0.0))
            break;
        double u = gp_rng_uniform(rng) * total, acc = 0.0;
        size_t pick = n - 1;
        for (size_t i = 0; i < n; i++) {
            acc += dist[i];
            if (acc > u && dist[i] > 0.0) {
                pick = i;
                break;
            }
        }
        if (!(dist[pick] > 0.0))
            break;
        memcpy(Z + m * d, X + pick * d, d * sizeof *Z);
        for (size_t i = 0; i < n; i++) {
            double s = sq_dist(X + i * d, Z + m * d, d);
            if (s < dist[i])
                dist[i] = s;
        }
        m++;
    }
    return m;
}

/* Centres = cluster means; an empty cluster moves to the point farthest
 * from its own centre. */
static void update_centres(const double *X, size_t n, size_t d, double *Z, size_t m,
                           size_t *lab, double *dist, size_t *count)
{
    memset(count, 0, m * sizeof *count);
    memset(Z, 0, m * d * sizeof *Z);
    for (size_t i = 0; i < n; i++) {
        count[lab[i]]++;
        for (size_t c = 0; c < d; c++)
            Z[lab[i] * d + c] += X[i * d + c];
    }
    for (size_t j = 0; j < m; j++) {
        if (count[j] > 0) {
            for (size_t c = 0; c < d; c++)
                Z[j * d + c] /= (double)count[j];
            continue;
        }
        size_t far = argmax(dist, n);
        memcpy(Z + j * d, X + far * d, d * sizeof *Z);
        dist[far] = 0.0;
        lab[far] = j;
    }
}

static int select_kmeans(const double *X, size_t n, size_t d, size_t M, uint64_t seed,
                         double *Z, size_t *m_out, gp_error *err)
{
    size_t *lab = malloc(n * sizeof *lab), *count = malloc(M * sizeof *count);
    double *dist = gp_alloc_doubles(n, err);
    if (!lab || !count || !dist) {
        free(lab);
        free(count);
        free(dist);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    size_t m = kmeanspp(X, n, d, M, &rng, Z, dist);
    for (size_t i = 0; i < n; i++)
        lab[i] = m; /* no assignment yet */
    int changed = 1;
    for (int it = 0; it < KMEANS_MAX_ITER && changed; it++) {
        assign(X, n, d, Z, m, lab, dist, &changed);
        if (changed)
            update_centres(X, n, d, Z, m, lab, dist, count);
    }
    *m_out = m;
    free(lab);
    free(count);
    free(dist);
    return GP_OK;
}

int gp_inducing_select(gp_inducing_selection sel, const gp_kernel *k, const double *X, size_t n,
                       size_t d, size_t M, uint64_t seed, double *Z, size_t *m_out,
                       gp_error *err)
{
    *m_out = 0;
    if (n == 0 || M == 0)
        return gp_error_set(err, GP_EINVAL, "options.inducing", "no points to choose from");
    if (M > n)
        M = n;
    switch (sel) {
    case GP_INDUCING_GREEDY:
        if (k == NULL)
            return gp_error_set(err, GP_EINVAL, "kernel", "greedy selection needs a kernel");
        return select_greedy(k, X, n, d, M, Z, m_out, err);
    case GP_INDUCING_KMEANS:
        return select_kmeans(X, n, d, M, seed, Z, m_out, err);
    case GP_INDUCING_RANDOM:
        return select_random(X, n, d, M, seed, Z, m_out, err);
    }
    return gp_error_set(err, GP_EINVAL, "options.inducing_selection", "unknown selection");
}
