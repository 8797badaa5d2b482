/* libFuzzer target: hkd's structured option `symmetry` (a JSON object,
 * core/methods/hkd/group.h, docs/design/api.md "Structured options"). The input is the
 * option's JSON text, put into a fit body of hkd with a small fixed X; the
 * first byte picks the number of input columns d (1 + (byte & 3): the checks
 * that need d, such as a dimension index in range, run once X is read) and,
 * with bit 4 set, whether a request that parses is also fitted (the group is
 * built and validated against the kernel while fitting: 201, or 422 naming
 * the generator). Fits are tiny (12 rows, 4 inducing points, 2 iterations) and
 * the version made is deleted again. Every response must be well-formed. */
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* X of d columns (12 rows; columns past d left out) and y. */
static const char *const bodies[4] = {
    "{\"name\":\"hs\",\"method\":\"hkd\",\"seed\":1,\"options\":{\"inducing\":4,"
    "\"max_iterations\":2,\"symmetry\":%s},"
    "\"X\":[-3,-2.5,-2,-1.5,-1,-0.5,0.5,1,1.5,2,2.5,3],"
    "\"y\":[0.9,0.6,0.1,-0.4,-0.8,-1,-1,-0.8,-0.4,0.1,0.6,0.9]}",
    "{\"name\":\"hs\",\"method\":\"hkd\",\"seed\":1,\"options\":{\"inducing\":4,"
    "\"max_iterations\":2,\"symmetry\":%s},"
    "\"X\":[[-3,1],[-2.5,-1],[-2,2],[-1.5,0],[-1,1],[-0.5,-2],[0.5,2],[1,0],[1.5,-1],[2,1],"
    "[2.5,0.5],[3,-0.5]],\"y\":[0.9,0.6,0.1,-0.4,-0.8,-1,-1,-0.8,-0.4,0.1,0.6,0.9]}",
    "{\"name\":\"hs\",\"method\":\"hkd\",\"seed\":1,\"options\":{\"inducing\":4,"
    "\"max_iterations\":2,\"symmetry\":%s},"
    "\"X\":[[-3,1,0],[-2.5,-1,1],[-2,2,0],[-1.5,0,1],[-1,1,0],[-0.5,-2,1],[0.5,2,0],[1,0,1],"
    "[1.5,-1,0],[2,1,1],[2.5,0.5,0],[3,-0.5,1]],"
    "\"y\":[0.9,0.6,0.1,-0.4,-0.8,-1,-1,-0.8,-0.4,0.1,0.6,0.9]}",
    "{\"name\":\"hs\",\"method\":\"hkd\",\"seed\":1,\"options\":{\"inducing\":4,"
    "\"max_iterations\":2,\"symmetry\":%s},"
    "\"X\":[[-3,1,0,2],[-2.5,-1,1,1],[-2,2,0,0],[-1.5,0,1,-1],[-1,1,0,-2],[-0.5,-2,1,2],"
    "[0.5,2,0,1],[1,0,1,0],[1.5,-1,0,-1],[2,1,1,-2],[2.5,0.5,0,2],[3,-0.5,1,1]],"
    "\"y\":[0.9,0.6,0.1,-0.4,-0.8,-1,-1,-0.8,-0.4,0.1,0.6,0.9]}",
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_api_open();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > FUZZ_MAX_INPUT)
        return -1;
    fuzz_fit_template(bodies[data[0] & 3], (const char *)data + 1, size - 1, (data[0] & 16) != 0,
                      "hs");
    return 0;
}
