/* Unit tests for the pure parts of server/ that read what a client or an
 * operator gives: configuration parsing (defaults, environment, flags, errors,
 * the help text, the API key file), the connection slots, constant-time
 * comparison and token parsing, percent-decoding and the media types, job
 * ids and the JSON scan. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server/config.h"
#include "server/jobs.h"
#include "server/metrics.h"
#include "server/route.h"
#include "server/slots.h"
#include "server/util.h"

/* ---- config ---- */

static const char *env_names[8];
static const char *env_values[8];
static size_t env_count;

static const char *fake_getenv(const char *name)
{
    for (size_t i = 0; i < env_count; i++)
        if (strcmp(env_names[i], name) == 0)
            return env_values[i];
    return NULL;
}

static void set_env(const char *name, const char *value)
{
    env_names[env_count] = name;
    env_values[env_count] = value;
    env_count++;
}

static FILE *sink(void)
{
    FILE *f = fopen("/dev/null", "w");
    assert_non_null(f);
    return f;
}

static int parse(gp_server_config *cfg, int argc, char **argv)
{
    FILE *out = sink(), *err = sink();
    int rc = gp_config_parse(cfg, argc, argv, fake_getenv, out, err);
    fclose(out);
    fclose(err);
    return rc;
}

static void test_config_defaults(void **state)
{
    (void)state;
    env_count = 0;
    gp_server_config cfg;
    char *argv[] = {"gpserve"};
    assert_int_equal(parse(&cfg, 1, argv), GP_CONFIG_OK);
    assert_string_equal(cfg.bind, "127.0.0.1");
    assert_int_equal(cfg.port, 8080);
    assert_string_equal(cfg.db, "./gpserve.db");
    assert_int_equal(cfg.threads, 0);
    assert_int_equal(cfg.fit_workers, 1);
    assert_int_equal(cfg.queue_size, 16);
    assert_int_equal(cfg.max_body_mb, 64);
    assert_int_equal(cfg.max_connections, 1024);
    assert_int_equal(cfg.timeout, 30);
    assert_int_equal(cfg.request_timeout, 120);
    assert_int_equal(cfg.max_connections_per_ip, 256);
    assert_null(cfg.api_key_file);
    assert_true(cfg.max_train_points > 0);
    assert_true(cfg.model_cache > 0);
    assert_int_equal(cfg.compute_threads, 0);
    assert_int_equal(cfg.idempotency_hours, 24);
}

static void test_config_env_and_flags(void **state)
{
    (void)state;
    env_count = 0;
    set_env("GPSERVE_PORT", "9000");
    set_env("GPSERVE_BIND", "0.0.0.0");
    set_env("GPSERVE_FIT_WORKERS", "3");
    set_env("GPSERVE_DB", "/tmp/env.db");
    set_env("GPSERVE_QUEUE_SIZE", ""); /* empty: unset */
    set_env("GPSERVE_REQUEST_TIMEOUT", "0");
    gp_server_config cfg;
    char *argv[] = {"gpserve", "--port", "0", "--db=/tmp/flag.db", "--max-body-mb", "2",
                    "--api-key-file", "/tmp/key", "--timeout=0", "--bind", "::1"};
    assert_int_equal(parse(&cfg, 11, argv), GP_CONFIG_OK);
    assert_int_equal(cfg.port, 0);            /* flag over env */
    assert_string_equal(cfg.db, "/tmp/flag.db");
    assert_string_equal(cfg.bind, "::1");
    assert_int_equal(cfg.fit_workers, 3);     /* env */
    assert_int_equal(cfg.queue_size, 16);     /* default */
    assert_int_equal(cfg.max_body_mb, 2);
    assert_int_equal(cfg.timeout, 0);
    assert_int_equal(cfg.request_timeout, 0); /* env: no deadline */
    assert_string_equal(cfg.api_key_file, "/tmp/key");
    char *deadline[] = {"gpserve", "--request-timeout", "3"};
    assert_int_equal(parse(&cfg, 3, deadline), GP_CONFIG_OK);
    assert_int_equal(cfg.request_timeout, 3); /* flag over env */
    env_count = 0;
}

static void test_config_errors(void **state)
{
    (void)state;
    env_count = 0;
    gp_server_config cfg;
    char *cases[][3] = {
        {"gpserve", "--port", "abc"},       {"gpserve", "--port", "65536"},
        {"gpserve", "--port", "-1"},        {"gpserve", "--port", "80x"},
        {"gpserve", "--port", ""},          {"gpserve", "--fit-workers", "0"},
        {"gpserve", "--threads", "1e3"},    {"gpserve", "--bind", "localhost"},
        {"gpserve", "--nope", "1"},         {"gpserve", "positional", "1"},
        {"gpserve", "--max-body-mb", " 5"}, {"gpserve", "--db", ""},
        {"gpserve", "--queue-size", "99999999999999999999"},
        {"gpserve", "--request-timeout", "-1"}, {"gpserve", "--request-timeout", "86401"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_int_equal(parse(&cfg, 3, cases[i]), GP_CONFIG_ERROR);
    char *missing[] = {"gpserve", "--port"};
    assert_int_equal(parse(&cfg, 2, missing), GP_CONFIG_ERROR);
    set_env("GPSERVE_TIMEOUT", "soon");
    char *none[] = {"gpserve"};
    assert_int_equal(parse(&cfg, 1, none), GP_CONFIG_ERROR);
    /* --help wins, even with a bad value around */
    char *help[] = {"gpserve", "--port", "abc", "--help"};
    assert_int_equal(parse(&cfg, 4, help), GP_CONFIG_HELP);
    env_count = 0;
    char *h[] = {"gpserve", "-h"};
    assert_int_equal(parse(&cfg, 2, h), GP_CONFIG_HELP);
    /* Fail closed: an API key file set but empty is an error, not "no key"
     * (another empty variable still counts as unset). */
    set_env("GPSERVE_API_KEY_FILE", "");
    assert_int_equal(parse(&cfg, 1, none), GP_CONFIG_ERROR);
    env_count = 0;
    set_env("GPSERVE_DB", "");
    assert_int_equal(parse(&cfg, 1, none), GP_CONFIG_OK);
    char *empty_key[] = {"gpserve", "--api-key-file", ""};
    assert_int_equal(parse(&cfg, 3, empty_key), GP_CONFIG_ERROR);
    env_count = 0;
    /* the keys file fails closed too, and one source of keys at a time */
    set_env("GPSERVE_KEYS_FILE", "");
    assert_int_equal(parse(&cfg, 1, none), GP_CONFIG_ERROR);
    env_count = 0;
    char *keys[] = {"gpserve", "--keys-file", "k.txt"};
    assert_int_equal(parse(&cfg, 3, keys), GP_CONFIG_OK);
    assert_string_equal(cfg.keys_file, "k.txt");
    char *both[] = {"gpserve", "--keys-file", "k.txt", "--api-key-file", "a.txt"};
    assert_int_equal(parse(&cfg, 5, both), GP_CONFIG_ERROR);
    set_env("GPSERVE_API_KEY_FILE", "a.txt");
    assert_int_equal(parse(&cfg, 3, keys), GP_CONFIG_ERROR);
    env_count = 0;
}

/* ---- connection slots ---- */

/* --tls-cert, --tls-key and --tls-client-ca: parsed from flags and the
 * environment; a half configuration (which would serve plain HTTP) and a TLS
 * variable set but empty are refused. */
static void test_config_tls(void **state)
{
    (void)state;
    gp_server_config cfg;
    env_count = 0;
    char *both[] = {"gpserve", "--tls-cert", "c.pem", "--tls-key", "k.pem"};
    assert_int_equal(parse(&cfg, 5, both), GP_CONFIG_OK);
    assert_string_equal(cfg.tls_cert, "c.pem");
    assert_string_equal(cfg.tls_key, "k.pem");
    assert_null(cfg.tls_client_ca);
    char *none[] = {"gpserve"};
    assert_int_equal(parse(&cfg, 1, none), GP_CONFIG_OK);
    assert_null(cfg.tls_cert);
    set_env("GPSERVE_TLS_CERT", "e.pem");
    set_env("GPSERVE_TLS_KEY", "ek.pem");
    set_env("GPSERVE_TLS_CLIENT_CA", "ca.pem");
    assert_int_equal(parse(&cfg, 1, none), GP_CONFIG_OK);
    assert_string_equal(cfg.tls_cert, "e.pem");
    assert_string_equal(cfg.tls_client_ca, "ca.pem");
    env_count = 0;
    char *cert_only[] = {"gpserve", "--tls-cert", "c.pem"};
    assert_int_equal(parse(&cfg, 3, cert_only), GP_CONFIG_ERROR);
    char *key_only[] = {"gpserve", "--tls-key", "k.pem"};
    assert_int_equal(parse(&cfg, 3, key_only), GP_CONFIG_ERROR);
    char *ca_only[] = {"gpserve", "--tls-client-ca", "ca.pem"};
    assert_int_equal(parse(&cfg, 3, ca_only), GP_CONFIG_ERROR);
    set_env("GPSERVE_TLS_CERT", "");
    assert_int_equal(parse(&cfg, 5, both), GP_CONFIG_ERROR);
    env_count = 0;
}

static gp_slot_key v4_key(unsigned char last)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(0x7f000000u | last);
    gp_slot_key k;
    gp_slot_key_of((const struct sockaddr *)&a, &k);
    return k;
}

static void test_slots_rules(void **state)
{
    (void)state;
    gp_slots *s = gp_slots_new(64, 40); /* a reserve of 16 */
    assert_non_null(s);
    gp_slot_key a = v4_key(2), b = v4_key(3), c = v4_key(4);
    /* a heavy address takes slots up to total - reserve... */
    for (int i = 0; i < 40; i++)
        assert_int_equal(gp_slots_take(s, &a), GP_SLOT_OK);
    assert_int_equal(gp_slots_take(s, &a), GP_SLOT_ADDRESS); /* rule 2 */
    for (int i = 0; i < 8; i++)
        assert_int_equal(gp_slots_take(s, &b), GP_SLOT_OK);
    assert_int_equal(gp_slots_in_use(s), 48);
    /* ... then only light ones (fewer than GP_SLOTS_LIGHT) get the reserve */
    assert_int_equal(gp_slots_take(s, &b), GP_SLOT_RESERVED);
    for (int i = 0; i < GP_SLOTS_LIGHT; i++)
        assert_int_equal(gp_slots_take(s, &c), GP_SLOT_OK);
    assert_int_equal(gp_slots_take(s, &c), GP_SLOT_RESERVED);
    assert_int_equal(gp_slots_of(s, &c), GP_SLOTS_LIGHT);
    /* rule 1: full for everyone */
    for (unsigned char x = 10; gp_slots_in_use(s) < 64; x++) {
        gp_slot_key light = v4_key(x);
        assert_int_equal(gp_slots_take(s, &light), GP_SLOT_OK);
    }
    gp_slot_key d = v4_key(200);
    assert_int_equal(gp_slots_take(s, &d), GP_SLOT_FULL);
    assert_int_equal(gp_slots_of(s, &d), 0);
    /* a slot given back is free again; one never taken changes nothing */
    gp_slots_give(s, &d);
    assert_int_equal(gp_slots_in_use(s), 64);
    gp_slots_give(s, &a);
    assert_int_equal(gp_slots_of(s, &a), 39);
    assert_int_equal(gp_slots_take(s, &d), GP_SLOT_OK);
    gp_slots_free(s);
    /* per_address 0: the total only */
    s = gp_slots_new(3, 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(gp_slots_take(s, &a), GP_SLOT_OK);
    assert_int_equal(gp_slots_take(s, &b), GP_SLOT_FULL);
    gp_slots_give(s, &a);
    assert_int_equal(gp_slots_take(s, &b), GP_SLOT_OK);
    gp_slots_free(s);
}

static void test_slots_keys(void **state)
{
    (void)state;
    struct sockaddr_in6 x, y, m;
    memset(&x, 0, sizeof x);
    x.sin6_family = AF_INET6;
    inet_pton(AF_INET6, "2001:db8:1:2::1", &x.sin6_addr);
    y = x;
    inet_pton(AF_INET6, "2001:db8:1:2:ffff::9", &y.sin6_addr); /* the same /64 */
    gp_slot_key kx, ky, km, kb;
    gp_slot_key_of((struct sockaddr *)&x, &kx);
    gp_slot_key_of((struct sockaddr *)&y, &ky);
    assert_memory_equal(&kx, &ky, sizeof kx);
    inet_pton(AF_INET6, "2001:db8:1:3::1", &y.sin6_addr); /* another /64 */
    gp_slot_key_of((struct sockaddr *)&y, &ky);
    assert_memory_not_equal(&kx, &ky, sizeof kx);
    /* an IPv4-mapped address counts as its IPv4 client */
    m = x;
    inet_pton(AF_INET6, "::ffff:127.0.0.3", &m.sin6_addr);
    gp_slot_key_of((struct sockaddr *)&m, &km);
    kb = v4_key(3);
    assert_memory_equal(&km, &kb, sizeof km);
}

/* Churn: many addresses taking and giving back in a table with collisions;
 * the counts stay exact (deletion keeps every key reachable). */
static void test_slots_churn(void **state)
{
    (void)state;
    enum { TOTAL = 200, ADDRS = 150 };
    gp_slots *s = gp_slots_new(TOTAL, 4);
    assert_non_null(s);
    size_t held[ADDRS] = {0};
    uint64_t r = 12345;
    size_t in_use = 0;
    for (int step = 0; step < 200000; step++) {
        r = r * 6364136223846793005u + 1442695040888963407u;
        size_t i = (size_t)(r >> 33) % ADDRS;
        gp_slot_key k = v4_key(0);
        k.b[13] = (unsigned char)(i >> 8);
        k.b[14] = (unsigned char)i;
        if ((r >> 20) & 1) {
            int rc = gp_slots_take(s, &k);
            if (rc == GP_SLOT_OK) {
                held[i]++;
                in_use++;
            }
        } else if (held[i] > 0) {
            gp_slots_give(s, &k);
            held[i]--;
            in_use--;
        }
        assert_int_equal(gp_slots_of(s, &k), held[i]);
    }
    assert_int_equal(gp_slots_in_use(s), in_use);
    for (size_t i = 0; i < ADDRS; i++) {
        gp_slot_key k = v4_key(0);
        k.b[13] = (unsigned char)(i >> 8);
        k.b[14] = (unsigned char)i;
        assert_int_equal(gp_slots_of(s, &k), held[i]);
    }
    gp_slots_free(s);
}

static void test_config_help_text(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    gp_config_usage(f, "gpserve");
    fclose(f);
    const char *expect[] = {"--port",          "GPSERVE_PORT",        "--bind",
                            "GPSERVE_BIND",    "--db",                "GPSERVE_DB",
                            "--threads",       "GPSERVE_THREADS",     "--fit-workers",
                            "--queue-size",    "GPSERVE_QUEUE_SIZE",  "--max-body-mb",
                            "--max-train-points", "GPSERVE_MAX_TRAIN_POINTS",
                            "--max-connections", "GPSERVE_MAX_CONNECTIONS", "--timeout",
                            "GPSERVE_TIMEOUT", "--api-key-file",      "GPSERVE_API_KEY_FILE",
                            "--model-cache",   "GPSERVE_MODEL_CACHE", "--compute-threads",
                            "--request-timeout", "GPSERVE_REQUEST_TIMEOUT",
                            "default 8080",    "--help"};
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++)
        assert_non_null(strstr(buf, expect[i]));
    free(buf);
}

static void test_parse_long(void **state)
{
    (void)state;
    long v = 0;
    assert_int_equal(gp_parse_long("42", 0, 100, &v), 0);
    assert_int_equal(v, 42);
    assert_int_equal(gp_parse_long("+7", 0, 100, &v), 0);
    assert_int_equal(v, 7);
    assert_int_equal(gp_parse_long("101", 0, 100, &v), -1);
    assert_int_equal(gp_parse_long("4 2", 0, 100, &v), -1);
    assert_int_equal(gp_parse_long("0x10", 0, 100, &v), -1);
    assert_int_equal(gp_parse_long(NULL, 0, 100, &v), -1);
    assert_int_equal(gp_parse_long("-", 0, 100, &v), -1);
}

static void test_api_key_file(void **state)
{
    (void)state;
    char path[] = "/tmp/gpserve_keyXXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "s3cret-0123456789\r\n", 19), 19);
    close(fd);
    char msg[256];
    char *key = gp_read_api_key(path, msg, sizeof msg);
    assert_non_null(key);
    assert_string_equal(key, "s3cret-0123456789");
    free(key);
    /* 15 bytes: refused, with the minimum named. */
    FILE *f = fopen(path, "w");
    fputs("0123456789abcde\n", f);
    fclose(f);
    assert_null(gp_read_api_key(path, msg, sizeof msg));
    assert_non_null(strstr(msg, "at least 16"));
    f = fopen(path, "w");
    fputs("0123456789abcdef\n", f);
    fclose(f);
    key = gp_read_api_key(path, msg, sizeof msg);
    assert_non_null(key);
    free(key);
    f = fopen(path, "w");
    fputs("\n", f);
    fclose(f);
    assert_null(gp_read_api_key(path, msg, sizeof msg));
    assert_non_null(strstr(msg, "empty"));
    unlink(path);
    assert_null(gp_read_api_key(path, msg, sizeof msg));
}

/* ---- auth helpers ---- */

static void test_ct_equal(void **state)
{
    (void)state;
    assert_true(gp_ct_equal("abc", 3, "abc", 3));
    assert_false(gp_ct_equal("abc", 3, "abd", 3));
    assert_false(gp_ct_equal("abc", 3, "abcd", 4));
    assert_false(gp_ct_equal("abcd", 4, "abc", 3));
    assert_false(gp_ct_equal("", 0, "a", 1));
    assert_true(gp_ct_equal("", 0, "", 0));
    /* a NUL-padded prefix must not pass */
    assert_false(gp_ct_equal("ab\0", 3, "ab", 2));
    assert_false(gp_ct_equal("xbc", 3, "abc", 3));
}

static void test_bearer(void **state)
{
    (void)state;
    const char *tok;
    size_t n;
    assert_true(gp_bearer_token("Bearer abc", &tok, &n));
    assert_int_equal(n, 3);
    assert_memory_equal(tok, "abc", 3);
    assert_true(gp_bearer_token("  bearer   k-1  ", &tok, &n));
    assert_int_equal(n, 3);
    assert_memory_equal(tok, "k-1", 3);
    assert_false(gp_bearer_token(NULL, &tok, &n));
    assert_false(gp_bearer_token("Basic abc", &tok, &n));
    assert_false(gp_bearer_token("Bearer", &tok, &n));
    assert_false(gp_bearer_token("Bearer   ", &tok, &n));
    assert_false(gp_bearer_token("Bearerabc", &tok, &n));
}

static void test_basic_password(void **state)
{
    (void)state;
    char buf[64];
    const char *pw;
    size_t n;
    /* "user:test-key-0123456789" */
    assert_true(gp_basic_password("Basic dXNlcjp0ZXN0LWtleS0wMTIzNDU2Nzg5", buf, sizeof buf,
                                  &pw, &n));
    assert_int_equal(n, 19);
    assert_memory_equal(pw, "test-key-0123456789", 19);
    /* an empty user name; scheme case and blanks; a colon inside the password */
    assert_true(gp_basic_password("  bAsIc   OmE6Yg==  ", buf, sizeof buf, &pw, &n)); /* ":a:b" */
    assert_int_equal(n, 3);
    assert_memory_equal(pw, "a:b", 3);
    /* padding may be left out */
    assert_true(gp_basic_password("Basic OmE6Yg", buf, sizeof buf, &pw, &n));
    assert_int_equal(n, 3);
    /* an empty password */
    assert_true(gp_basic_password("Basic dTo=", buf, sizeof buf, &pw, &n)); /* "u:" */
    assert_int_equal(n, 0);
    /* one to three bytes after the last full group */
    assert_true(gp_basic_password("Basic YTpi", buf, sizeof buf, &pw, &n)); /* "a:b" */
    assert_int_equal(n, 1);
    assert_memory_equal(pw, "b", 1);
    assert_true(gp_basic_password("Basic YTpiYw==", buf, sizeof buf, &pw, &n)); /* "a:bc" */
    assert_int_equal(n, 2);
    assert_true(gp_basic_password("Basic YTpiY2Q=", buf, sizeof buf, &pw, &n)); /* "a:bcd" */
    assert_int_equal(n, 3);
    assert_memory_equal(pw, "bcd", 3);
    /* + and / of the standard alphabet: "?>:?>" is Pz46Pz4= */
    assert_true(gp_basic_password("Basic Pz46Pz4=", buf, sizeof buf, &pw, &n));
    assert_memory_equal(pw, "?>", 2);
    assert_true(gp_basic_password("Basic +/8=", buf, sizeof buf, &pw, &n) == 0); /* no colon */

    assert_false(gp_basic_password(NULL, buf, sizeof buf, &pw, &n));
    assert_false(gp_basic_password("Bearer dXNlcjpwdw==", buf, sizeof buf, &pw, &n));
    assert_false(gp_basic_password("Basic", buf, sizeof buf, &pw, &n));
    assert_false(gp_basic_password("Basic    ", buf, sizeof buf, &pw, &n));
    assert_false(gp_basic_password("BasicdXNlcjpwdw==", buf, sizeof buf, &pw, &n));
    assert_false(gp_basic_password("Basic dXNlcg==", buf, sizeof buf, &pw, &n)); /* "user" */
    /* not base64: other alphabets, padding inside, wrong lengths, stray bits */
    assert_false(gp_basic_password("Basic test-key-0123456789", buf, sizeof buf, &pw, &n));
    assert_false(gp_basic_password("Basic dXNl_jpwdw==", buf, sizeof buf, &pw, &n));
    assert_false(gp_basic_password("Basic dX=lcjpwdw==", buf, sizeof buf, &pw, &n));
    assert_false(gp_basic_password("Basic dXNlcjpwd", buf, sizeof buf, &pw, &n));
    assert_false(gp_basic_password("Basic YTpiYw=", buf, sizeof buf, &pw, &n));
    assert_false(gp_basic_password("Basic YTpiYw===", buf, sizeof buf, &pw, &n));
    assert_false(gp_basic_password("Basic YTpiYx==", buf, sizeof buf, &pw, &n));
    assert_false(gp_basic_password("Basic dXNl cjpwdw==", buf, sizeof buf, &pw, &n));
    /* too long for the buffer: refused, never cut */
    char small[4];
    assert_false(gp_basic_password("Basic YTpiY2Q=", small, sizeof small, &pw, &n));
    assert_true(gp_basic_password("Basic YTpi", small, sizeof small, &pw, &n));
}

static void test_percent_decode_and_media(void **state)
{
    (void)state;
    char out[16];
    assert_int_equal(gp_percent_decode("a%20b", 5, out, sizeof out), 3);
    assert_string_equal(out, "a b");
    assert_int_equal(gp_percent_decode("a+b", 3, out, sizeof out), 3);
    assert_string_equal(out, "a+b");
    assert_int_equal(gp_percent_decode("%4a%4A", 6, out, sizeof out), 2);
    assert_string_equal(out, "JJ");
    assert_int_equal(gp_percent_decode("%4", 2, out, sizeof out), -1);
    assert_int_equal(gp_percent_decode("%g0", 3, out, sizeof out), -1);
    assert_int_equal(gp_percent_decode("%00", 3, out, sizeof out), -1);
    assert_int_equal(gp_percent_decode("abcd", 4, out, 4), -1);
    assert_int_equal(gp_percent_decode("abc", 3, out, 4), 3);

    assert_true(gp_media_type_is("application/json", "application/json"));
    assert_true(gp_media_type_is("Application/JSON; charset=utf-8", "application/json"));
    assert_true(gp_media_type_is(" text/csv ;header=present", "text/csv"));
    assert_false(gp_media_type_is("application/jsonx", "application/json"));
    assert_false(gp_media_type_is("text/plain", "text/csv"));
    assert_false(gp_media_type_is(NULL, "text/csv"));
}

static void test_job_id_and_json_scan(void **state)
{
    (void)state;
    char a[33], b[33];
    gp_job_id_generate(a);
    gp_job_id_generate(b);
    assert_int_equal(strlen(a), 32);
    assert_int_equal(strspn(a, "0123456789abcdef"), 32);
    assert_string_not_equal(a, b);

    const char *body = "{\"error\":{\"code\":\"invalid_data\",\"message\":\"y[3] is \\\"NaN\\\" "
                       "\\u00e9\\ud83d\\ude00\",\"field\":\"y[3]\"}}";
    char msg[64];
    assert_true(gp_json_find_string(body, strlen(body), "message", msg, sizeof msg));
    assert_string_equal(msg, "y[3] is \"NaN\" \xc3\xa9\xf0\x9f\x98\x80");
    assert_true(gp_json_find_string(body, strlen(body), "field", msg, sizeof msg));
    assert_string_equal(msg, "y[3]");
    assert_false(gp_json_find_string(body, strlen(body), "nope", msg, sizeof msg));
    assert_string_equal(msg, "");
    char tiny[5];
    assert_true(gp_json_find_string(body, strlen(body), "code", tiny, sizeof tiny));
    assert_string_equal(tiny, "inva");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_defaults),
        cmocka_unit_test(test_config_env_and_flags),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_config_tls),
        cmocka_unit_test(test_config_help_text),
        cmocka_unit_test(test_slots_rules),
        cmocka_unit_test(test_slots_keys),
        cmocka_unit_test(test_slots_churn),
        cmocka_unit_test(test_parse_long),
        cmocka_unit_test(test_api_key_file),
        cmocka_unit_test(test_ct_equal),
        cmocka_unit_test(test_bearer),
        cmocka_unit_test(test_basic_password),
        cmocka_unit_test(test_percent_decode_and_media),
        cmocka_unit_test(test_job_id_and_json_scan),
    };
    return cmocka_run_group_tests_name("server", tests, NULL, NULL);
}
