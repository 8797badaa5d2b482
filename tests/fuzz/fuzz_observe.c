/* libFuzzer target: observe bodies, gp_api_observe against the models that
 * learn online, each made once at start-up: "ex" (exact, 1 input), "ss" (ssgp,
 * 2 inputs), "rp" (rfgp, points, 2 outputs), "rg" (rfgp, Gaussian inputs),
 * "rm" (rfgp, messages normal, beta, gamma) and "mo" (exact, coregionalised,
 * 2 outputs with missing entries). The first byte of an input picks the
 * model (byte % 6), the rest is the body.
 *
 * An accepted observe changes the model (and may make a version), so that the
 * next input would meet another model: after each one the model is predicted
 * once (the answer must be well-formed) and then made again from scratch
 * (deleted, fitted or created anew), so that every input meets the model of
 * start-up and a finding replays from its input alone. */
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct observed_model {
    const char *name, *fit, *predict;
} observed_model;

static const observed_model models[] = {
    {"ex",
     "{\"name\":\"ex\",\"method\":\"exact\",\"seed\":1,\"options\":{\"max_iterations\":5},"
     "\"X\":[0,0.5,1,1.5,2,2.5,3,3.5],\"y\":[0.02,0.47,0.86,0.99,0.9,0.61,0.13,-0.36]}",
     "{\"X\":[0.25,4]}"},
    {"ss",
     "{\"name\":\"ss\",\"method\":\"ssgp\",\"seed\":2,\"options\":{\"max_iterations\":5,"
     "\"features\":8},\"X\":[[0,0],[0,1],[1,0],[1,1],[2,0],[2,1],[3,0],[3,1]],"
     "\"y\":[0,1,0.8,1.9,1.1,2.2,0.1,1.2]}",
     "{\"X\":[[0.5,0.5]]}"},
    {"rp",
     "{\"name\":\"rp\",\"method\":\"rfgp\",\"seed\":3,\"options\":{\"input\":{\"kind\":\"point\","
     "\"dim\":2},\"features\":16,\"warmup\":2,\"outputs\":2}}",
     "{\"X\":[[0.5,0.5]]}"},
    {"rg",
     "{\"name\":\"rg\",\"method\":\"rfgp\",\"seed\":4,\"options\":{\"input\":{\"kind\":\"gaussian\","
     "\"dim\":1},\"features\":16,\"inner_features\":8,\"warmup\":2}}",
     "{\"X\":[{\"gaussian\":{\"mean\":[0.5],\"var\":[0.1]}}]}"},
    {"rm",
     "{\"name\":\"rm\",\"method\":\"rfgp\",\"seed\":5,\"options\":{\"input\":{\"kind\":\"messages\","
     "\"messages\":[\"normal\",\"beta\",\"gamma\"]},\"features\":16,\"inner_features\":8,"
     "\"warmup\":2}}",
     "{\"X\":[{\"messages\":[{\"normal\":{\"mean\":0,\"var\":1}},{\"beta\":{\"a\":2,\"b\":1}},"
     "{\"gamma\":{\"shape\":2,\"rate\":1}}]}]}"},
    {"mo",
     "{\"name\":\"mo\",\"method\":\"exact\",\"seed\":6,\"options\":{\"max_iterations\":3,"
     "\"coregionalization\":{\"type\":\"icm\",\"rank\":1}},\"X\":[0,0.5,1,1.5,2,2.5],"
     "\"y\":[[0.1,1],[0.5,null],[null,1.8],[1,2.1],[0.9,null],[0.6,1.5]]}",
     "{\"X\":[0.25,4],\"full_covariance\":true}"},
};
#define N_MODELS (sizeof models / sizeof models[0])

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    gp_api *api = fuzz_api_open();
    for (size_t i = 0; i < N_MODELS; i++)
        fuzz_fit(api, models[i].fit);
    return 0;
}

static void predict_and_reset(const observed_model *m)
{
    fuzz_call_json(gp_api_predict, m->name, m->predict, strlen(m->predict));
    gp_response res;
    memset(&res, 0, sizeof res);
    gp_api_delete_model(fuzz_api, m->name, NULL, &res);
    if (res.status != 204) {
        fprintf(stderr, "fuzz: delete of %s answered %d\n", m->name, res.status);
        abort();
    }
    gp_response_free(&res);
    fuzz_fit(fuzz_api, m->fit);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > FUZZ_MAX_INPUT)
        return -1;
    const observed_model *m = &models[data[0] % N_MODELS];
    int status = fuzz_call_json(gp_api_observe, m->name, (const char *)data + 1, size - 1);
    if (status == 200)
        predict_and_reset(m);
    return 0;
}
