/* The OpenBLAS core choice: see core/base/blas_core.h. */
#include "core/base/blas_core.h"

#include <cblas.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

/* The cores below AVX2 that a DYNAMIC_ARCH OpenBLAS (0.3.x) falls back to on
 * a CPU model it does not know: Prescott is its generic x86-64 choice; the
 * others are what it gives a newer CPU of a family it only partly knows. On
 * a CPU with AVX2 + FMA every one of them leaves the wide kernels unused. */
static const char *const fallback_cores[] = {
    "Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom",
    "Sandybridge", "Opteron", "Opteron_SSE3", "Barcelona", "Bobcat", "Katmai",
    "Coppermine", "Northwood", "Banias", "Generic",
};

int gp_blas_core_is_fallback(const char *core)
{
    if (core == NULL)
        return 0;
    for (size_t i = 0; i < sizeof fallback_cores / sizeof fallback_cores[0]; i++)
        if (strcasecmp(core, fallback_cores[i]) == 0)
            return 1;
    return 0;
}

const char *gp_blas_core_choice(const gp_blas_core_seen *seen)
{
    if (seen->coretype_env != NULL && seen->coretype_env[0] != '\0')
        return NULL; /* the user's choice */
    if (seen->guard_env != NULL)
        return NULL; /* already restarted once */
    if (seen->switch_env != NULL && strcasecmp(seen->switch_env, "off") == 0)
        return NULL;
    if (!gp_blas_core_is_fallback(seen->core))
        return NULL;
    if (seen->cpu.avx512f && seen->cpu.avx2 && seen->cpu.fma)
        return "SkylakeX";
    if (seen->cpu.avx2 && seen->cpu.fma)
        return "Haswell";
    return NULL;
}

void gp_blas_core_describe(const gp_blas_core_seen *seen, char *buf, size_t size)
{
    const char *core = seen->core != NULL ? seen->core : "unknown";
    if (size == 0)
        return;
    if (seen->guard_env != NULL && seen->coretype_env != NULL)
        snprintf(buf, size, "OpenBLAS core %s (OPENBLAS_CORETYPE=%s set by gpserve: the "
                 "library chose %s on this CPU)", core, seen->coretype_env, seen->guard_env);
    else if (seen->coretype_env != NULL && seen->coretype_env[0] != '\0')
        snprintf(buf, size, "OpenBLAS core %s (OPENBLAS_CORETYPE=%s from the environment)", core,
                 seen->coretype_env);
    else if (gp_blas_core_is_fallback(core) && seen->cpu.avx2 && seen->cpu.fma)
        snprintf(buf, size, "OpenBLAS core %s (the library's fallback on this %s CPU, kept: "
                 "%s=off, or no restart)", core, seen->cpu.avx512f ? "AVX-512" : "AVX2",
                 GP_BLAS_CORE_ENV);
    else
        snprintf(buf, size, "OpenBLAS core %s (the library's choice)", core);
}

gp_cpu_features gp_cpu_features_detect(void)
{
    gp_cpu_features f = {0, 0, 0};
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    f.avx512f = __builtin_cpu_supports("avx512f") != 0;
    f.avx2 = __builtin_cpu_supports("avx2") != 0;
    f.fma = __builtin_cpu_supports("fma") != 0;
#endif
    return f;
}

const char *gp_blas_core_name(void)
{
    const char *name = openblas_get_corename();
    return name != NULL ? name : "unknown";
}

gp_blas_core_seen gp_blas_core_observe(void)
{
    gp_blas_core_seen seen = {gp_blas_core_name(), getenv("OPENBLAS_CORETYPE"),
                              getenv(GP_BLAS_CORE_GUARD), getenv(GP_BLAS_CORE_ENV),
                              gp_cpu_features_detect()};
    return seen;
}

int gp_blas_restart_prepare(void)
{
    gp_blas_core_seen seen = gp_blas_core_observe();
    const char *core = gp_blas_core_choice(&seen);
    int timeout = getenv("OPENBLAS_THREAD_TIMEOUT") == NULL;
    if (core == NULL && !timeout)
        return 0;
    if (timeout && setenv("OPENBLAS_THREAD_TIMEOUT", "16", 1) != 0)
        return 0;
    if (core != NULL && (setenv(GP_BLAS_CORE_GUARD, seen.core, 1) != 0 ||
                         setenv("OPENBLAS_CORETYPE", core, 1) != 0))
        return 0;
    return 1;
}
