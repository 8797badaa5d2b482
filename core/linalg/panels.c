/* Panelled level-3 products: see core/linalg/panels.h. */
#include "core/linalg/panels.h"

#include <cblas.h>

#include "core/base/parallel.h"
#include "core/linalg/linalg.h"

typedef struct panel_job {
    const double *A, *B;
    double *C;
    size_t m, n, k, lda, ldb, ldc;
    double alpha, beta;
    int trans;
    const size_t *bounds; /* column ranges of the symmetric product */
} panel_job;

static size_t col_tasks(size_t n)
{
    return (n + GP_PANEL_COLS - 1) / GP_PANEL_COLS;
}

static size_t panel_size(size_t n, size_t t)
{
    size_t first = t * GP_PANEL_COLS;
    return n - first < GP_PANEL_COLS ? n - first : GP_PANEL_COLS;
}

static int worth_tasks(size_t a, size_t b, size_t c)
{
    return (double)a * (double)b * (double)c >= GP_PANEL_MIN_FLOPS;
}

static void trsm_task(void *ctx, size_t t)
{
    const panel_job *j = ctx;
    gp_trsm_lower(j->A, j->m, j->lda, j->trans, j->C + t * GP_PANEL_COLS * j->ldc,
                  panel_size(j->n, t), j->ldc);
}

void gp_panel_trsm_lower(const double *L, size_t n, size_t ldl, int trans, double *B,
                         size_t nrhs, size_t ldb)
{
    if (!worth_tasks(n, n, nrhs) || nrhs <= GP_PANEL_COLS) {
        gp_trsm_lower(L, n, ldl, trans, B, nrhs, ldb);
        return;
    }
    panel_job j = {.A = L, .C = B, .m = n, .n = nrhs, .lda = ldl, .ldc = ldb, .trans = trans};
    gp_parallel_for(col_tasks(nrhs), trsm_task, &j);
}

/* Columns [first, last) of the lower triangle: dsyrk on the diagonal block,
 * dgemm for the rows below it. */
static void syrk_range(const panel_job *j, size_t first, size_t last)
{
    size_t w = last - first, below = j->n - last;
    const double *Af = j->trans ? j->A + first * j->lda : j->A + first;
    cblas_dsyrk(CblasColMajor, CblasLower, j->trans ? CblasTrans : CblasNoTrans, (blasint)w,
                (blasint)j->k, j->alpha, Af, (blasint)j->lda, 0.0, j->C + first + first * j->ldc,
                (blasint)j->ldc);
    if (below == 0)
        return;
    const double *Ab = j->trans ? j->A + last * j->lda : j->A + last;
    if (j->trans)
        cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, (blasint)below, (blasint)w,
                    (blasint)j->k, j->alpha, Ab, (blasint)j->lda, Af, (blasint)j->lda, 0.0,
                    j->C + last + first * j->ldc, (blasint)j->ldc);
    else
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, (blasint)below, (blasint)w,
                    (blasint)j->k, j->alpha, Ab, (blasint)j->lda, Af, (blasint)j->lda, 0.0,
                    j->C + last + first * j->ldc, (blasint)j->ldc);
}

static void syrk_task(void *ctx, size_t t)
{
    const panel_job *j = ctx;
    syrk_range(j, j->bounds[t], j->bounds[t + 1]);
}

void gp_panel_syrk_lower(int trans, size_t n, size_t k, double alpha, const double *A,
                         size_t lda, double *C, size_t ldc)
{
    if (n == 0)
        return;
    size_t bounds[GP_PANEL_SYRK_PARTS + 1];
    size_t parts = worth_tasks(n, n, k) ? gp_triangle_partition(n, GP_PANEL_SYRK_PARTS, bounds)
                                        : 1;
    if (parts <= 1) {
        bounds[0] = 0;
        bounds[1] = n;
        parts = 1;
    }
    panel_job j = {.A = A, .C = C, .n = n, .k = k, .lda = lda, .ldc = ldc, .alpha = alpha,
                   .trans = trans, .bounds = bounds};
    gp_parallel_for(parts, syrk_task, &j);
}

static void gemm_cols(const panel_job *j, size_t first, size_t size)
{
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (blasint)j->m, (blasint)size,
                (blasint)j->k, j->alpha, j->A, (blasint)j->lda, j->B + first * j->ldb,
                (blasint)j->ldb, j->beta, j->C + first * j->ldc, (blasint)j->ldc);
}

static void gemm_task(void *ctx, size_t t)
{
    const panel_job *j = ctx;
    gemm_cols(j, t * GP_PANEL_COLS, panel_size(j->n, t));
}

void gp_panel_gemm_nn(size_t m, size_t n, size_t k, double alpha, const double *A, size_t lda,
                      const double *B, size_t ldb, double beta, double *C, size_t ldc)
{
    if (m == 0 || n == 0)
        return;
    panel_job j = {.A = A, .B = B, .C = C, .m = m, .n = n, .k = k, .lda = lda, .ldb = ldb,
                   .ldc = ldc, .alpha = alpha, .beta = beta};
    if (!worth_tasks(m, n, k) || n <= GP_PANEL_COLS) {
        gemm_cols(&j, 0, n);
        return;
    }
    gp_parallel_for(col_tasks(n), gemm_task, &j);
}
