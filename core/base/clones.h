/* gpserve core: the vector-width clones of hot loops, one definition.
 *
 * GP_CLONES: on x86-64 GCC, a function compiled three times (AVX-512, AVX2 +
 * FMA, the baseline), the copy for the CPU chosen at load time, each at -O3
 * so that its loops vectorise. Code under it must give the same bits in
 * every clone: fma() where it fuses (one rounding in any clone), and no
 * a * b + c that a clone could contract (C11 mode contracts none). "arch=
 * haswell" would not do: target_clones dispatches arch= clones on the CPU
 * model, so every other x86-64 CPU would get the baseline, where fma() is a
 * libm call (~25 times slower).
 *
 * make GP_CLONES=avx2 (bench/README.md) defines GP_CLONES_AVX2: no AVX-512
 * clone, so that an AVX-512 machine runs the code an AVX2 machine runs. */
#ifndef GP_BASE_CLONES_H
#define GP_BASE_CLONES_H

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(GP_CLONES_AVX2)
#define GP_CLONES __attribute__((target_clones("arch=x86-64-v3", "default"), optimize("O3")))
#elif defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define GP_CLONES \
    __attribute__((target_clones("avx512f", "arch=x86-64-v3", "default"), optimize("O3")))
#else
#define GP_CLONES
#endif

#endif
