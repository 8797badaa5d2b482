/* api: studies (docs/design/api.md, "Studies"). POST /v1/studies refusals
 * case by case (status, code, field; nothing stored), the configuration's
 * canonical JSON read back to itself, and the completion refusals of a
 * trial (not active 409, unknown 404, a non-finite or unknown metric 422:
 * the trial stays active), a Sobol design that replicas agree on, and the
 * Vizier rule of a client_id. */
#include "tests/unit/api_testutil.h"

#include "api/study.h"

static char dir[64], path[128];
static gp_api *api;

#define J "application/json"
/* A valid space and objective for cases whose error is elsewhere. */
#define SPACE "\"parameters\":[{\"name\":\"x0\",\"type\":\"double\",\"bounds\":[0,1]}]"
#define OBJ "\"objective\":{\"name\":\"y\",\"goal\":\"minimize\"}"

typedef struct bad_case {
    const char *label;
    const char *body;
    int status;
    const char *code;
    const char *field;
} bad_case;

static const bad_case cases[] = {
    {"missing name", "{" SPACE "," OBJ "}", 400, "invalid_argument", "name"},
    {"name with a slash", "{\"name\":\"a/b\"," SPACE "," OBJ "}", 400, "invalid_argument",
     "name"},
    {"name too long for its models",
     "{\"name\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"," SPACE "," OBJ "}",
     400, "invalid_argument", "name"},
    {"unknown field", "{\"name\":\"s\",\"colour\":1," SPACE "," OBJ "}", 400, "invalid_argument",
     "colour"},
    {"parameters missing", "{\"name\":\"s\"," OBJ "}", 400, "invalid_argument", "parameters"},
    {"parameters empty", "{\"name\":\"s\",\"parameters\":[]," OBJ "}", 400, "invalid_argument",
     "parameters"},
    {"bounds lo = hi",
     "{\"name\":\"s\",\"parameters\":[{\"name\":\"x0\",\"type\":\"double\",\"bounds\":[1,1]}],"
     OBJ "}",
     400, "invalid_argument", "parameters[0].bounds"},
    {"bounds lo > hi on the third",
     "{\"name\":\"s\",\"parameters\":[{\"name\":\"a\",\"type\":\"double\",\"bounds\":[0,1]},"
     "{\"name\":\"b\",\"type\":\"integer\",\"bounds\":[1,5]},"
     "{\"name\":\"c\",\"type\":\"double\",\"bounds\":[2,1]}]," OBJ "}",
     400, "invalid_argument", "parameters[2].bounds"},
    {"bounds one number",
     "{\"name\":\"s\",\"parameters\":[{\"name\":\"x0\",\"type\":\"double\",\"bounds\":[1]}],"
     OBJ "}",
     400, "invalid_argument", "parameters[0].bounds"},
    {"bounds missing",
     "{\"name\":\"s\",\"parameters\":[{\"name\":\"x0\",\"type\":\"double\"}]," OBJ "}", 400,
     "invalid_argument", "parameters[0].bounds"},
    {"integer bounds not integers",
     "{\"name\":\"s\",\"parameters\":[{\"name\":\"k\",\"type\":\"integer\",\"bounds\":[0.5,4]}],"
     OBJ "}",
     400, "invalid_argument", "parameters[0].bounds"},
    {"log scale with lo = 0",
     "{\"name\":\"s\",\"parameters\":[{\"name\":\"lr\",\"type\":\"double\",\"bounds\":[0,1],"
     "\"scale\":\"log\"}]," OBJ "}",
     400, "invalid_argument", "parameters[0].bounds"},
    {"log scale with lo < 0",
     "{\"name\":\"s\",\"parameters\":[{\"name\":\"lr\",\"type\":\"double\",\"bounds\":[-1,1],"
     "\"scale\":\"log\"}]," OBJ "}",
     400, "invalid_argument", "parameters[0].bounds"},
    {"unknown scale",
     "{\"name\":\"s\",\"parameters\":[{\"name\":\"lr\",\"type\":\"double\",\"bounds\":[1,2],"
     "\"scale\":\"sqrt\"}]," OBJ "}",
     400, "invalid_argument", "parameters[0].scale"},
    {"unknown type",
     "{\"name\":\"s\",\"parameters\":[{\"name\":\"x0\",\"type\":\"float\",\"bounds\":[0,1]}],"
     OBJ "}",
     400, "invalid_argument", "parameters[0].type"},
    {"type missing", "{\"name\":\"s\",\"parameters\":[{\"name\":\"x0\",\"bounds\":[0,1]}]," OBJ
     "}", 400, "invalid_argument", "parameters[0].type"},
    {"empty parameter name",
     "{\"name\":\"s\",\"parameters\":[{\"name\":\"\",\"type\":\"double\",\"bounds\":[0,1]}],"
     OBJ "}",
     400, "invalid_argument", "parameters[0].name"},
    {"duplicate parameter names",
     "{\"name\":\"s\",\"parameters\":[{\"name\":\"x\",\"type\":\"double\",\"bounds\":[0,1]},"
     "{\"name\":\"x\",\"type\":\"double\",\"bounds\":[0,1]}]," OBJ "}",
     400, "invalid_argument", "parameters[1].name"},
    {"unknown parameter field",
     "{\"name\":\"s\",\"parameters\":[{\"name\":\"x\",\"type\":\"double\",\"bounds\":[0,1],"
     "\"step\":2}]," OBJ "}",
     400, "invalid_argument", "parameters[0].step"},
    {"categorical with one value",
     "{\"name\":\"s\",\"parameters\":[{\"name\":\"o\",\"type\":\"categorical\",\"values\":"
     "[\"adam\"]}]," OBJ "}",
     400, "invalid_argument", "parameters[0].values"},
    {"categorical with a repeated value",
     "{\"name\":\"s\",\"parameters\":[{\"name\":\"o\",\"type\":\"categorical\",\"values\":"
     "[\"adam\",\"sgd\",\"adam\"]}]," OBJ "}",
     400, "invalid_argument", "parameters[0].values[2]"},
    {"categorical with bounds",
     "{\"name\":\"s\",\"parameters\":[{\"name\":\"o\",\"type\":\"categorical\",\"bounds\":"
     "[0,1]}]," OBJ "}",
     400, "invalid_argument", "parameters[0].bounds"},
    {"double with values",
     "{\"name\":\"s\",\"parameters\":[{\"name\":\"x\",\"type\":\"double\",\"values\":"
     "[\"a\",\"b\"]}]," OBJ "}",
     400, "invalid_argument", "parameters[0].values"},
    {"objective missing", "{\"name\":\"s\"," SPACE "}", 400, "invalid_argument", "objective"},
    {"unknown goal",
     "{\"name\":\"s\"," SPACE ",\"objective\":{\"name\":\"y\",\"goal\":\"minimise\"}}", 400,
     "invalid_argument", "objective.goal"},
    {"objective without a name", "{\"name\":\"s\"," SPACE ",\"objective\":{\"goal\":"
     "\"maximize\"}}", 400, "invalid_argument", "objective.name"},
    {"constraint without max",
     "{\"name\":\"s\"," SPACE "," OBJ ",\"constraints\":[{\"name\":\"c\"}]}", 400,
     "invalid_argument", "constraints[0].max"},
    {"constraint max not a number",
     "{\"name\":\"s\"," SPACE "," OBJ ",\"constraints\":[{\"name\":\"c\",\"max\":\"low\"}]}", 400,
     "invalid_argument", "constraints[0].max"},
    {"constraint named as the objective",
     "{\"name\":\"s\"," SPACE "," OBJ ",\"constraints\":[{\"name\":\"y\",\"max\":1}]}", 400,
     "invalid_argument", "constraints[0].name"},
    {"unknown acquisition",
     "{\"name\":\"s\"," SPACE "," OBJ ",\"acquisition\":{\"type\":\"ei\"}}", 400,
     "invalid_argument", "acquisition.type"},
    {"beta of log_ei", "{\"name\":\"s\"," SPACE "," OBJ ",\"acquisition\":{\"beta\":2}}", 400,
     "invalid_argument", "acquisition.beta"},
    {"negative beta",
     "{\"name\":\"s\"," SPACE "," OBJ ",\"acquisition\":{\"type\":\"ucb\",\"beta\":-1}}", 400,
     "invalid_argument", "acquisition.beta"},
    {"thompson with a kernel without a spectral density",
     "{\"name\":\"s\"," SPACE "," OBJ ",\"acquisition\":{\"type\":\"thompson\"},"
     "\"model\":{\"kernel\":{\"type\":\"linear\"}}}",
     422, "unsupported", "model.kernel"},
    {"periodic over two parameters (not positive definite)",
     "{\"name\":\"s\",\"parameters\":[{\"name\":\"x0\",\"type\":\"double\",\"bounds\":"
     "[0,1]},{\"name\":\"x1\",\"type\":\"double\",\"bounds\":[0,1]}]," OBJ ",\"model\":"
     "{\"method\":\"exact\",\"kernel\":{\"type\":\"periodic\"}}}",
     422, "unsupported", "model.kernel"},
    {"unknown model method", "{\"name\":\"s\"," SPACE "," OBJ ",\"model\":{\"method\":\"svgp\"}}",
     400, "invalid_argument", "model.method"},
    {"options under method auto",
     "{\"name\":\"s\"," SPACE "," OBJ ",\"model\":{\"options\":{\"max_iter\":5}}}", 400,
     "invalid_argument", "model.options"},
    {"unknown model field", "{\"name\":\"s\"," SPACE "," OBJ ",\"model\":{\"epochs\":3}}", 400,
     "invalid_argument", "model.epochs"},
    {"bad kernel, named as the model's",
     "{\"name\":\"s\"," SPACE "," OBJ ",\"model\":{\"kernel\":{\"type\":\"wiggle\"}}}", 400,
     "invalid_argument", "model.kernel.type"},
    {"initial_design 0", "{\"name\":\"s\"," SPACE "," OBJ ",\"initial_design\":0}", 400,
     "invalid_argument", "initial_design"},
    {"initial_design fractional", "{\"name\":\"s\"," SPACE "," OBJ ",\"initial_design\":2.5}",
     400, "invalid_argument", "initial_design"},
    {"trial_timeout_s below 1", "{\"name\":\"s\"," SPACE "," OBJ ",\"trial_timeout_s\":0.5}",
     400, "invalid_argument", "trial_timeout_s"},
    {"negative seed", "{\"name\":\"s\"," SPACE "," OBJ ",\"seed\":-3}", 400, "invalid_argument",
     "seed"},
    {"refit ratio 1", "{\"name\":\"s\"," SPACE "," OBJ ",\"refit\":{\"ratio\":1}}", 400,
     "invalid_argument", "refit.ratio"},
    {"malformed json", "{\"name\":\"s\",", 400, "malformed_json", ""},
};

static int group_setup(void **state)
{
    (void)state;
    gp_api_config cfg;
    gp_api_default_config(&cfg);
    cfg.db_path = tmp_db(dir, sizeof dir, path, sizeof path);
    gp_error err;
    if (gp_api_open(&cfg, &api, &err) != GP_OK) {
        fprintf(stderr, "gp_api_open: %s\n", err.message);
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    gp_api_close(api);
    rm_tree(dir);
    return 0;
}

static void post(gp_response *res, void (*fn)(gp_api *, const char *, const gp_request *,
                                               gp_response *),
                 const char *name, const char *body)
{
    gp_request req = make_req(J, body, NULL, 0);
    memset(res, 0, sizeof *res);
    fn(api, name, &req, res);
}

static void create(gp_response *res, const char *body)
{
    gp_request req = make_req(J, body, NULL, 0);
    memset(res, 0, sizeof *res);
    gp_api_create_study(api, &req, NULL, NULL, res);
}

static void run_case(void **state)
{
    const bad_case *c = *state;
    gp_response res;
    create(&res, c->body);
    expect_error(&res, c->status, c->code, c->field);
    gp_response_free(&res);
    /* nothing stored */
    memset(&res, 0, sizeof res);
    gp_api_get_study(api, "s", &res);
    expect_error(&res, 404, "not_found", "name");
    gp_response_free(&res);
}

/* ---- the configuration read back ---- */

#define FULL                                                                                   \
    "{\"name\":\"full\",\"parameters\":["                                                      \
    "{\"name\":\"lr\",\"type\":\"double\",\"bounds\":[0.0001,1],\"scale\":\"log\"},"           \
    "{\"name\":\"layers\",\"type\":\"integer\",\"bounds\":[1,8]},"                             \
    "{\"name\":\"opt\",\"type\":\"categorical\",\"values\":[\"adam\",\"sgd\",\"rmsprop\"]}],"  \
    "\"objective\":{\"name\":\"loss\",\"goal\":\"minimize\"},"                                 \
    "\"constraints\":[{\"name\":\"mem\",\"max\":0.5}],"                                        \
    "\"acquisition\":{\"type\":\"ucb\",\"beta\":3},\"initial_design\":4,\"seed\":11,"          \
    "\"trial_timeout_s\":60}"

static void config_round_trip(void **state)
{
    (void)state;
    json_error_t je;
    json_t *body = json_loads(FULL, JSON_DECODE_INT_AS_REAL, &je);
    assert_non_null(body);
    gp_study_config a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    gp_error err;
    assert_int_equal(gp_study_config_parse(api, body, &a, &err), GP_OK);
    assert_int_equal(gp_study_dim(&a), 5); /* 1 + 1 + 3 one-hot */
    assert_int_equal(a.initial_design, 4);
    assert_true(a.params[0].log_scale);
    json_t *ja = gp_study_config_json(&a);
    char *text = json_dumps(ja, GP_JSON_FLAGS);
    assert_int_equal(gp_study_config_read(api, text, &b, &err), GP_OK);
    json_t *jb = gp_study_config_json(&b);
    assert_true(json_equal(ja, jb));
    /* the defaults are written: the model's method and kernel */
    assert_string_equal(json_string_value(json_object_get(json_object_get(ja, "model"),
                                                           "method")),
                        "auto");
    /* auto: exact up to GP_STUDY_AUTO_EXACT_MAX trials, sgpr beyond */
    assert_string_equal(gp_study_method_for(&b, GP_STUDY_AUTO_EXACT_MAX), "exact");
    assert_string_equal(gp_study_method_for(&b, GP_STUDY_AUTO_EXACT_MAX + 1), "sgpr");
    assert_int_equal(b.acquisition, GP_STUDY_UCB);
    assert_true(b.beta == 3.0);
    free(text);
    json_decref(ja);
    json_decref(jb);
    json_decref(body);
    gp_study_config_free(&a);
    gp_study_config_free(&b);
}

static void default_initial_design(void **state)
{
    (void)state;
    json_error_t je;
    json_t *body = json_loads("{\"name\":\"d\"," SPACE "," OBJ "}", JSON_DECODE_INT_AS_REAL, &je);
    gp_study_config c;
    memset(&c, 0, sizeof c);
    gp_error err;
    assert_int_equal(gp_study_config_parse(api, body, &c, &err), GP_OK);
    assert_int_equal(c.initial_design, 4); /* 2 (D + 1) */
    assert_true(c.trial_timeout_s == 3600.0);
    json_decref(body);
    gp_study_config_free(&c);
}

static void duplicate_name_conflicts(void **state)
{
    (void)state;
    gp_response res;
    create(&res, "{\"name\":\"dup\"," SPACE "," OBJ "}");
    expect_status(&res, 201);
    gp_response_free(&res);
    create(&res, "{\"name\":\"dup\"," SPACE "," OBJ "}");
    expect_error(&res, 409, "conflict", "name");
    gp_response_free(&res);
}

/* ---- trials ---- */

static json_t *suggest(const char *study, const char *body, int status)
{
    gp_response res;
    post(&res, gp_api_study_suggest, study, body);
    expect_status(&res, status);
    json_t *j = res_json(&res);
    gp_response_free(&res);
    return j;
}

static int64_t first_id(json_t *j)
{
    return (int64_t)json_integer_value(json_object_get(json_array_get(json_object_get(j, "trials"),
                                                                      0),
                                                       "id"));
}

static void complete(const char *study, int64_t id, const char *body, gp_response *res)
{
    gp_request req = make_req(J, body, NULL, 0);
    gp_fit_job *refits[GP_API_STUDY_REFITS];
    size_t n = 0;
    memset(res, 0, sizeof *res);
    gp_api_study_complete(api, study, id, &req, res, refits, &n);
    for (size_t i = 0; i < n; i++)
        gp_fit_job_free(refits[i]);
}

static const char *trial_state(const char *study, int64_t id)
{
    static char state[16];
    gp_response res = {0};
    gp_api_study_trial(api, study, id, &res);
    expect_status(&res, 200);
    json_t *j = res_json(&res);
    snprintf(state, sizeof state, "%s", json_string_value(json_object_get(j, "state")));
    json_decref(j);
    gp_response_free(&res);
    return state;
}

static void completion_refusals(void **state)
{
    (void)state;
    gp_response res;
    create(&res, "{\"name\":\"t1\"," SPACE "," OBJ ",\"constraints\":[{\"name\":\"c\","
                 "\"max\":1}]}");
    expect_status(&res, 201);
    gp_response_free(&res);
    create(&res, "{\"name\":\"t2\"," SPACE "," OBJ "}");
    expect_status(&res, 201);
    gp_response_free(&res);
    json_t *s = suggest("t1", "{\"count\":1}", 200);
    int64_t id = first_id(s);
    assert_int_equal(id, 1);
    json_decref(s);
    struct {
        const char *body;
        int status;
        const char *code, *field;
    } bad[] = {
        {"{\"metrics\":{\"y\":\"NaN\",\"c\":0}}", 422, "invalid_data", "metrics.y"},
        {"{\"metrics\":{\"y\":1e999,\"c\":0}}", 422, "invalid_data", "metrics.y"},
        {"{\"metrics\":{\"y\":null,\"c\":0}}", 422, "invalid_data", "metrics.y"},
        {"{\"metrics\":{\"c\":0}}", 422, "invalid_data", "metrics.y"},
        {"{\"metrics\":{\"y\":1}}", 422, "invalid_data", "metrics.c"},
        {"{\"metrics\":{\"y\":1,\"c\":0,\"z\":2}}", 422, "invalid_data", "metrics.z"},
        {"{}", 422, "invalid_data", "metrics"},
        {"{\"metrics\":{\"y\":1,\"c\":0},\"reason\":\"x\"}", 400, "invalid_argument", "reason"},
        {"{\"metrics\":{\"y\":1,\"c\":0},\"colour\":1}", 400, "invalid_argument", "colour"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        complete("t1", id, bad[i].body, &res);
        print_message("%s -> %d\n", bad[i].body, res.status);
        expect_error(&res, bad[i].status, bad[i].code, bad[i].field);
        gp_response_free(&res);
        assert_string_equal(trial_state("t1", id), "active"); /* nothing stored */
    }
    /* a trial of no such id in this study (t2 has none): 404 */
    complete("t2", id, "{\"metrics\":{\"y\":1}}", &res);
    expect_error(&res, 404, "not_found", "trial");
    gp_response_free(&res);
    complete("t1", 99, "{\"metrics\":{\"y\":1,\"c\":0}}", &res);
    expect_error(&res, 404, "not_found", "trial");
    gp_response_free(&res);
    complete("nosuch", 1, "{\"metrics\":{\"y\":1}}", &res);
    expect_error(&res, 404, "not_found", "name");
    gp_response_free(&res);
    /* completed once; again is 409 naming the trial */
    complete("t1", id, "{\"metrics\":{\"y\":1.5,\"c\":0.25}}", &res);
    expect_status(&res, 200);
    gp_response_free(&res);
    assert_string_equal(trial_state("t1", id), "completed");
    complete("t1", id, "{\"metrics\":{\"y\":1,\"c\":0}}", &res);
    expect_error(&res, 409, "conflict", "trial");
    gp_response_free(&res);
    /* infeasible with a reason, no metrics */
    s = suggest("t1", "{}", 200);
    id = first_id(s);
    json_decref(s);
    complete("t1", id, "{\"infeasible\":true,\"reason\":\"diverged\"}", &res);
    expect_status(&res, 200);
    json_t *j = res_json(&res);
    assert_string_equal(json_string_value(json_object_get(j, "state")), "infeasible");
    assert_string_equal(json_string_value(json_object_get(j, "reason")), "diverged");
    json_decref(j);
    gp_response_free(&res);
}

/* The initial design is the study's Sobol sequence by trial index: two
 * studies of one seed suggest the same points, one at a time or four at once. */
static void sobol_design_agrees(void **state)
{
    (void)state;
    gp_response res;
    const char *space = "\"parameters\":[{\"name\":\"a\",\"type\":\"double\",\"bounds\":[-1,1]},"
                        "{\"name\":\"k\",\"type\":\"integer\",\"bounds\":[1,4]},"
                        "{\"name\":\"o\",\"type\":\"categorical\",\"values\":[\"p\",\"q\"]}]";
    char body[512];
    snprintf(body, sizeof body, "{\"name\":\"sa\",%s," OBJ ",\"seed\":5}", space);
    create(&res, body);
    expect_status(&res, 201);
    gp_response_free(&res);
    snprintf(body, sizeof body, "{\"name\":\"sb\",%s," OBJ ",\"seed\":5}", space);
    create(&res, body);
    expect_status(&res, 201);
    gp_response_free(&res);
    json_t *four = suggest("sa", "{\"count\":4}", 200);
    assert_string_equal(json_string_value(json_object_get(four, "source")), "sobol");
    json_t *list = json_object_get(four, "trials");
    assert_int_equal(json_array_size(list), 4);
    for (size_t i = 0; i < 4; i++) {
        json_t *one = suggest("sb", "{\"count\":1}", 200);
        json_t *a = json_object_get(json_array_get(list, i), "parameters");
        json_t *b = json_object_get(json_array_get(json_object_get(one, "trials"), 0),
                                    "parameters");
        assert_true(json_equal(a, b));
        double k = json_number_value(json_object_get(a, "k"));
        assert_true(k >= 1 && k <= 4 && k == floor(k));
        const char *o = json_string_value(json_object_get(a, "o"));
        assert_true(strcmp(o, "p") == 0 || strcmp(o, "q") == 0);
        for (size_t j = 0; j < i; j++) /* distinct */
            assert_false(json_equal(a, json_object_get(json_array_get(list, j), "parameters")));
        json_decref(one);
    }
    json_decref(four);
}

/* Vizier's rule: the same client_id gets its active trial back. */
static void client_gets_its_trial_back(void **state)
{
    (void)state;
    gp_response res;
    create(&res, "{\"name\":\"cl\"," SPACE "," OBJ "}");
    expect_status(&res, 201);
    gp_response_free(&res);
    json_t *a = suggest("cl", "{\"client_id\":\"w1\"}", 200);
    json_t *b = suggest("cl", "{\"client_id\":\"w1\"}", 200);
    json_t *c = suggest("cl", "{\"client_id\":\"w2\"}", 200);
    assert_int_equal(first_id(a), first_id(b));
    assert_string_equal(json_string_value(json_object_get(b, "source")), "client");
    assert_int_not_equal(first_id(a), first_id(c));
    complete("cl", first_id(a), "{\"metrics\":{\"y\":0.5}}", &res);
    expect_status(&res, 200);
    gp_response_free(&res);
    json_t *d = suggest("cl", "{\"client_id\":\"w1\"}", 200);
    assert_int_equal(first_id(d), 3); /* a new one once its trial is done */
    json_decref(a);
    json_decref(b);
    json_decref(c);
    json_decref(d);
}

static void suggest_refusals(void **state)
{
    (void)state;
    gp_response res;
    create(&res, "{\"name\":\"sr\"," SPACE "," OBJ "}");
    expect_status(&res, 201);
    gp_response_free(&res);
    post(&res, gp_api_study_suggest, "sr", "{\"count\":0}");
    expect_error(&res, 400, "invalid_argument", "count");
    gp_response_free(&res);
    post(&res, gp_api_study_suggest, "sr", "{\"count\":65}");
    expect_error(&res, 400, "invalid_argument", "count");
    gp_response_free(&res);
    post(&res, gp_api_study_suggest, "sr", "{\"client_id\":\"\"}");
    expect_error(&res, 400, "invalid_argument", "client_id");
    gp_response_free(&res);
    post(&res, gp_api_study_suggest, "nosuch", "{}");
    expect_error(&res, 404, "not_found", "name");
    gp_response_free(&res);
}

/* A trial run elsewhere: attached completed, refused when a parameter is
 * unknown or out of its bounds. */
static void attach_trials(void **state)
{
    (void)state;
    gp_response res;
    create(&res, "{\"name\":\"at\"," SPACE "," OBJ "}");
    expect_status(&res, 201);
    gp_response_free(&res);
    gp_fit_job *refits[GP_API_STUDY_REFITS];
    size_t n = 0;
    struct {
        const char *body;
        int status;
        const char *field;
    } cases2[] = {
        {"{\"parameters\":{\"x0\":0.5},\"metrics\":{\"y\":2}}", 201, NULL},
        {"{\"parameters\":{\"x0\":1.5},\"metrics\":{\"y\":2}}", 400, "parameters.x0"},
        {"{\"parameters\":{\"x1\":0.5},\"metrics\":{\"y\":2}}", 400, "parameters.x1"},
        {"{\"metrics\":{\"y\":2}}", 400, "parameters"},
    };
    for (size_t i = 0; i < sizeof cases2 / sizeof cases2[0]; i++) {
        gp_request req = make_req(J, cases2[i].body, NULL, 0);
        memset(&res, 0, sizeof res);
        gp_api_study_attach(api, "at", &req, &res, refits, &n);
        assert_int_equal(n, 0);
        if (cases2[i].field)
            expect_error(&res, cases2[i].status, "invalid_argument", cases2[i].field);
        else
            expect_status(&res, cases2[i].status);
        gp_response_free(&res);
    }
    memset(&res, 0, sizeof res);
    gp_api_get_study(api, "at", &res);
    json_t *j = res_json(&res);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "trials"),
                                                        "completed")),
                     1);
    json_t *best = json_object_get(j, "best_trial");
    assert_true(json_number_value(json_object_get(json_object_get(best, "metrics"), "y")) == 2.0);
    json_decref(j);
    gp_response_free(&res);
}

/* The same history gives the same suggestion, bit for bit: two studies of
 * one seed, the same trials attached in the same order, ask the model (its
 * in-memory stand-in fitted on the first initial_design trials, the rest
 * observed) for their next trial; and asked again at the same revision, a
 * study answers the same (its engine's copy moved on by nothing). */
static void same_history_same_suggestion(void **state)
{
    (void)state;
    gp_response res;
    const char *names[] = {"ha", "hb"};
    gp_fit_job *refits[GP_API_STUDY_REFITS];
    size_t n = 0;
    for (size_t s = 0; s < 2; s++) {
        char body[512];
        snprintf(body, sizeof body,
                 "{\"name\":\"%s\",\"parameters\":[{\"name\":\"a\",\"type\":\"double\","
                 "\"bounds\":[-1,1]},{\"name\":\"b\",\"type\":\"double\",\"bounds\":[0,2]}],"
                 OBJ ",\"initial_design\":5,\"seed\":9}",
                 names[s]);
        create(&res, body);
        expect_status(&res, 201);
        gp_response_free(&res);
        for (int i = 0; i < 9; i++) {
            double a = -0.9 + 0.2 * i, b = fmod(0.37 * i, 2.0);
            snprintf(body, sizeof body,
                     "{\"parameters\":{\"a\":%.17g,\"b\":%.17g},\"metrics\":{\"y\":%.17g}}",
                     a, b, (a - 0.2) * (a - 0.2) + (b - 1.1) * (b - 1.1));
            gp_request req = make_req(J, body, NULL, 0);
            memset(&res, 0, sizeof res);
            gp_api_study_attach(api, names[s], &req, &res, refits, &n);
            expect_status(&res, 201);
            gp_response_free(&res);
            for (size_t k = 0; k < n; k++)
                gp_fit_job_free(refits[k]);
        }
    }
    json_t *a = suggest("ha", "{\"count\":2}", 200);
    json_t *b = suggest("hb", "{\"count\":2}", 200);
    assert_string_equal(json_string_value(json_object_get(a, "source")), "model");
    json_t *ta = json_object_get(a, "trials"), *tb = json_object_get(b, "trials");
    for (size_t i = 0; i < 2; i++)
        assert_true(json_equal(json_object_get(json_array_get(ta, i), "parameters"),
                               json_object_get(json_array_get(tb, i), "parameters")));
    assert_false(json_equal(json_object_get(json_array_get(ta, 0), "parameters"),
                            json_object_get(json_array_get(ta, 1), "parameters")));
    json_decref(a);
    json_decref(b);
}

/* A space of two points: the design gives each once, then says there is
 * no new point left (400 naming count), never an active trial again. */
static void small_space_never_repeats(void **state)
{
    (void)state;
    gp_response res;
    create(&res, "{\"name\":\"tiny\",\"parameters\":[{\"name\":\"o\",\"type\":"
                 "\"categorical\",\"values\":[\"p\",\"q\"]}]," OBJ "}");
    expect_status(&res, 201);
    gp_response_free(&res);
    post(&res, gp_api_study_suggest, "tiny", "{\"count\":3}");
    expect_error(&res, 400, "invalid_argument", "count");
    gp_response_free(&res);
    json_t *a = suggest("tiny", "{}", 200), *b = suggest("tiny", "{}", 200);
    const char *oa = json_string_value(json_object_get(
        json_object_get(json_array_get(json_object_get(a, "trials"), 0), "parameters"), "o"));
    const char *ob = json_string_value(json_object_get(
        json_object_get(json_array_get(json_object_get(b, "trials"), 0), "parameters"), "o"));
    assert_string_not_equal(oa, ob);
    post(&res, gp_api_study_suggest, "tiny", "{}");
    expect_error(&res, 400, "invalid_argument", "count");
    gp_response_free(&res);
    json_decref(a);
    json_decref(b);
    /* a point reported infeasible is not suggested again, by the design nor by the model */
    create(&res, "{\"name\":\"tiny2\",\"parameters\":[{\"name\":\"o\",\"type\":"
                 "\"categorical\",\"values\":[\"p\",\"q\"]}]," OBJ ",\"initial_design\":1}");
    expect_status(&res, 201);
    gp_response_free(&res);
    a = suggest("tiny2", "{}", 200);
    complete("tiny2", first_id(a), "{\"infeasible\":true}", &res);
    expect_status(&res, 200);
    gp_response_free(&res);
    b = suggest("tiny2", "{}", 200);
    assert_false(json_equal(
        json_object_get(json_array_get(json_object_get(a, "trials"), 0), "parameters"),
        json_object_get(json_array_get(json_object_get(b, "trials"), 0), "parameters")));
    complete("tiny2", first_id(b), "{\"metrics\":{\"y\":1}}", &res);
    expect_status(&res, 200);
    gp_response_free(&res);
    post(&res, gp_api_study_suggest, "tiny2", "{}"); /* the model's turn: nothing new left */
    expect_error(&res, 400, "invalid_argument", "count");
    gp_response_free(&res);
    json_decref(a);
    json_decref(b);
}

#define N_CASES (sizeof cases / sizeof cases[0])

int main(void)
{
    struct CMUnitTest tests[N_CASES + 10];
    for (size_t i = 0; i < N_CASES; i++) {
        tests[i] = (struct CMUnitTest)cmocka_unit_test_prestate(run_case, (void *)&cases[i]);
        tests[i].name = cases[i].label;
    }
    tests[N_CASES] = (struct CMUnitTest)cmocka_unit_test(config_round_trip);
    tests[N_CASES + 1] = (struct CMUnitTest)cmocka_unit_test(default_initial_design);
    tests[N_CASES + 2] = (struct CMUnitTest)cmocka_unit_test(duplicate_name_conflicts);
    tests[N_CASES + 3] = (struct CMUnitTest)cmocka_unit_test(completion_refusals);
    tests[N_CASES + 4] = (struct CMUnitTest)cmocka_unit_test(sobol_design_agrees);
    tests[N_CASES + 5] = (struct CMUnitTest)cmocka_unit_test(client_gets_its_trial_back);
    tests[N_CASES + 6] = (struct CMUnitTest)cmocka_unit_test(suggest_refusals);
    tests[N_CASES + 7] = (struct CMUnitTest)cmocka_unit_test(attach_trials);
    tests[N_CASES + 8] = (struct CMUnitTest)cmocka_unit_test(same_history_same_suggestion);
    tests[N_CASES + 9] = (struct CMUnitTest)cmocka_unit_test(small_space_never_repeats);
    return cmocka_run_group_tests_name("api_studies", tests, group_setup, group_teardown);
}
