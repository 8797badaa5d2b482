/* Named API keys (server/keys.h): the keys file's parser, every malformed
 * case with the line it names; the scopes (admin > write > read) and models=
 * patterns; the constant-time digest compare and the lookup; the keyring's
 * reload (a bad file keeps the old keys); and the scopes column of the route
 * table (server/routes.def): every verb a keyed route takes needs a scope,
 * and the reload route needs admin. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "server/keys.h"
#include "server/route.h"

#define SECRET_A "aaaaaaaaaaaaaaaaaaaaaaaa"
#define SECRET_B "bbbbbbbbbbbbbbbbbbbbbbbb"

static gp_keys *parse_ok(const char *text)
{
    gp_keys *k = NULL;
    int line = -1;
    char msg[256] = "";
    int rc = gp_keys_parse(text, strlen(text), &k, &line, msg, sizeof msg);
    if (rc != 0)
        fprintf(stderr, "unexpected: %s\n", msg);
    assert_int_equal(rc, 0);
    assert_non_null(k);
    return k;
}

/* The file is refused at line want_line with a message holding want. */
static void parse_bad(const char *text, int want_line, const char *want)
{
    gp_keys *k = (gp_keys *)1;
    int line = -1;
    char msg[256] = "";
    int rc = gp_keys_parse(text, strlen(text), &k, &line, msg, sizeof msg);
    if (rc != GP_EDATA || line != want_line || strstr(msg, want) == NULL)
        fprintf(stderr, "for %s: rc %d line %d msg '%s' (want line %d, '%s')\n", text, rc, line,
                msg, want_line, want);
    assert_int_equal(rc, GP_EDATA);
    assert_null(k);
    assert_int_equal(line, want_line);
    assert_non_null(strstr(msg, want));
}

static void test_keys_parse_valid_file(void **state)
{
    (void)state;
    gp_keys *k = parse_ok("# the keys of team a\n"
                          "\n"
                          "  reader   read   " SECRET_A "\r\n"
                          "writer write,models=team-a.*,models=shared,rps=50,fits_per_minute=6 " SECRET_B "\n"
                          "boss\tread,admin\tsha256:"
                          "00112233445566778899aabbccddeeff00112233445566778899AABBCCDDEEFF");
    assert_int_equal(k->n, 3);
    assert_string_equal(k->keys[0].name, "reader");
    assert_int_equal(k->keys[0].scope, GP_SCOPE_READ);
    assert_int_equal(k->keys[0].n_models, 0);
    const gp_key *w = gp_keys_find(k, "writer");
    assert_non_null(w);
    assert_int_equal(w->scope, GP_SCOPE_WRITE);
    assert_int_equal(w->n_models, 2);
    assert_string_equal(w->models[0], "team-a.");
    assert_int_equal(w->prefix[0], 1);
    assert_string_equal(w->models[1], "shared");
    assert_int_equal(w->prefix[1], 0);
    assert_int_equal(w->rps, 50);
    assert_int_equal(w->fits_per_minute, 6);
    const gp_key *b = gp_keys_find(k, "boss");
    assert_int_equal(b->scope, GP_SCOPE_ADMIN); /* the highest listed counts */
    assert_int_equal(b->digest[0], 0x00);
    assert_int_equal(b->digest[31], 0xff);
    assert_null(gp_keys_find(k, "nobody"));
    gp_keys_free(k);
}

static void test_keys_parse_every_malformed_case(void **state)
{
    (void)state;
    parse_bad("", 0, "holds no key");
    parse_bad("# only a comment\n\n", 0, "holds no key");
    parse_bad("a read\n", 1, "expected NAME SCOPES SECRET, got 2 fields");
    parse_bad("ok read " SECRET_A "\na read " SECRET_B " extra\n", 2, "got 4 fields");
    parse_bad("bad/name read " SECRET_A "\n", 1, "key name must match");
    parse_bad("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa read " SECRET_A
              "\n",
              1, "key name must match"); /* 65 characters */
    parse_bad("a reed " SECRET_A "\n", 1, "unknown scope 'reed'");
    parse_bad("a read,,write " SECRET_A "\n", 1, "empty entry");
    parse_bad("a read, " SECRET_A "\n", 1, "empty entry");
    parse_bad("a models=x* " SECRET_A "\n", 1, "none of the scopes");
    parse_bad("a read,models=team/a* " SECRET_A "\n", 1, "a pattern is a model name");
    parse_bad("a read,models=* " SECRET_A "\n", 1, "a pattern is a model name");
    parse_bad("a read,models=a,models=b,models=c,models=d,models=e,models=f,models=g,models=h,"
              "models=i " SECRET_A "\n",
              1, "at most 8 models=");
    parse_bad("a read,rps=0 " SECRET_A "\n", 1, "rps must be an integer from 1");
    parse_bad("a read,rps=1x " SECRET_A "\n", 1, "rps must be an integer");
    parse_bad("a read,rps=10000000000 " SECRET_A "\n", 1, "rps must be an integer");
    parse_bad("a read,rps=5,rps=6 " SECRET_A "\n", 1, "rps is given twice");
    parse_bad("a read,fits_per_minute=-1 " SECRET_A "\n", 1, "fits_per_minute must be");
    parse_bad("a read short\n", 1, "at least 16 are required");
    parse_bad("a read sha256:abc\n", 1, "64 hex digits (got 3");
    parse_bad("a read sha256:"
              "g0112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n",
              1, "64 hex digits (0-9");
    parse_bad("a read " SECRET_A "\n# c\nb write " SECRET_B "\na admin xxxxxxxxxxxxxxxxxxxxxx\n",
              4, "key name 'a' is given twice");
    parse_bad("a read " SECRET_A "\nb write " SECRET_A "\n", 2,
              "same secret as key 'a'");
    char nul[] = "a read " SECRET_A "\nb read bbbb\0bbbbbbbbbbbbbbbbbbbb\n";
    gp_keys *k = NULL;
    int line = 0;
    char msg[200];
    assert_int_equal(gp_keys_parse(nul, sizeof nul - 1, &k, &line, msg, sizeof msg), GP_EDATA);
    assert_int_equal(line, 2);
    assert_non_null(strstr(msg, "NUL"));
}

static void test_keys_hashed_and_plain_secrets_match(void **state)
{
    (void)state;
    /* the digest of SECRET_A, written as a sha256: secret, finds the same key */
    gp_keys *plain = parse_ok("a read " SECRET_A "\n");
    char line[200];
    snprintf(line, sizeof line, "h read sha256:");
    for (int i = 0; i < GP_KEY_DIGEST; i++)
        snprintf(line + strlen(line), sizeof line - strlen(line), "%02x",
                 plain->keys[0].digest[i]);
    gp_keys *hashed = parse_ok(line);
    const gp_key *m = gp_keys_match(hashed, SECRET_A, strlen(SECRET_A));
    assert_non_null(m);
    assert_string_equal(m->name, "h");
    assert_null(gp_keys_match(hashed, SECRET_B, strlen(SECRET_B)));
    assert_null(gp_keys_match(hashed, SECRET_A, strlen(SECRET_A) - 1));
    assert_null(gp_keys_match(hashed, "", 0));
    gp_keys_free(plain);
    gp_keys_free(hashed);
}

static void test_keys_match_finds_each_key(void **state)
{
    (void)state;
    gp_keys *k = parse_ok("a read " SECRET_A "\nb write " SECRET_B "\n");
    assert_string_equal(gp_keys_match(k, SECRET_A, strlen(SECRET_A))->name, "a");
    assert_string_equal(gp_keys_match(k, SECRET_B, strlen(SECRET_B))->name, "b");
    gp_keys_free(k);
    gp_keys *one = NULL;
    assert_int_equal(gp_keys_single(SECRET_B, strlen(SECRET_B), &one), 0);
    const gp_key *d = gp_keys_match(one, SECRET_B, strlen(SECRET_B));
    assert_non_null(d);
    assert_string_equal(d->name, "default");
    assert_int_equal(d->scope, GP_SCOPE_ADMIN);
    gp_keys_free(one);
}

static void test_digest_equal_each_byte(void **state)
{
    (void)state;
    uint8_t a[GP_KEY_DIGEST], b[GP_KEY_DIGEST];
    for (int i = 0; i < GP_KEY_DIGEST; i++)
        a[i] = b[i] = (uint8_t)(i * 37 + 1);
    assert_int_equal(gp_digest_equal(a, b), 1);
    for (int i = 0; i < GP_KEY_DIGEST; i++)
        for (int bit = 0; bit < 8; bit++) {
            b[i] ^= (uint8_t)(1u << bit);
            assert_int_equal(gp_digest_equal(a, b), 0);
            b[i] ^= (uint8_t)(1u << bit);
        }
    memset(a, 0, sizeof a);
    memset(b, 0xff, sizeof b);
    assert_int_equal(gp_digest_equal(a, b), 0);
}

static void test_scopes_are_ordered(void **state)
{
    (void)state;
    gp_key k;
    memset(&k, 0, sizeof k);
    int want[4][4] = {
        /* key scope: row; needed: column (none, read, write, admin) */
        {1, 0, 0, 0}, {1, 1, 0, 0}, {1, 1, 1, 0}, {1, 1, 1, 1}};
    for (int have = 0; have < 4; have++)
        for (int need = 0; need < 4; need++) {
            k.scope = have;
            assert_int_equal(gp_key_allows_scope(&k, need), want[have][need]);
        }
    assert_string_equal(gp_scope_name(GP_SCOPE_WRITE), "write");
}

static void test_models_patterns(void **state)
{
    (void)state;
    gp_keys *k = parse_ok("a read,models=team-a.* " SECRET_A "\nb read,models=exact " SECRET_B
                          "\nc read xxxxxxxxxxxxxxxxxxxxxxxxx\n");
    const gp_key *a = gp_keys_find(k, "a"), *b = gp_keys_find(k, "b"), *c = gp_keys_find(k, "c");
    assert_true(gp_key_allows_model(a, "team-a.prices"));
    assert_true(gp_key_allows_model(a, "team-a."));
    assert_false(gp_key_allows_model(a, "team-b.prices"));
    assert_false(gp_key_allows_model(a, "team-a")); /* the '.' is part of the prefix */
    assert_true(gp_key_allows_model(b, "exact"));
    assert_false(gp_key_allows_model(b, "exact2"));
    assert_true(gp_key_allows_model(c, "anything"));
    gp_keys_free(k);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_keyring_reload_swaps_or_keeps(void **state)
{
    (void)state;
    char path[] = "/tmp/gp_test_keys_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    write_file(path, "a read " SECRET_A "\n");
    char msg[400];
    gp_keyring *kr = gp_keyring_open(path, NULL, msg, sizeof msg);
    assert_non_null(kr);
    gp_key got;
    assert_int_equal(gp_keyring_check(kr, SECRET_A, strlen(SECRET_A), &got), 1);
    assert_string_equal(got.name, "a");
    assert_int_equal(gp_keyring_check(kr, SECRET_B, strlen(SECRET_B), &got), 0);
    assert_string_equal(got.name, "");
    /* rotation: b comes, a goes */
    write_file(path, "b admin " SECRET_B "\nc read xxxxxxxxxxxxxxxxxxxxxxxx\n");
    size_t n = 0;
    int line = -1;
    char names[256];
    assert_int_equal(gp_keyring_reload(kr, &n, names, sizeof names, &line, msg, sizeof msg), 0);
    assert_int_equal(n, 2);
    assert_string_equal(names, "b");
    assert_string_equal(names + 2, "c");
    assert_int_equal(gp_keyring_check(kr, SECRET_A, strlen(SECRET_A), &got), 0);
    assert_int_equal(gp_keyring_check(kr, SECRET_B, strlen(SECRET_B), &got), 1);
    /* a malformed file: refused naming its line, the old keys stay */
    write_file(path, "b admin " SECRET_B "\nbroken\n");
    assert_int_equal(gp_keyring_reload(kr, &n, NULL, 0, &line, msg, sizeof msg), GP_EDATA);
    assert_int_equal(line, 2);
    assert_non_null(strstr(msg, "line 2"));
    assert_int_equal(gp_keyring_check(kr, SECRET_B, strlen(SECRET_B), &got), 1);
    assert_int_equal(gp_keyring_count(kr), 2);
    unlink(path);
    assert_int_not_equal(gp_keyring_reload(kr, &n, NULL, 0, &line, msg, sizeof msg), 0);
    assert_int_equal(gp_keyring_count(kr), 2);
    gp_keyring_free(kr);
    assert_null(gp_keyring_open(path, NULL, msg, sizeof msg)); /* gone */
}

/* Every verb of a keyed route needs a scope; verbs it does not take and
 * open routes need none; the table says what docs/design/api.md says. */
static void test_route_scopes_cover_every_verb(void **state)
{
    (void)state;
    const int verbs[] = {GP_VERB_GET, GP_VERB_POST, GP_VERB_PUT, GP_VERB_DELETE};
    for (int r = 0; r < GP_ROUTE_COUNT; r++)
        for (size_t v = 0; v < 4; v++) {
            int takes = (gp_route_verbs((gp_route_id)r) & verbs[v]) != 0;
            int scope = gp_route_scope((gp_route_id)r, verbs[v]);
            int want_scope = takes && gp_route_needs_auth((gp_route_id)r);
            if ((scope != GP_SCOPE_NONE) != want_scope)
                fprintf(stderr, "route %s verb %d: scope %d\n", gp_route_name((gp_route_id)r),
                        verbs[v], scope);
            assert_int_equal(scope != GP_SCOPE_NONE, want_scope);
        }
    assert_int_equal(gp_route_scope(GP_ROUTE_ADMIN_RELOAD, GP_VERB_POST), GP_SCOPE_ADMIN);
    assert_int_equal(gp_route_scope(GP_ROUTE_MODEL, GP_VERB_DELETE), GP_SCOPE_ADMIN);
    assert_int_equal(gp_route_scope(GP_ROUTE_MODEL, GP_VERB_GET), GP_SCOPE_READ);
    assert_int_equal(gp_route_scope(GP_ROUTE_MODELS, GP_VERB_POST), GP_SCOPE_WRITE);
    assert_int_equal(gp_route_scope(GP_ROUTE_PREDICT, GP_VERB_POST), GP_SCOPE_READ);
    assert_int_equal(gp_route_scope(GP_ROUTE_V2_INFER, GP_VERB_POST), GP_SCOPE_READ);
    assert_int_equal(gp_route_scope(GP_ROUTE_ALIAS, GP_VERB_PUT), GP_SCOPE_WRITE);
    assert_int_equal(gp_route_scope(GP_ROUTE_HEALTHZ, GP_VERB_GET), GP_SCOPE_NONE);
    assert_int_equal(gp_route_scope(GP_ROUTE_NONE, GP_VERB_GET), GP_SCOPE_NONE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keys_parse_valid_file),
        cmocka_unit_test(test_keys_parse_every_malformed_case),
        cmocka_unit_test(test_keys_hashed_and_plain_secrets_match),
        cmocka_unit_test(test_keys_match_finds_each_key),
        cmocka_unit_test(test_digest_equal_each_byte),
        cmocka_unit_test(test_scopes_are_ordered),
        cmocka_unit_test(test_models_patterns),
        cmocka_unit_test(test_keyring_reload_swaps_or_keeps),
        cmocka_unit_test(test_route_scopes_cover_every_verb),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
