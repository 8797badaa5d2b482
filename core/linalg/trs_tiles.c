/* See trs_tiles.h. The update step of the batch-invariant solve with register
 * tiles.
 *
 * A tile is MR rows by up to 4 columns of B held in vector registers while
 * the whole range k0 .. k1 of L's columns passes: B is loaded and stored once
 * per range, and per column k of L a tile does MR / lanes loads of L, one
 * broadcast per column of B and MR x columns / lanes fused multiply-adds.
 * The portable update it replaces loaded and stored its rows of B every 3 or
 * 4 columns of L, and its loads were the limit.
 *
 * The bits: every element b_i still takes b_i <- fma(L_ik, -x_k, b_i) for k
 * in increasing order, one rounding each (vfnmadd computes -(L_ik x_k) + b_i
 * rounded once, the same value), so the tiles decide when the operations run,
 * never what they are. The rows a tile does not fill are masked.
 *
 * AVX-512 only: AVX2's 16 registers hold a tile of 8 rows x 4 columns, and
 * such tiles (with the rows a tile does not fill done one at a time) were
 * slower than the portable update on the AVX2 path (make GP_CLONES=avx2,
 * OPENBLAS_CORETYPE=Haswell: 4 columns at N = 2000 ~400 us against ~185),
 * so AVX2 CPUs keep the portable update. */
#include "core/linalg/trs_tiles.h"

#include <math.h>

#if GP_TRS_TILES

#include <immintrin.h>

#define AVX512_V 3 /* vectors of 8 rows in a tile */
#define AVX512_MR (8 * AVX512_V)
#define TILE_NR 4

/* ---- AVX-512 ---- */

#define T512 __attribute__((target("avx512f"), always_inline)) static inline

/* nr columns (a constant once inlined), AVX512_V masked vectors of rows. */
T512 __m512d load512(int full, __mmask8 mk, const double *p)
{
    return full ? _mm512_loadu_pd(p) : _mm512_maskz_loadu_pd(mk, p);
}

/* full: a constant once inlined; 1 for a tile of AVX512_MR rows (plain loads,
 * no masks kept live in the loop), 0 for the last rows (masked). */
T512 void tile512(const double *restrict l, size_t ldl, size_t kn, const double *restrict x,
                  double *restrict b, size_t ldb, const __mmask8 *mk, size_t nr, int full)
{
    __m512d a[TILE_NR][AVX512_V];
#pragma GCC unroll 4
    for (size_t c = 0; c < nr; c++)
#pragma GCC unroll 4
        for (size_t v = 0; v < AVX512_V; v++)
            a[c][v] = load512(full, mk[v], b + c * ldb + 8 * v);
    for (size_t k = 0; k < kn; k++) {
        const double *lk = l + k * ldl;
        __m512d lv[AVX512_V];
#pragma GCC unroll 4
        for (size_t v = 0; v < AVX512_V; v++)
            lv[v] = load512(full, mk[v], lk + 8 * v);
#pragma GCC unroll 4
        for (size_t c = 0; c < nr; c++) {
            __m512d xv = _mm512_set1_pd(x[c * ldb + k]);
#pragma GCC unroll 4
            for (size_t v = 0; v < AVX512_V; v++)
                a[c][v] = _mm512_fnmadd_pd(lv[v], xv, a[c][v]);
        }
    }
#pragma GCC unroll 4
    for (size_t c = 0; c < nr; c++)
#pragma GCC unroll 4
        for (size_t v = 0; v < AVX512_V; v++)
            if (full)
                _mm512_storeu_pd(b + c * ldb + 8 * v, a[c][v]);
            else
                _mm512_mask_storeu_pd(b + c * ldb + 8 * v, mk[v], a[c][v]);
}

/* nr columns (a constant once inlined) of rows i .. i + AVX512_MR. */
T512 void cols512(const double *l, size_t ldl, size_t kn, const double *x, double *b, size_t ldb,
                  const __mmask8 *mk, size_t nr, int full)
{
    switch (nr) {
    case 4: tile512(l, ldl, kn, x, b, ldb, mk, 4, full); break;
    case 3: tile512(l, ldl, kn, x, b, ldb, mk, 3, full); break;
    case 2: tile512(l, ldl, kn, x, b, ldb, mk, 2, full); break;
    default: tile512(l, ldl, kn, x, b, ldb, mk, 1, full); break;
    }
}

T512 void rows512(const double *l, size_t ldl, size_t kn, const double *x, double *b,
                  size_t ldb, size_t m, size_t nr)
{
    __mmask8 mk[AVX512_V];
    size_t i = 0;
    for (; i + AVX512_MR <= m; i += AVX512_MR)
        cols512(l + i, ldl, kn, x, b + i, ldb, mk, nr, 1);
    if (i == m)
        return;
    for (size_t v = 0; v < AVX512_V; v++) {
        size_t lo = 8 * v, in = m - i > lo ? m - i - lo : 0;
        mk[v] = in >= 8 ? 0xff : (__mmask8)((1u << in) - 1);
    }
    cols512(l + i, ldl, kn, x, b + i, ldb, mk, nr, 0);
}

__attribute__((target("avx512f"))) void gp_trs_update_avx512(const double *L, size_t ldl,
                                                              size_t k0, size_t k1, size_t r0,
                                                              size_t m, double *B, size_t nrhs,
                                                              size_t ldb)
{
    for (size_t j = 0; j < nrhs; j += TILE_NR) {
        size_t nr = nrhs - j < TILE_NR ? nrhs - j : TILE_NR;
        double *Bj = B + j * ldb;
        rows512(L + r0 + k0 * ldl, ldl, k1 - k0, Bj + k0, Bj + r0, ldb, m, nr);
    }
}

int gp_trs_tiles_supported(int path)
{
    __builtin_cpu_init();
    if (path == GP_TRS_AVX512)
        return __builtin_cpu_supports("avx512f") != 0;
    return path == GP_TRS_PORTABLE;
}

#else /* no tiles on this compiler or architecture: the portable update only */

int gp_trs_tiles_supported(int path)
{
    return path == GP_TRS_PORTABLE;
}

#endif
