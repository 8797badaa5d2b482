/* libFuzzer target: Open Inference Protocol V2 infer bodies (api/oip.c),
 * gp_api_oip_infer against models fitted once at start-up: "fz" (versions 1
 * and 2, fuzz_common.h), "gate" (rfgp online: an ask_oracle BOOL output) and
 * "dist" (rfgp of Gaussian inputs: infer is 422 unsupported). The first byte
 * of an input picks the model and version (byte % 6, the table below); the
 * rest is the body. The answer, in the protocol's error shape as the server
 * sends it (gp_api_oip_error), must be well-formed, valid JSON.
 *
 * Each body is also answered the way the server's batcher does (gp_api_oip_infer_parse, then gp_api_point_calls_run together with a
 * v1 predict of the same model that it may join): its answer must be byte
 * for byte the one it got alone (docs/design/api.md: an infer is a v1
 * predict, batched with them, with the same numbers). */
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct infer_target {
    const char *name;
    int version;
    const char *predict; /* a v1 predict body of that model and version */
} infer_target;

static const infer_target targets[] = {
    {"fz", 0, "{\"X\":[[0.5,1]]}"},
    {"fz", 1, "{\"X\":[0.5],\"version\":1}"},
    {"fz", 2, "{\"X\":[[0.5,1]],\"version\":2}"},
    {"fz", 9, "{\"X\":[0.5],\"version\":9}"},
    {"gate", 0, "{\"X\":[0.5,40]}"},
    {"dist", 0, "{\"X\":[{\"gaussian\":{\"mean\":[0.5],\"var\":[0.1]}}]}"},
};
#define N_TARGETS (sizeof targets / sizeof targets[0])

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    gp_api *api = fuzz_api_open();
    fuzz_fit_models(api);
    fuzz_fit(api, "{\"name\":\"gate\",\"method\":\"rfgp\",\"seed\":3,\"options\":{\"input\":"
                  "{\"kind\":\"point\",\"dim\":1},\"features\":16,\"warmup\":4},"
                  "\"X\":[0,0.5,1,1.5,2,2.5],\"y\":[0.02,0.47,0.86,0.99,0.9,0.61]}");
    fuzz_fit(api, "{\"name\":\"dist\",\"method\":\"rfgp\",\"seed\":4,\"options\":{\"input\":"
                  "{\"kind\":\"gaussian\",\"dim\":1},\"features\":16,\"inner_features\":8,"
                  "\"warmup\":2}}");
    return 0;
}

static gp_request json_request(const char *body, size_t len)
{
    gp_request req;
    memset(&req, 0, sizeof req);
    req.content_type = "application/json";
    req.body = body;
    req.body_len = len;
    return req;
}

/* The infer parsed and answered in a batch with a v1 predict: res gets its
 * answer (the parse's error when it does not parse). */
static void batched(const infer_target *t, const gp_request *req, gp_response *res)
{
    gp_point_call *calls[2] = {NULL, NULL};
    if (gp_api_oip_infer_parse(fuzz_api, t->name, t->version, req, &calls[0], res) != 0)
        return;
    gp_request pred = json_request(t->predict, strlen(t->predict));
    gp_response pres[2];
    memset(pres, 0, sizeof pres);
    size_t n = 1;
    if (gp_api_point_call_parse(fuzz_api, GP_CALL_PREDICT, t->name, &pred, &calls[1], &pres[1]) ==
        0) {
        if (gp_api_point_call_joinable(calls[0], calls[1]))
            n = 2;
        else
            gp_api_point_call_free(calls[1]);
    }
    gp_response_free(&pres[1]);
    memset(pres, 0, sizeof pres);
    gp_api_point_calls_run(fuzz_api, calls, n, pres);
    *res = pres[0];
    if (n == 2) {
        fuzz_check_response(&pres[1]);
        gp_response_free(&pres[1]);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > FUZZ_MAX_INPUT)
        return -1;
    const infer_target *t = &targets[data[0] % N_TARGETS];
    int failed;
    char *body = fuzz_copy(data + 1, size - 1, &failed);
    if (failed)
        return 0;
    gp_request req = json_request(body, size - 1);
    gp_response alone;
    memset(&alone, 0, sizeof alone);
    gp_api_oip_infer(fuzz_api, t->name, t->version, &req, &alone);
    gp_api_oip_error(&alone);
    fuzz_check_response(&alone);

    gp_response res;
    memset(&res, 0, sizeof res);
    batched(t, &req, &res);
    gp_api_oip_error(&res);
    fuzz_check_response(&res);
    if (res.status != alone.status || res.body_len != alone.body_len ||
        (res.body_len && memcmp(res.body, alone.body, res.body_len) != 0)) {
        fprintf(stderr, "fuzz: batched infer differs from alone:\n%d %.300s\n%d %.300s\n",
                alone.status, alone.body ? alone.body : "", res.status, res.body ? res.body : "");
        abort();
    }
    gp_response_free(&res);
    gp_response_free(&alone);
    free(body);
    return 0;
}
