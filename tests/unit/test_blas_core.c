/* Unit tests for core/base/blas_core.c: the OpenBLAS core a process restarts
 * with (gp_blas_core_choice) and the start-up line (gp_blas_core_describe). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "core/base/blas_core.h"

static const gp_cpu_features AVX512 = {1, 1, 1}, AVX2 = {0, 1, 1}, SSE = {0, 0, 0},
                             AVX2_NO_FMA = {0, 1, 0};

static gp_blas_core_seen seen_of(const char *core, gp_cpu_features cpu)
{
    gp_blas_core_seen s = {core, NULL, NULL, NULL, cpu};
    return s;
}

static void test_fallback_is_replaced(void **state)
{
    (void)state;
    gp_blas_core_seen s = seen_of("Prescott", AVX512);
    assert_string_equal(gp_blas_core_choice(&s), "SkylakeX");
    s = seen_of("Prescott", AVX2);
    assert_string_equal(gp_blas_core_choice(&s), "Haswell");
    s = seen_of("Sandybridge", AVX2);
    assert_string_equal(gp_blas_core_choice(&s), "Haswell");
    s = seen_of("NEHALEM", AVX512); /* names compared without case */
    assert_string_equal(gp_blas_core_choice(&s), "SkylakeX");
}

static void test_kept(void **state)
{
    (void)state;
    /* a core the library chose for a CPU it knows */
    gp_blas_core_seen s = seen_of("Haswell", AVX512);
    assert_null(gp_blas_core_choice(&s));
    s = seen_of("Zen", AVX2);
    assert_null(gp_blas_core_choice(&s));
    s = seen_of("SkylakeX", AVX512);
    assert_null(gp_blas_core_choice(&s));
    /* a CPU without AVX2 + FMA: the fallback is the right core */
    s = seen_of("Prescott", SSE);
    assert_null(gp_blas_core_choice(&s));
    s = seen_of("Prescott", AVX2_NO_FMA);
    assert_null(gp_blas_core_choice(&s));
    s = seen_of(NULL, AVX512);
    assert_null(gp_blas_core_choice(&s));
}

static void test_environment_decides(void **state)
{
    (void)state;
    gp_blas_core_seen s = seen_of("Prescott", AVX512);
    s.coretype_env = "Haswell"; /* the user's choice */
    assert_null(gp_blas_core_choice(&s));
    s.coretype_env = ""; /* set but empty: not a choice */
    assert_string_equal(gp_blas_core_choice(&s), "SkylakeX");
    s.guard_env = "Prescott"; /* already restarted: never twice */
    assert_null(gp_blas_core_choice(&s));
    s.guard_env = NULL;
    s.switch_env = "OFF";
    assert_null(gp_blas_core_choice(&s));
    s.switch_env = "on";
    assert_string_equal(gp_blas_core_choice(&s), "SkylakeX");
}

static void test_describe(void **state)
{
    (void)state;
    char buf[256];
    gp_blas_core_seen s = seen_of("SkylakeX", AVX512);
    s.coretype_env = "SkylakeX";
    s.guard_env = "Prescott";
    gp_blas_core_describe(&s, buf, sizeof buf);
    assert_non_null(strstr(buf, "OpenBLAS core SkylakeX"));
    assert_non_null(strstr(buf, "set by gpserve"));
    assert_non_null(strstr(buf, "chose Prescott"));
    s.guard_env = NULL;
    gp_blas_core_describe(&s, buf, sizeof buf);
    assert_non_null(strstr(buf, "from the environment"));
    s = seen_of("Prescott", AVX2);
    gp_blas_core_describe(&s, buf, sizeof buf);
    assert_non_null(strstr(buf, "fallback on this AVX2 CPU"));
    s = seen_of("Prescott", SSE);
    gp_blas_core_describe(&s, buf, sizeof buf);
    assert_non_null(strstr(buf, "the library's choice"));
    gp_blas_core_describe(&s, buf, 8); /* truncated, terminated */
    assert_int_equal(strlen(buf), 7);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fallback_is_replaced),
        cmocka_unit_test(test_kept),
        cmocka_unit_test(test_environment_decides),
        cmocka_unit_test(test_describe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
