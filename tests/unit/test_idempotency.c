/* Unit tests of idempotent writes in the api (api/idempotency.c, api/sha256.c;
 * docs/design/api.md "Idempotent writes"): SHA-256 against FIPS 180-4's
 * examples, the Idempotency-Key's format and the request fingerprint, and
 * replays across two api handles on one database (two replicas): a retried
 * fit or observe answers the first answer and writes nothing, also when the
 * retry ran beside the first (both past the look-up, the store's key
 * decides), and a different request under the key is refused. */
#include "tests/unit/api_testutil.h"

static char dir[64], db[128];

static int group_setup(void **state)
{
    (void)state;
    tmp_db(dir, sizeof dir, db, sizeof db);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    rm_tree(dir);
    return 0;
}

static gp_api *open_api(void)
{
    gp_api_config cfg;
    gp_api_default_config(&cfg);
    cfg.db_path = db;
    gp_api *a = NULL;
    gp_error err;
    if (gp_api_open(&cfg, &a, &err) != GP_OK)
        fail_msg("gp_api_open: %s", err.message);
    return a;
}

static void sha_hex(const char *chunks[], size_t n, char out[65])
{
    gp_sha256 h;
    gp_sha256_init(&h);
    for (size_t i = 0; i < n; i++)
        gp_sha256_update(&h, chunks[i], strlen(chunks[i]));
    gp_sha256_hex(&h, out);
}

static void test_sha256(void **state)
{
    (void)state;
    char hex[65];
    const char *empty[] = {""};
    sha_hex(empty, 1, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const char *abc[] = {"a", "bc"};
    sha_hex(abc, 2, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    /* 448 bits: the padding takes a second block. */
    const char *two[] = {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"};
    sha_hex(two, 1, hex);
    assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    /* A million 'a' in pieces of 997 bytes (not a multiple of the block). */
    gp_sha256 h;
    gp_sha256_init(&h);
    char piece[997];
    memset(piece, 'a', sizeof piece);
    size_t left = 1000000;
    while (left > 0) {
        size_t n = left < sizeof piece ? left : sizeof piece;
        gp_sha256_update(&h, piece, n);
        left -= n;
    }
    gp_sha256_hex(&h, hex);
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static int parse_key(const char *key, const char *ctype, const char *body, gp_api_idem *k,
                     gp_error *err)
{
    gp_request req = make_req(ctype, body, NULL, 0);
    req.idempotency_key = key;
    return gp_api_idem_parse(&req, "observe", "m", k, err);
}

static void test_key_format_and_fingerprint(void **state)
{
    (void)state;
    gp_api_idem k, k2;
    gp_error err;
    assert_int_equal(parse_key(NULL, "application/json", "{}", &k, &err), GP_OK);
    assert_int_equal(k.present, 0);
    assert_int_equal(parse_key("5f1c-aa", "application/json", "{}", &k, &err), GP_OK);
    assert_int_equal(k.present, 1);
    assert_string_equal(k.key, "5f1c-aa");
    assert_string_equal(k.scope, "observe:m");
    assert_int_equal(strlen(k.fingerprint), 64);
    /* The draft's structured-field string is the same key. */
    assert_int_equal(parse_key("\"5f1c-aa\"", "application/json", "{}", &k2, &err), GP_OK);
    assert_string_equal(k2.key, "5f1c-aa");
    assert_string_equal(k2.fingerprint, k.fingerprint);
    char longest[GP_IDEM_KEY_MAX + 1], too_long[GP_IDEM_KEY_MAX + 2];
    memset(longest, 'x', sizeof longest - 1);
    longest[sizeof longest - 1] = '\0';
    memset(too_long, 'x', sizeof too_long - 1);
    too_long[sizeof too_long - 1] = '\0';
    assert_int_equal(parse_key(longest, "application/json", "{}", &k, &err), GP_OK);
    const char *bad[] = {"", "\"\"", too_long, "two words", "tab\there", "caf\xc3\xa9",
                         "\"a\"b\"", "del\x7f"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gp_error_clear(&err);
        assert_int_equal(parse_key(bad[i], "application/json", "{}", &k, &err), GP_EINVAL);
        assert_string_equal(err.field, "Idempotency-Key");
        assert_int_equal(k.present, 0);
    }
    /* The fingerprint covers the body, the content type and the query. */
    parse_key("k", "application/json", "{\"X\":[1]}", &k, &err);
    parse_key("k", "application/json", "{\"X\":[2]}", &k2, &err);
    assert_string_not_equal(k.fingerprint, k2.fingerprint);
    parse_key("k", "text/csv", "{\"X\":[1]}", &k2, &err);
    assert_string_not_equal(k.fingerprint, k2.fingerprint);
    gp_query_param q = {"seed", "3"};
    gp_request req = make_req("application/json", "{\"X\":[1]}", &q, 1);
    req.idempotency_key = "k";
    assert_int_equal(gp_api_idem_parse(&req, "observe", "m", &k2, &err), GP_OK);
    assert_string_not_equal(k.fingerprint, k2.fingerprint);
    parse_key("k", "application/json", "{\"X\":[1]}", &k2, &err);
    assert_string_equal(k.fingerprint, k2.fingerprint);
}

#define FIT_BODY                                                                               \
    "{\"name\":\"idem\",\"method\":\"exact\",\"kernel\":{\"type\":\"rbf\",\"variance\":1.0,"   \
    "\"lengthscale\":[0.8],\"fixed\":true},\"noise\":{\"variance\":0.01,\"fixed\":true},"      \
    "\"X\":[0,0.5,1,1.5],\"y\":[0.1,0.5,0.8,1.0]}"

static gp_fit_job *parse_keyed_fit(gp_api *a, const char *body, const char *key)
{
    gp_request req = make_req("application/json", body, NULL, 0);
    req.idempotency_key = key;
    gp_fit_job *job = NULL;
    gp_error err;
    if (gp_api_parse_fit(a, &req, &job, &err) != GP_OK)
        fail_msg("parse: %s", err.message);
    return job;
}

static const char *header_of(const gp_response *res, const char *name)
{
    for (size_t i = 0; i < res->n_headers; i++)
        if (strcmp(res->headers[i].name, name) == 0)
            return res->headers[i].value;
    return NULL;
}

/* Two replicas: a fit on one, its retry on the other (looked up first, and
 * run beside it: both past the look-up). */
static void test_fit_replayed_across_replicas(void **state)
{
    (void)state;
    gp_api *a = open_api(), *b = open_api();
    gp_fit_job *first = parse_keyed_fit(a, FIT_BODY, "fit-1");
    gp_fit_job *beside = parse_keyed_fit(b, FIT_BODY, "fit-1");
    gp_response r1 = {0}, r2 = {0}, r3 = {0};
    assert_int_equal(gp_api_fit_replay(a, first, &r1), 0); /* nothing recorded yet */
    assert_int_equal(gp_api_fit_replay(b, beside, &r2), 0);
    assert_int_equal(gp_api_run_fit(a, first, NULL, NULL, &r1, NULL), GP_OK);
    expect_status(&r1, 201);
    assert_null(header_of(&r1, "Idempotent-Replayed"));
    /* The one beside it fits too, but its save finds the key: the first answer. */
    assert_int_equal(gp_api_run_fit(b, beside, NULL, NULL, &r2, NULL), GP_OK);
    expect_status(&r2, 201);
    assert_string_equal(header_of(&r2, "Idempotent-Replayed"), "true");
    assert_string_equal(header_of(&r2, "Location"), "/v1/models/idem/versions/1");
    assert_int_equal(r2.body_len, r1.body_len);
    assert_memory_equal(r2.body, r1.body, r1.body_len);
    /* A later retry is answered at the look-up. */
    gp_fit_job *later = parse_keyed_fit(b, FIT_BODY, "fit-1");
    assert_int_equal(gp_api_fit_replay(b, later, &r3), 1);
    expect_status(&r3, 201);
    assert_memory_equal(r3.body, r1.body, r1.body_len);
    gp_response_free(&r3);
    memset(&r3, 0, sizeof r3);
    gp_api_get_model(a, "idem", 0, &r3);
    json_t *j = res_json(&r3);
    assert_int_equal(json_array_size(json_object_get(j, "versions")), 1);
    json_decref(j);
    gp_response_free(&r3);
    memset(&r3, 0, sizeof r3);
    /* Another body under the key: 409 naming the header. */
    gp_fit_job *other = parse_keyed_fit(b, "{\"name\":\"idem\",\"method\":\"exact\",\"X\":[0,1],\"y\":[0,1]}",
                                        "fit-1");
    assert_int_equal(gp_api_fit_replay(b, other, &r3), 1);
    expect_error(&r3, 409, "conflict", "Idempotency-Key");
    gp_fit_job_free(other);
    gp_fit_job_free(later);
    gp_fit_job_free(beside);
    gp_fit_job_free(first);
    gp_response_free(&r1);
    gp_response_free(&r2);
    gp_response_free(&r3);
    gp_api_close(b);
    gp_api_close(a);
}

static void observe_keyed(gp_api *a, const char *body, const char *key, gp_response *res)
{
    memset(res, 0, sizeof *res);
    gp_request req = make_req("application/json", body, NULL, 0);
    req.idempotency_key = key;
    gp_api_observe(a, "idem-obs", &req, res);
}

/* An observe retried on the other replica adds nothing; its model on either
 * replica counts the rows once. */
static void test_observe_replayed_across_replicas(void **state)
{
    (void)state;
    gp_api *a = open_api(), *b = open_api();
    gp_response r1 = {0}, r2 = {0};
    fit_json(a,
             "{\"name\":\"idem-obs\",\"method\":\"exact\",\"kernel\":{\"type\":\"rbf\","
             "\"fixed\":true},\"noise\":{\"variance\":0.01,\"fixed\":true},"
             "\"X\":[0,1,2],\"y\":[0,1,0]}",
             &r1);
    expect_status(&r1, 201);
    gp_response_free(&r1);
    observe_keyed(a, "{\"X\":[3,4],\"y\":[1,0]}", "obs-1", &r1);
    expect_status(&r1, 200);
    observe_keyed(b, "{\"X\":[3,4],\"y\":[1,0]}", "obs-1", &r2);
    expect_status(&r2, 200);
    assert_string_equal(header_of(&r2, "Idempotent-Replayed"), "true");
    assert_int_equal(r2.body_len, r1.body_len);
    assert_memory_equal(r2.body, r1.body, r1.body_len);
    gp_response_free(&r2);
    observe_keyed(a, "{\"X\":[3,4],\"y\":[1,0]}", "obs-1", &r2);
    assert_string_equal(header_of(&r2, "Idempotent-Replayed"), "true");
    gp_response_free(&r2);
    for (int i = 0; i < 2; i++) {
        memset(&r2, 0, sizeof r2);
        gp_api_get_model(i ? b : a, "idem-obs", 0, &r2);
        json_t *j = res_json(&r2);
        assert_int_equal(json_integer_value(json_object_get(j, "n_train")), 5);
        json_decref(j);
        gp_response_free(&r2);
    }
    observe_keyed(b, "{\"X\":[3,4],\"y\":[1,1]}", "obs-1", &r2);
    expect_error(&r2, 409, "conflict", "Idempotency-Key");
    gp_response_free(&r2);
    observe_keyed(b, "{\"X\":[3,4],\"y\":[1,0]}", "", &r2);
    expect_error(&r2, 400, "invalid_argument", "Idempotency-Key");
    gp_response_free(&r2);
    gp_response_free(&r1);
    gp_api_close(b);
    gp_api_close(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256),
        cmocka_unit_test(test_key_format_and_fingerprint),
        cmocka_unit_test(test_fit_replayed_across_replicas),
        cmocka_unit_test(test_observe_replayed_across_replicas),
    };
    return cmocka_run_group_tests_name("idempotency", tests, group_setup, group_teardown);
}
