/* gpserve core, internal to core/linalg: the register-tiled update step of
 * gp_solve_lower_columns (linalg.c) on AVX-512, written with intrinsics
 * because GCC does not keep a tile of accumulators in registers from
 * portable code.
 *
 * gp_trs_update_avx512: rows r0 .. r0 + m of the nrhs columns of B (leading
 * dimension ldb) take b_i <- fma(L_ik, -B_kj, b_i) for k = k0 .. k1 - 1 in
 * increasing order (rows k0 .. k1 of B already solved, disjoint from the
 * updated rows): the portable update's operations, so the same bits. */
#ifndef GP_LINALG_TRS_TILES_H
#define GP_LINALG_TRS_TILES_H

#include <stddef.h>

/* The update paths: the portable one (target_clones of linalg.c) and the
 * tiles. gp_solve_lower_columns_path takes one of these. */
enum { GP_TRS_PORTABLE = 0, GP_TRS_AVX512 = 1 };

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define GP_TRS_TILES 1
void gp_trs_update_avx512(const double *L, size_t ldl, size_t k0, size_t k1, size_t r0, size_t m,
                          double *B, size_t nrhs, size_t ldb);
#else
#define GP_TRS_TILES 0
#endif

/* 1 when this CPU (and build) can run the path. */
int gp_trs_tiles_supported(int path);

#endif
