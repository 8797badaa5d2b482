/* Kernel matrices of many pairs: prepared points, Gram and cross matrices,
 * and the contractions of their gradients (core/kernel/kernel_gram.h). */
#include "core/kernel/kernel_gram.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/parallel.h"
#include "core/kernel/kernel.h"
#include "core/kernel/kernel_block.h"
#include "core/kernel/kernel_formula.h"
#include "core/linalg/linalg.h"

/* The pair loops of the contractions, cloned for the vector widths: their
 * per-coordinate loops (a gradient entry or a Z-gradient entry per
 * coordinate, each added to in pair order) vectorise across the
 * coordinates, which changes no element's order of operations, so every
 * clone gives the same bits (GP_CLONES, core/linalg/fastmath.h). */
#define PAIR_CLONES GP_CLONES

/* ------------------------------------------------------------------------ */
/* many pairs: every leaf's view of the points is scaled once                 */

typedef struct prep_leaf {
    const gp_kernel *k;
    leaf_par p;
    size_t na;       /* coordinates per point (0 for white, which reads none) */
    const double *a; /* na x n: the leaf's scaled view of X */
    const double *b; /* na x m: of Z (the same buffer as a for a Gram matrix) */
    const double *at; /* n x na (leading dimension n): a by coordinate, for the
                         vector blocks (kernel_block.h); NULL: pair by pair */
    size_t n;         /* points in a */
} prep_leaf;

typedef struct prep {
    prep_leaf *leaf; /* depth-first order, as tree_value meets them */
    size_t n_leaves;
    double *at;    /* the root leaf's at, owned (NULL when it has none) */
    double *buf;   /* every leaf's points, then `extra` doubles */
    double *extra; /* scratch asked for by the caller */
} prep;

static size_t count_leaves(const gp_kernel *k)
{
    if (!gp_kernel_is_composite(k))
        return 1;
    size_t n = 0;
    for (size_t t = 0; t < k->n_terms; t++)
        n += count_leaves(k->terms[t]);
    return n;
}

static size_t prep_na(const gp_kernel *k)
{
    return k->type == GP_KERNEL_WHITE ? 0 : k->n_active;
}

/* out (na x n) = the leaf's scaled coordinates of the columns of X. */
static void scale_points(const gp_kernel *k, const double *X, size_t n, double *out)
{
    size_t na = prep_na(k), dim = k->input_dim;
    for (size_t c = 0; c < na; c++) {
        double s = scale_of(k, c);
        size_t i = dim_of(k, c);
        for (size_t j = 0; j < n; j++)
            out[c + j * na] = X[i + j * dim] / s;
    }
}

typedef struct prep_args {
    const double *X, *Z;
    size_t n, m;
    int rows_elsewhere; /* 1: the caller pairs these points with rows prepared
                           elsewhere (their `at` too), so none is made here */
} prep_args;

static void prep_fill(const gp_kernel *k, prep *pr, size_t *li, double **cursor,
                      const prep_args *pa)
{
    if (gp_kernel_is_composite(k)) {
        for (size_t t = 0; t < k->n_terms; t++)
            prep_fill(k->terms[t], pr, li, cursor, pa);
        return;
    }
    prep_leaf *L = &pr->leaf[(*li)++];
    L->k = k;
    L->p = gp_kernel_leaf_par_of(k);
    L->na = prep_na(k);
    double *a = *cursor;
    scale_points(k, pa->X, pa->n, a);
    *cursor += L->na * pa->n;
    L->a = L->b = a;
    L->at = NULL;
    L->n = pa->n;
    if (pa->Z) {
        scale_points(k, pa->Z, pa->m, *cursor);
        L->b = *cursor;
        *cursor += L->na * pa->m;
    }
}

/* Doubles for every leaf's scaled points of `points` points; nonzero when that
 * is beyond the allocation limit. */
static int prep_size(const gp_kernel *k, size_t points, size_t *size)
{
    if (!gp_kernel_is_composite(k)) {
        size_t na = prep_na(k);
        if (na && points > GP_MAX_ELEMENTS / na)
            return -1;
        *size = na * points;
        return 0;
    }
    size_t total = 0;
    for (size_t t = 0; t < k->n_terms; t++) {
        size_t s;
        if (prep_size(k->terms[t], points, &s) || s > GP_MAX_ELEMENTS - total)
            return -1;
        total += s;
    }
    *size = total;
    return 0;
}

/* A root leaf of a block type gets its points by coordinate as well, so that
 * a column of pairs runs in vector lanes. Without the memory it goes pair by
 * pair: the same bits, only slower. */
static void prep_transpose(const gp_kernel *k, prep *pr)
{
    prep_leaf *L = &pr->leaf[0];
    if (gp_kernel_is_composite(k) || !gp_kernel_block_type(k->type) || L->na == 0 ||
        L->n > GP_MAX_ELEMENTS / L->na)
        return;
    pr->at = malloc(L->n * L->na * sizeof *pr->at);
    if (pr->at == NULL)
        return;
    for (size_t i = 0; i < L->n; i++)
        for (size_t c = 0; c < L->na; c++)
            pr->at[i + c * L->n] = L->a[c + i * L->na];
    L->at = pr->at;
}

/* Z == NULL: a Gram matrix of X. Returns nonzero when out of memory; pr is
 * then empty (prep_free on it is harmless). */
static int prep_build(prep *pr, const gp_kernel *k, const prep_args *pa, size_t extra)
{
    memset(pr, 0, sizeof *pr);
    size_t size;
    if (prep_size(k, pa->n + (pa->Z ? pa->m : 0), &size) || extra > GP_MAX_ELEMENTS - size)
        return -1;
    pr->n_leaves = count_leaves(k);
    pr->leaf = malloc(pr->n_leaves * sizeof *pr->leaf);
    pr->buf = malloc((size + extra + 1) * sizeof *pr->buf);
    if (pr->leaf == NULL || pr->buf == NULL) {
        free(pr->leaf);
        free(pr->buf);
        memset(pr, 0, sizeof *pr);
        return -1;
    }
    size_t li = 0;
    double *cursor = pr->buf;
    prep_fill(k, pr, &li, &cursor, pa);
    pr->extra = cursor;
    if (!pa->rows_elsewhere)
        prep_transpose(k, pr);
    return 0;
}

static void prep_free(prep *pr)
{
    free(pr->leaf);
    free(pr->buf);
    free(pr->at);
}

/* Leaf value or gradient for the pair (X_i, Z_j) from the scaled points. */
static inline double prep_pair(const prep_leaf *L, size_t i, size_t j, int same, double *g)
{
    const double *a = L->a + i * L->na, *b = L->b + j * L->na;
    double q = vec_q(L->p.type, a, b, L->na);
    if (g == NULL)
        return leaf_terms(&L->p, q, same, NULL);
    double c0;
    double v = gp_kernel_leaf_grad_common(L->k, &L->p, q, same, g, &c0);
    if (L->k->ard)
        for (size_t c = 0; c < L->na; c++) {
            double d = a[c] - b[c];
            g[1 + c] = c0 * (d * d);
        }
    return v;
}

typedef struct prep_ctx {
    const prep_leaf *next; /* the leaf tree_value meets next */
    size_t i, j;
} prep_ctx;

static double prep_leaf_fn(void *ctx, const gp_kernel *k, int same, double *g)
{
    (void)k;
    prep_ctx *pc = ctx;
    return prep_pair(pc->next++, pc->i, pc->j, same, g);
}

static double prep_value(const gp_kernel *k, const prep *pr, size_t i, size_t j, int same)
{
    if (!gp_kernel_is_composite(k))
        return prep_pair(&pr->leaf[0], i, j, same, NULL);
    prep_ctx ctx = {pr->leaf, i, j};
    return tree_value(k, prep_leaf_fn, &ctx, same);
}

static double prep_grad(const gp_kernel *k, const prep *pr, size_t i, size_t j, int same,
                        double *g)
{
    if (!gp_kernel_is_composite(k))
        return prep_pair(&pr->leaf[0], i, j, same, g);
    prep_ctx ctx = {pr->leaf, i, j};
    size_t used;
    return tree_grad(k, prep_leaf_fn, &ctx, same, g, &used);
}

/* Copy the strict lower triangle onto the upper one, in tiles so that the
 * transposed writes stay in cache; polls the token every band of columns (a
 * second of copying at n = 20000). */
static int mirror_lower(double *K, size_t n, size_t ld, const gp_cancel *cancel)
{
    enum { TILE = 64 };
    for (size_t jb = 0; jb < n; jb += TILE) {
        if (jb % (4 * TILE) == 0 && gp_cancel_requested(cancel))
            return GP_ECANCELLED;
        size_t je = jb + TILE < n ? jb + TILE : n;
        for (size_t ib = jb; ib < n; ib += TILE) {
            size_t ie = ib + TILE < n ? ib + TILE : n;
            for (size_t j = jb; j < je; j++)
                for (size_t i = ib > j + 1 ? ib : j + 1; i < ie; i++)
                    K[j + i * ld] = K[i + j * ld];
        }
    }
    return GP_OK;
}

/* Pair loops run as tasks over column ranges (core/base/parallel.h). The ranges
 * depend only on the sizes, so sums come out the same for any thread count. */
#define PAIR_PARTS 32
#define PARALLEL_MIN_PAIRS 32768.0

static size_t triangle_parts(size_t n, size_t *bounds)
{
    double pairs = 0.5 * (double)n * (double)(n + 1);
    return gp_triangle_partition(n, pairs >= PARALLEL_MIN_PAIRS ? PAIR_PARTS : 1, bounds);
}

/* Equal column ranges of an n x m block. */
static size_t block_parts(size_t n, size_t m, size_t *bounds)
{
    size_t parts = (double)n * (double)m >= PARALLEL_MIN_PAIRS ? PAIR_PARTS : 1;
    if (parts > m)
        parts = m;
    for (size_t k = 0; k <= parts; k++)
        bounds[k] = m * k / parts;
    return parts;
}

typedef struct pair_task {
    const gp_kernel *k;
    const prep *pr;
    size_t n;
    const size_t *bounds;
    double *K;
    size_t ldk;
    const double *W;     /* contraction only */
    size_t ldw, np;
    double *partials;    /* contraction: parts x np results, then scratch */
    const gp_cancel *cancel; /* polled before every column (Gram, contraction) */
    atomic_int stopped;      /* a task saw the token set and left its columns unfinished */
} pair_task;

/* Before column j of a task: 1 (and the task's stop recorded) when the token
 * asks to stop. A column is at most n pairs, a millisecond at n = 20000. */
static int task_cancelled(pair_task *pt)
{
    if (!gp_cancel_requested(pt->cancel))
        return 0;
    atomic_store(&pt->stopped, 1);
    return 1;
}

/* col[i] = k(point i of L->a, b) for i = i0 .. i1, GP_KERNEL_BLOCK at a time. */
static void block_column(const prep_leaf *L, size_t i0, size_t i1, const double *b, double *col)
{
    double q[GP_KERNEL_BLOCK], scratch[GP_KERNEL_BLOCK];
    for (size_t i = i0; i < i1; i += GP_KERNEL_BLOCK) {
        size_t len = i1 - i < GP_KERNEL_BLOCK ? i1 - i : GP_KERNEL_BLOCK;
        gp_kernel_block_q(L->at, L->n, L->na, i, len, b, q);
        gp_kernel_block_terms(&L->p, q, len, col + i, NULL, scratch);
    }
}

/* Lower triangle of the Gram matrix, columns [bounds[t], bounds[t+1]). */
static void gram_task(void *ctx, size_t t)
{
    pair_task *pt = ctx;
    int leaf = !gp_kernel_is_composite(pt->k);
    const prep_leaf *L = &pt->pr->leaf[0];
    for (size_t j = pt->bounds[t]; j < pt->bounds[t + 1]; j++) {
        if (task_cancelled(pt))
            return;
        double *col = pt->K + j * pt->ldk;
        if (L->at) { /* a block type at the root: the column in vector lanes */
            block_column(L, j, pt->n, L->b + j * L->na, col);
        } else if (leaf) { /* a leaf at the root: no tree walk and no callback per pair */
            const double *b = L->a + j * L->na;
            for (size_t i = j; i < pt->n; i++)
                col[i] = leaf_terms(&L->p, vec_q(L->p.type, L->a + i * L->na, b, L->na), i == j,
                                    NULL);
        } else {
            for (size_t i = j; i < pt->n; i++)
                col[i] = prep_value(pt->k, pt->pr, i, j, i == j);
        }
    }
}

void gp_kernel_gram(const gp_kernel *k, const double *X, size_t n, double *K, size_t ldk)
{
    gp_kernel_gram_cancellable(k, X, n, K, ldk, NULL); /* GP_ECANCELLED needs a token */
}

int gp_kernel_gram_cancellable(const gp_kernel *k, const double *X, size_t n, double *K,
                               size_t ldk, const gp_cancel *cancel)
{
    if (n == 0)
        return GP_OK;
    prep pr;
    prep_args pa = {X, NULL, n, 0, 0};
    int rc = GP_OK;
    if (prep_build(&pr, k, &pa, 0) != 0) {
        /* Out of memory for the scaled points: the slow path needs none. */
        for (size_t j = 0; j < n && rc == GP_OK; j++) {
            if (gp_cancel_requested(cancel))
                rc = GP_ECANCELLED;
            for (size_t i = j; i < n && rc == GP_OK; i++)
                K[i + j * ldk] = gp_kernel_eval(k, X + i * k->input_dim, X + j * k->input_dim,
                                                i == j);
        }
    } else {
        size_t bounds[PAIR_PARTS + 1];
        size_t parts = triangle_parts(n, bounds);
        pair_task pt = {.k = k, .pr = &pr, .n = n, .bounds = bounds, .K = K, .ldk = ldk,
                        .cancel = cancel};
        atomic_init(&pt.stopped, 0);
        gp_parallel_for(parts, gram_task, &pt);
        if (atomic_load(&pt.stopped))
            rc = GP_ECANCELLED;
    }
    prep_free(&pr);
    return rc ? rc : mirror_lower(K, n, ldk, cancel);
}

/* Cross block, columns [bounds[t], bounds[t+1]) (n rows each). */
static void cross_task(void *ctx, size_t t)
{
    const pair_task *pt = ctx;
    const prep_leaf *L = &pt->pr->leaf[0];
    if (L->at) {
        for (size_t j = pt->bounds[t]; j < pt->bounds[t + 1]; j++)
            block_column(L, 0, pt->n, L->b + j * L->na, pt->K + j * pt->ldk);
        return;
    }
    for (size_t j = pt->bounds[t]; j < pt->bounds[t + 1]; j++)
        for (size_t i = 0; i < pt->n; i++)
            pt->K[i + j * pt->ldk] = prep_value(pt->k, pt->pr, i, j, 0);
}

void gp_kernel_cross(const gp_kernel *k, const double *X, size_t n, const double *Z, size_t m,
                     double *K, size_t ldk)
{
    if (n == 0 || m == 0)
        return;
    prep pr;
    prep_args pa = {X, Z, n, m, 0};
    if (prep_build(&pr, k, &pa, 0) != 0) {
        for (size_t j = 0; j < m; j++)
            for (size_t i = 0; i < n; i++)
                K[i + j * ldk] =
                    gp_kernel_eval(k, X + i * k->input_dim, Z + j * k->input_dim, 0);
        return;
    }
    size_t bounds[PAIR_PARTS + 1];
    size_t parts = block_parts(n, m, bounds);
    pair_task pt = {.k = k, .pr = &pr, .n = n, .bounds = bounds, .K = K, .ldk = ldk};
    gp_parallel_for(parts, cross_task, &pt);
    prep_free(&pr);
}

struct gp_kernel_points {
    prep pr;         /* each leaf's scaled view of X */
    const double *X; /* borrowed: for the allocation-free fallback */
    size_t n;
};

int gp_kernel_points_new(const gp_kernel *k, const double *X, size_t n, gp_kernel_points **out,
                         gp_error *err)
{
    gp_kernel_points *p = calloc(1, sizeof *p);
    prep_args pa = {X, NULL, n, 0, 0};
    if (p == NULL || prep_build(&p->pr, k, &pa, 0) != 0) {
        free(p);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory preparing %zu points", n);
    }
    p->X = X;
    p->n = n;
    *out = p;
    return GP_OK;
}

void gp_kernel_points_free(gp_kernel_points *p)
{
    if (p == NULL)
        return;
    prep_free(&p->pr);
    free(p);
}

void gp_kernel_cross_points(const gp_kernel *k, const gp_kernel_points *Xp, const double *Z,
                            size_t m, double *K, size_t ldk)
{
    size_t n = Xp->n;
    if (n == 0 || m == 0)
        return;
    prep pz;
    prep_args pa = {Z, NULL, m, 0, 1}; /* rows: Xp's, with its `at` */
    if (prep_build(&pz, k, &pa, 0) != 0) {
        gp_kernel_cross(k, Xp->X, n, Z, m, K, ldk); /* it has its own fallback */
        return;
    }
    /* Pair the prepared rows (X) with the freshly scaled columns (Z). */
    for (size_t i = 0; i < pz.n_leaves; i++) {
        pz.leaf[i].b = pz.leaf[i].a;
        pz.leaf[i].a = Xp->pr.leaf[i].a;
        pz.leaf[i].at = Xp->pr.leaf[i].at;
        pz.leaf[i].n = Xp->pr.leaf[i].n;
    }
    size_t bounds[PAIR_PARTS + 1];
    size_t parts = block_parts(n, m, bounds);
    pair_task pt = {.k = k, .pr = &pz, .n = n, .bounds = bounds, .K = K, .ldk = ldk};
    gp_parallel_for(parts, cross_task, &pt);
    prep_free(&pz);
}

/* One column's lower part: col[p] = sum_{i >= j} w_ij dk(X_i, X_j)/dtheta_p,
 * off-diagonal pairs counted twice (W is symmetric and only its lower triangle
 * is read). g is per-pair scratch. */
static void contract_column(const gp_kernel *k, const prep *pr, size_t n, size_t j,
                            const double *wcol, size_t np, double *g, double *col)
{
    memset(col, 0, np * sizeof *col);
    for (size_t i = j; i < n; i++) {
        double w = i == j ? wcol[i] : 2.0 * wcol[i];
        prep_grad(k, pr, i, j, i == j, g);
        for (size_t p = 0; p < np; p++)
            col[p] += w * g[p];
    }
}

/* contract_column_ard's sums for a block type, the pairs' k and c0 computed a
 * block at a time in vector lanes (kernel_block.h: each lane the single
 * pair's bits), then added in the same order. */
PAIR_CLONES
static void contract_column_blocks(const prep_leaf *L, size_t n, size_t j, const double *wcol,
                                   double *col)
{
    size_t na = L->na;
    const double *b = L->b + j * na;
    double q[GP_KERNEL_BLOCK], v[GP_KERNEL_BLOCK], c0[GP_KERNEL_BLOCK], scratch[GP_KERNEL_BLOCK];
    for (size_t i0 = j; i0 < n; i0 += GP_KERNEL_BLOCK) {
        size_t len = n - i0 < GP_KERNEL_BLOCK ? n - i0 : GP_KERNEL_BLOCK;
        gp_kernel_block_q(L->at, L->n, na, i0, len, b, q);
        gp_kernel_block_terms(&L->p, q, len, v, c0, scratch);
        for (size_t t = 0; t < len; t++) {
            size_t i = i0 + t;
            const double *a = L->a + i * na;
            double w = i == j ? wcol[i] : 2.0 * wcol[i];
            col[0] += w * v[t];
            for (size_t cc = 0; cc < na; cc++) {
                double d = a[cc] - b[cc];
                col[1 + cc] += w * (c0[t] * (d * d));
            }
        }
    }
}

/* contract_column for one ARD stationary leaf of the given type, written out
 * so that the compiler sees a constant type and no per-pair call: the same
 * terms added in the same order as prep_pair and contract_column, so the same
 * bits (the variance term, then each lengthscale's c0 d^2; rq's alpha term
 * after them). About half the pair loop's time at N = 700-2000. */
static inline __attribute__((always_inline)) void
contract_column_ard(gp_kernel_type type, const prep_leaf *L, size_t n, size_t j,
                    const double *wcol, size_t np, size_t nl, double *col)
{
    size_t na = L->na;
    const double *b = L->b + j * na;
    leaf_par p = L->p;
    p.type = type;
    memset(col, 0, np * sizeof *col);
    if (L->at && gp_kernel_block_type(type)) {
        contract_column_blocks(L, n, j, wcol, col);
        return;
    }
    for (size_t i = j; i < n; i++) {
        const double *a = L->a + i * na;
        double w = i == j ? wcol[i] : 2.0 * wcol[i];
        double c[2] = {0.0, 0.0};
        double v = leaf_terms(&p, vec_q(type, a, b, na), i == j, c);
        col[0] += w * v;
        for (size_t cc = 0; cc < na; cc++) {
            double d = a[cc] - b[cc];
            col[1 + cc] += w * (c[0] * (d * d));
        }
        if (type == GP_KERNEL_RQ)
            col[1 + nl] += w * c[1];
    }
}

/* The fast path's kernels: one ARD stationary leaf seeing every lengthscale's
 * coordinate (na == n_lengthscale), as prep_pair's gradient layout has it. */
static int contract_fast(const gp_kernel *k, const prep *pr)
{
    return !gp_kernel_is_composite(k) && k->ard && gp_kernel_is_scaled_type(k->type) &&
           pr->leaf[0].na == k->n_lengthscale;
}

static void contract_column_fast(const gp_kernel *k, const prep *pr, size_t n, size_t j,
                                 const double *wcol, size_t np, double *col)
{
    const prep_leaf *L = &pr->leaf[0];
    size_t nl = k->n_lengthscale;
    switch (k->type) {
    case GP_KERNEL_RBF: contract_column_ard(GP_KERNEL_RBF, L, n, j, wcol, np, nl, col); break;
    case GP_KERNEL_MATERN12:
        contract_column_ard(GP_KERNEL_MATERN12, L, n, j, wcol, np, nl, col);
        break;
    case GP_KERNEL_MATERN32:
        contract_column_ard(GP_KERNEL_MATERN32, L, n, j, wcol, np, nl, col);
        break;
    case GP_KERNEL_MATERN52:
        contract_column_ard(GP_KERNEL_MATERN52, L, n, j, wcol, np, nl, col);
        break;
    default: contract_column_ard(k->type, L, n, j, wcol, np, nl, col); break;
    }
}

/* Columns [bounds[t], bounds[t+1]): column sums first, then their running
 * total (shorter running sums, fewer rounding errors over n^2/2 pairs). */
static void contract_task(void *ctx, size_t t)
{
    pair_task *pt = ctx;
    size_t np = pt->np;
    double *sum = pt->partials + t * 3 * np, *g = sum + np, *col = g + np;
    int fast = contract_fast(pt->k, pt->pr);
    memset(sum, 0, np * sizeof *sum);
    for (size_t j = pt->bounds[t]; j < pt->bounds[t + 1]; j++) {
        if (task_cancelled(pt))
            return;
        if (fast)
            contract_column_fast(pt->k, pt->pr, pt->n, j, pt->W + j * pt->ldw, np, col);
        else
            contract_column(pt->k, pt->pr, pt->n, j, pt->W + j * pt->ldw, np, g, col);
        for (size_t p = 0; p < np; p++)
            sum[p] += col[p];
    }
}

void gp_kernel_gram_grad_contract(const gp_kernel *k, const double *X, size_t n, const double *W,
                                  size_t ldw, double *grad)
{
    gp_kernel_gram_grad_contract_cancellable(k, X, n, W, ldw, grad, NULL);
}

int gp_kernel_gram_grad_contract_cancellable(const gp_kernel *k, const double *X, size_t n,
                                             const double *W, size_t ldw, double *grad,
                                             const gp_cancel *cancel)
{
    size_t np = gp_kernel_n_params(k);
    memset(grad, 0, np * sizeof *grad);
    if (n == 0)
        return GP_OK;
    prep pr;
    prep_args pa = {X, NULL, n, 0, 0};
    size_t bounds[PAIR_PARTS + 1];
    size_t parts = triangle_parts(n, bounds);
    if (prep_build(&pr, k, &pa, parts * 3 * np) != 0) {
        /* The API has no error return here: NaN makes the caller's objective
         * fail loudly instead of stepping on a wrong gradient. */
        for (size_t p = 0; p < np; p++)
            grad[p] = NAN;
        return GP_OK;
    }
    pair_task pt = {.k = k, .pr = &pr, .n = n, .bounds = bounds, .W = W, .ldw = ldw,
                    .np = np, .partials = pr.extra, .cancel = cancel};
    atomic_init(&pt.stopped, 0);
    gp_parallel_for(parts, contract_task, &pt);
    for (size_t t = 0; t < parts; t++) /* in task order: thread-count independent */
        for (size_t p = 0; p < np; p++)
            grad[p] += pr.extra[t * 3 * np + p];
    prep_free(&pr);
    return atomic_load(&pt.stopped) ? GP_ECANCELLED : GP_OK;
}

/* ---- the cross contraction of the inducing-point bounds ---- */

typedef struct cross_contract_task {
    const prep_leaf *L;
    size_t n, np, input_dim;
    const size_t *bounds;
    const double *W;
    size_t ldw;
    const double *inv_ls; /* 1 / lengthscale of each seen coordinate */
    double *partials;     /* parts x np */
    double *gz;           /* input_dim x m, or NULL */
} cross_contract_task;

/* Columns [bounds[t], bounds[t+1]) of W: theta sums into partials[t], each
 * column's Z-gradient into its own gz column (no two tasks share one). With
 * r^2 over scaled differences d_c = (x - z)_c / l_c, the leaf terms give
 * dk/dlog l_c = c0 d_c^2 and hence dk/dz_c = c0 d_c / l_c. */
PAIR_CLONES
static void cross_contract_task_run(void *ctx, size_t t)
{
    const cross_contract_task *ct = ctx;
    const prep_leaf *L = ct->L;
    const gp_kernel *k = L->k;
    size_t na = L->na, nl = k->n_lengthscale;
    double *g = ct->partials + t * ct->np;
    memset(g, 0, ct->np * sizeof *g);
    for (size_t j = ct->bounds[t]; j < ct->bounds[t + 1]; j++) {
        const double *b = L->b + j * na, *wcol = ct->W + j * ct->ldw;
        double *gzj = ct->gz ? ct->gz + j * ct->input_dim : NULL;
        for (size_t i = 0; i < ct->n; i++) {
            double w = wcol[i];
            if (w == 0.0)
                continue;
            const double *a = L->a + i * na;
            double q = vec_q(L->p.type, a, b, na), c[2] = {0.0, 0.0};
            double v = leaf_terms(&L->p, q, 0, c), wc0 = w * c[0];
            g[0] += w * v;
            if (!k->ard && nl)
                g[1] += wc0 * q;
            if (k->type == GP_KERNEL_RQ)
                g[1 + nl] += w * c[1];
            for (size_t cc = 0; cc < na; cc++) {
                double d = a[cc] - b[cc];
                if (k->ard)
                    g[1 + cc] += wc0 * (d * d);
                if (gzj)
                    gzj[dim_of(k, cc)] += wc0 * d * ct->inv_ls[cc];
            }
        }
    }
}

int gp_kernel_cross_grad_contract(const gp_kernel *k, const double *X, size_t n, const double *Z,
                                  size_t m, const double *W, size_t ldw, double *grad,
                                  double *gz, gp_error *err)
{
    if (gp_kernel_is_composite(k) || !gp_kernel_is_scaled_type(k->type))
        return gp_error_set(err, GP_EUNSUPPORTED, "kernel.type",
                            "the cross contraction takes one stationary leaf "
                            "(rbf, matern12, matern32, matern52, rq), not %s",
                            gp_kernel_name_or_unknown((int)k->type));
    size_t np = gp_kernel_n_params(k), na = prep_na(k);
    memset(grad, 0, np * sizeof *grad);
    if (gz)
        memset(gz, 0, k->input_dim * m * sizeof *gz);
    if (n == 0 || m == 0)
        return GP_OK;
    prep pr;
    prep_args pa = {X, Z, n, m, 0};
    size_t bounds[PAIR_PARTS + 1];
    size_t parts = block_parts(n, m, bounds);
    if (prep_build(&pr, k, &pa, parts * np + na) != 0)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory contracting %zu x %zu pairs",
                            n, m);
    double *inv_ls = pr.extra + parts * np;
    for (size_t c = 0; c < na; c++)
        inv_ls[c] = 1.0 / scale_of(k, c);
    cross_contract_task ct = {.L = &pr.leaf[0], .n = n, .np = np, .input_dim = k->input_dim,
                              .bounds = bounds, .W = W, .ldw = ldw, .inv_ls = inv_ls,
                              .partials = pr.extra, .gz = gz};
    gp_parallel_for(parts, cross_contract_task_run, &ct);
    for (size_t t = 0; t < parts; t++) /* in task order: thread-count independent */
        for (size_t p = 0; p < np; p++)
            grad[p] += pr.extra[t * np + p];
    prep_free(&pr);
    return GP_OK;
}

/* ---- the same contraction from known kernel values ---- */

/* The derivative factors of leaf_terms (c[0], and c[1] for rq) from the
 * value kv = k at r^2 = q, without the exp. */
static inline void leaf_factors_from_value(const leaf_par *p, double q, double kv, double *c)
{
    switch (p->type) {
    case GP_KERNEL_RBF: c[0] = kv; break;
    case GP_KERNEL_MATERN12: {
        double r = sqrt(q);
        c[0] = r > 0.0 ? kv / r : 0.0;
        break;
    }
    case GP_KERNEL_MATERN32: c[0] = 3.0 * kv / (1.0 + SQRT3 * sqrt(q)); break;
    case GP_KERNEL_MATERN52: {
        double s = SQRT5 * sqrt(q);
        c[0] = (5.0 / 3.0) * (1.0 + s) * kv / (1.0 + s + 5.0 * q / 3.0);
        break;
    }
    case GP_KERNEL_RQ: {
        double u = q / (2.0 * p->alpha);
        c[0] = kv / (1.0 + u);
        c[1] = kv * p->alpha * (u / (1.0 + u) - log1p(u));
        break;
    }
    default: c[0] = NAN; break;
    }
}

typedef struct known_task {
    const prep_leaf *L;
    size_t m, np, input_dim;
    const size_t *bounds;
    const double *K, *W;
    size_t ldk, ldw;
    const double *inv_ls;
    double *partials; /* parts x np */
    double *gzs;      /* parts x (input_dim x m), or NULL */
    gp_known_args ka; /* the lanes (known_task_lanes) */
    double *lane_gz;  /* parts x (m x ka.width), with gzs */
} known_task;

/* Points X_i, i in [bounds[t], bounds[t+1]), against every Z_j. */
PAIR_CLONES
static void known_task_run(void *ctx, size_t t)
{
    const known_task *kt = ctx;
    const prep_leaf *L = kt->L;
    const gp_kernel *k = L->k;
    size_t na = L->na, nl = k->n_lengthscale, m = kt->m;
    double *g = kt->partials + t * kt->np;
    double *gz = kt->gzs ? kt->gzs + t * kt->input_dim * m : NULL;
    memset(g, 0, kt->np * sizeof *g);
    if (gz)
        memset(gz, 0, kt->input_dim * m * sizeof *gz);
    for (size_t i = kt->bounds[t]; i < kt->bounds[t + 1]; i++) {
        const double *a = L->a + i * na, *kcol = kt->K + i * kt->ldk, *wcol = kt->W + i * kt->ldw;
        for (size_t j = 0; j < m; j++) {
            double w = wcol[j];
            if (w == 0.0)
                continue;
            const double *b = L->b + j * na;
            double q = vec_q(L->p.type, a, b, na), c[2] = {0.0, 0.0};
            leaf_factors_from_value(&L->p, q, kcol[j], c);
            double wc0 = w * c[0];
            g[0] += w * kcol[j];
            if (!k->ard && nl)
                g[1] += wc0 * q;
            if (k->type == GP_KERNEL_RQ)
                g[1 + nl] += w * c[1];
            for (size_t cc = 0; k->ard && cc < na; cc++) {
                double dc = a[cc] - b[cc];
                g[1 + cc] += wc0 * (dc * dc);
            }
            if (gz) {
                double *gzj = gz + j * kt->input_dim;
                for (size_t cc = 0; cc < na; cc++)
                    gzj[dim_of(k, cc)] += wc0 * (a[cc] - b[cc]) * kt->inv_ls[cc];
            }
        }
    }
}

/* The same pairs with the coordinates in vector lanes (kernel_block.h,
 * gp_kernel_block_known): the task's Z-gradient in a padded buffer of its
 * own, copied into the task's part of gzs at the end (each of its entries is
 * one coordinate's, so the copy is the sum). */
static void known_task_lanes(void *ctx, size_t t)
{
    const known_task *kt = ctx;
    const prep_leaf *L = kt->L;
    const gp_kernel *k = L->k;
    size_t na = L->na, m = kt->m, width = kt->ka.width;
    double *g = kt->partials + t * kt->np;
    double *gz = kt->gzs ? kt->gzs + t * kt->input_dim * m : NULL;
    double *gzp = gz ? kt->lane_gz + t * m * width : NULL;
    memset(g, 0, kt->np * sizeof *g);
    if (gz) {
        memset(gz, 0, kt->input_dim * m * sizeof *gz);
        memset(gzp, 0, m * width * sizeof *gzp);
    }
    for (size_t i = kt->bounds[t]; i < kt->bounds[t + 1]; i++)
        gp_kernel_block_known(&kt->ka, L->a + i * na, kt->K + i * kt->ldk, kt->W + i * kt->ldw, g,
                              gzp);
    for (size_t j = 0; gz && j < m; j++)
        for (size_t c = 0; c < na; c++)
            gz[j * kt->input_dim + dim_of(k, c)] = gzp[j * width + c];
}

/* The lanes' buffers (Z padded and by coordinate, the padded 1 / lengthscale,
 * each task's padded Z-gradient), filled into *ka; NULL where the lanes do not
 * apply (rq, more than GP_KNOWN_MAX_COORDS coordinates) or without memory:
 * then the pair loop above runs, with the same bits. */
static double *known_lanes_new(known_task *kt, gp_known_args *ka, size_t parts)
{
    const prep_leaf *L = kt->L;
    const gp_kernel *k = L->k;
    size_t na = L->na, m = kt->m, width = (na + 7) / 8 * 8;
    if (!gp_kernel_block_type(k->type) || na == 0 || na > GP_KNOWN_MAX_COORDS ||
        m > GP_MAX_ELEMENTS / (width + na + (kt->gzs ? parts * width : 0) + 1))
        return NULL;
    size_t count = m * width + m * na + width + (kt->gzs ? parts * m * width : 0);
    double *buf = calloc(count, sizeof *buf);
    if (buf == NULL)
        return NULL;
    double *zp = buf, *zt = zp + m * width, *inv = zt + m * na;
    for (size_t j = 0; j < m; j++)
        for (size_t c = 0; c < na; c++) {
            zp[j * width + c] = L->b[j * na + c];
            zt[j + c * m] = L->b[j * na + c];
        }
    memcpy(inv, kt->inv_ls, na * sizeof *inv);
    *ka = (gp_known_args){.type = k->type, .ard = k->ard, .iso_term = !k->ard && k->n_lengthscale,
                          .na = na, .m = m, .width = width, .zp = zp, .zt = zt, .inv = inv};
    kt->lane_gz = kt->gzs ? inv + width : NULL;
    return buf;
}

int gp_kernel_cross_grad_contract_known(const gp_kernel *k, const double *X, size_t n,
                                        const double *Z, size_t m, const double *K, size_t ldk,
                                        const double *W, size_t ldw, double *grad, double *gz,
                                        gp_error *err)
{
    if (gp_kernel_is_composite(k) || !gp_kernel_is_scaled_type(k->type))
        return gp_error_set(err, GP_EUNSUPPORTED, "kernel.type",
                            "the cross contraction takes one stationary leaf "
                            "(rbf, matern12, matern32, matern52, rq), not %s",
                            gp_kernel_name_or_unknown((int)k->type));
    size_t np = gp_kernel_n_params(k), na = prep_na(k), dm = k->input_dim * m;
    memset(grad, 0, np * sizeof *grad);
    if (gz)
        memset(gz, 0, dm * sizeof *gz);
    if (n == 0 || m == 0)
        return GP_OK;
    /* Ranges of X, the same for any thread count. */
    size_t bounds[PAIR_PARTS + 1];
    size_t parts = (double)n * (double)m >= PARALLEL_MIN_PAIRS ? PAIR_PARTS : 1;
    if (parts > n)
        parts = n;
    for (size_t t = 0; t <= parts; t++)
        bounds[t] = n * t / parts;
    size_t extra = parts * np + na + (gz ? parts * dm : 0);
    prep pr;
    prep_args pa = {X, Z, n, m, 0};
    if (prep_build(&pr, k, &pa, extra) != 0)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory contracting %zu x %zu pairs",
                            n, m);
    double *inv_ls = pr.extra + parts * np;
    for (size_t c = 0; c < na; c++)
        inv_ls[c] = 1.0 / scale_of(k, c);
    known_task kt = {.L = &pr.leaf[0], .m = m, .np = np, .input_dim = k->input_dim,
                     .bounds = bounds, .K = K, .W = W, .ldk = ldk, .ldw = ldw, .inv_ls = inv_ls,
                     .partials = pr.extra, .gzs = gz ? inv_ls + na : NULL};
    double *lanes = known_lanes_new(&kt, &kt.ka, parts);
    gp_parallel_for(parts, lanes ? known_task_lanes : known_task_run, &kt);
    free(lanes);
    for (size_t t = 0; t < parts; t++) { /* in task order: thread-count independent */
        for (size_t p = 0; p < np; p++)
            grad[p] += pr.extra[t * np + p];
        for (size_t i = 0; gz && i < dm; i++)
            gz[i] += kt.gzs[t * dm + i];
    }
    prep_free(&pr);
    return GP_OK;
}
