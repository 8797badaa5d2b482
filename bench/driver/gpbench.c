/* gpbench: the experiment driver of bench/ (bench/README.md).
 *
 *   build/bench/gpbench run EXPERIMENT.json [--quick] [--datasets a,b] [--methods a,b]
 *                           [--set METHOD.OPTION=VALUE,...] [--no-peers] [--out FILE]
 *       every fit of the experiment; one JSON line of results each, to FILE
 *       (default stdout), then its peers' lines (not with --methods or
 *       --no-peers); progress on stderr.
 *   build/bench/gpbench table EXPERIMENT.json RESULTS.jsonl [--out FILE]
 *       the markdown tables of the experiment from those lines (default
 *       stdout), the command that made them written at the top.
 *   build/bench/gpbench --help
 * Run from the repository root (the datasets folder is found from there). */
#include <stdio.h>
#include <string.h>

#include "bench/driver/experiment.h"
#include "bench/driver/run.h"
#include "bench/driver/table.h"
#include "bench/support/blas.h"
#include "bench/support/cli.h"
#include "core/base/parallel.h"

#define USAGE                                                                              \
    "run EXPERIMENT.json [--quick|--smoke] [--datasets a,b] [--methods a,b] [--set M.O=V,...]\n"   \
    "                    [--no-peers] [--out FILE]\n"                                                   \
    "       gpbench table EXPERIMENT.json RESULTS.jsonl [--out FILE]"

int main(int argc, char **argv)
{
    /* Fits run as the daemon runs them: its OpenBLAS core (where the library
     * fell back to an older one), OpenBLAS on the calling thread and the
     * compute pool on every core (server/main.c). Without this the driver ran
     * the fallback core with OpenBLAS's threads fighting the pool's. */
    gp_bench_blas_setup(argv);
    gp_blas_set_threads(1);
    int quick = 0, no_peers = 0, smoke = 0;
    const char *only = NULL, *out_path = NULL, *methods = NULL, *set = NULL;
    const gp_bench_cli_option opts[] = {
        {"quick", GP_BENCH_CLI_FLAG, &quick, 0, 0, "run: the experiment's quick preset"},
        {"smoke", GP_BENCH_CLI_FLAG, &smoke, 0, 0,
         "run: --quick with each method's quick preset (its descriptor's) and no peers: "
         "every run in seconds, to check the file"},
        {"datasets", GP_BENCH_CLI_STRING, &only, 0, 0, "run: only these datasets (a,b)"},
        {"methods", GP_BENCH_CLI_STRING, &methods, 0, 0, "run: only these methods (a,b)"},
        {"set", GP_BENCH_CLI_STRING, &set, 0, 0,
         "run: METHOD.OPTION=VALUE,... over the file's options"},
        {"no-peers", GP_BENCH_CLI_FLAG, &no_peers, 0, 0,
         "run: not the experiment's peers (other libraries' scripts)"},
        {"out", GP_BENCH_CLI_STRING, &out_path, 0, 0, "write to FILE instead of stdout"},
    };
    const char *words[3];
    size_t n_words = 0;
    int rc = gp_bench_cli_parse(argc, argv, opts, sizeof opts / sizeof opts[0], USAGE, words, 3,
                                &n_words);
    if (rc != 0)
        return rc == 1 ? 0 : 2;
    int is_run = n_words == 2 && strcmp(words[0], "run") == 0;
    int is_table = n_words == 3 && strcmp(words[0], "table") == 0;
    if (!is_run && !is_table) {
        fprintf(stderr, "usage: gpbench %s\n", USAGE);
        return 2;
    }
    json_t *exp = gpb_experiment_load(words[1]);
    if (exp == NULL)
        return 2;
    FILE *out = out_path != NULL ? fopen(out_path, "w") : stdout;
    if (out == NULL) {
        fprintf(stderr, "gpbench: cannot write %s\n", out_path);
        json_decref(exp);
        return 2;
    }
    gpb_run_config cfg = {.quick = quick || smoke, .only = only, .methods = methods, .set = set,
                          .no_peers = no_peers || smoke, .smoke = smoke};
    rc = is_run ? gpb_run(exp, &cfg, out) : gpb_table(exp, words[1], words[2], out);
    if (out != stdout)
        fclose(out);
    json_decref(exp);
    return rc == 0 ? 0 : 1;
}
