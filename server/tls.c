/* The TLS credentials and their reload; why, in server/tls.h. */
#include "server/tls.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The longest chain read from --tls-cert (leaf and intermediates). */
#define MAX_CHAIN 16

struct gp_tls_cred {
    atomic_uint refs; /* the gp_tls that has it current, and each connection that shook hands with it */
    gnutls_pcert_st pcert[MAX_CHAIN];
    unsigned n;
    gnutls_privkey_t key;
};

struct gp_tls {
    pthread_mutex_t lock; /* orders a reload's swap against the handshakes' acquire */
    gp_tls_cred *current;
    char *cert_file, *key_file;
    char *ca_pem; /* --tls-client-ca's text, NUL-terminated; NULL without it */
};

static void cred_free(gp_tls_cred *c)
{
    for (unsigned i = 0; i < c->n; i++)
        gnutls_pcert_deinit(&c->pcert[i]);
    if (c->key)
        gnutls_privkey_deinit(c->key);
    free(c);
}

/* Whether key_file holds the key of cert_file's leaf: GnuTLS's own credential
 * loader checks that (and both files' syntax), so a reload never serves a
 * certificate its key cannot sign for. */
static int pair_matches(const char *cert_file, const char *key_file, char *msg, size_t msg_size)
{
    gnutls_certificate_credentials_t check;
    if (gnutls_certificate_allocate_credentials(&check) < 0) {
        snprintf(msg, msg_size, "out of memory");
        return -1;
    }
    int rc = gnutls_certificate_set_x509_key_file2(check, cert_file, key_file,
                                                   GNUTLS_X509_FMT_PEM, NULL, 0);
    gnutls_certificate_free_credentials(check);
    if (rc < 0) {
        snprintf(msg, msg_size, "cannot use the certificate '%s' with the key '%s': %s", cert_file,
                 key_file, gnutls_strerror(rc));
        return -1;
    }
    return 0;
}

static gp_tls_cred *cred_load(const char *cert_file, const char *key_file, char *msg,
                              size_t msg_size)
{
    if (pair_matches(cert_file, key_file, msg, msg_size) != 0)
        return NULL;
    gp_tls_cred *c = calloc(1, sizeof *c);
    if (c == NULL) {
        snprintf(msg, msg_size, "out of memory");
        return NULL;
    }
    atomic_init(&c->refs, 1);
    unsigned n = MAX_CHAIN;
    int rc = gnutls_pcert_list_import_x509_file(c->pcert, &n, cert_file, GNUTLS_X509_FMT_PEM,
                                                NULL, NULL, 0);
    if (rc < 0) {
        snprintf(msg, msg_size, "cannot read the certificate chain '%s' (at most %d): %s",
                 cert_file, MAX_CHAIN, gnutls_strerror(rc));
        free(c);
        return NULL;
    }
    c->n = n;
    gnutls_datum_t raw = {NULL, 0};
    rc = gnutls_load_file(key_file, &raw);
    if (rc >= 0 && (rc = gnutls_privkey_init(&c->key)) >= 0)
        rc = gnutls_privkey_import_x509_raw(c->key, &raw, GNUTLS_X509_FMT_PEM, NULL, 0);
    gnutls_free(raw.data);
    if (rc < 0) {
        snprintf(msg, msg_size, "cannot read the key '%s': %s", key_file, gnutls_strerror(rc));
        cred_free(c);
        return NULL;
    }
    return c;
}

/* The client CA file as text, refused unless it holds a certificate. */
static char *ca_load(const char *ca_file, char *msg, size_t msg_size)
{
    gnutls_datum_t raw = {NULL, 0};
    int rc = gnutls_load_file(ca_file, &raw);
    if (rc < 0) {
        snprintf(msg, msg_size, "cannot read --tls-client-ca '%s': %s", ca_file,
                 gnutls_strerror(rc));
        return NULL;
    }
    gnutls_certificate_credentials_t check;
    int count = GNUTLS_E_MEMORY_ERROR;
    if (gnutls_certificate_allocate_credentials(&check) >= 0) {
        count = gnutls_certificate_set_x509_trust_mem(check, &raw, GNUTLS_X509_FMT_PEM);
        gnutls_certificate_free_credentials(check);
    }
    char *pem = count > 0 ? malloc((size_t)raw.size + 1) : NULL;
    if (pem) {
        memcpy(pem, raw.data, raw.size);
        pem[raw.size] = '\0';
    } else {
        snprintf(msg, msg_size, "--tls-client-ca '%s' holds no PEM certificate%s%s", ca_file,
                 count < 0 ? ": " : "", count < 0 ? gnutls_strerror(count) : "");
    }
    gnutls_free(raw.data);
    return pem;
}

gp_tls *gp_tls_open(const char *cert_file, const char *key_file, const char *client_ca_file,
                    char *msg, size_t msg_size)
{
    gp_tls *t = calloc(1, sizeof *t);
    if (t == NULL || pthread_mutex_init(&t->lock, NULL) != 0) {
        snprintf(msg, msg_size, "out of memory");
        free(t);
        return NULL;
    }
    t->cert_file = strdup(cert_file);
    t->key_file = strdup(key_file);
    if (t->cert_file == NULL || t->key_file == NULL) {
        snprintf(msg, msg_size, "out of memory");
        gp_tls_free(t);
        return NULL;
    }
    if ((t->current = cred_load(cert_file, key_file, msg, msg_size)) == NULL ||
        (client_ca_file && (t->ca_pem = ca_load(client_ca_file, msg, msg_size)) == NULL)) {
        gp_tls_free(t);
        return NULL;
    }
    return t;
}

int gp_tls_reload(gp_tls *t, char *msg, size_t msg_size)
{
    gp_tls_cred *fresh = cred_load(t->cert_file, t->key_file, msg, msg_size);
    if (fresh == NULL)
        return -1;
    pthread_mutex_lock(&t->lock);
    gp_tls_cred *old = t->current;
    t->current = fresh;
    pthread_mutex_unlock(&t->lock);
    gp_tls_release(old); /* freed when its last connection closes */
    return 0;
}

const char *gp_tls_client_ca_pem(const gp_tls *t)
{
    return t ? t->ca_pem : NULL;
}

gp_tls_cred *gp_tls_acquire(gp_tls *t)
{
    pthread_mutex_lock(&t->lock);
    gp_tls_cred *c = t->current;
    atomic_fetch_add(&c->refs, 1);
    pthread_mutex_unlock(&t->lock);
    return c;
}

void gp_tls_release(gp_tls_cred *c)
{
    if (c != NULL && atomic_fetch_sub(&c->refs, 1) == 1)
        cred_free(c);
}

void gp_tls_cred_get(gp_tls_cred *c, gnutls_pcert_st **pcert, unsigned *n,
                     gnutls_privkey_t *key)
{
    *pcert = c->pcert;
    *n = c->n;
    *key = c->key;
}

void gp_tls_free(gp_tls *t)
{
    if (t == NULL)
        return;
    gp_tls_release(t->current);
    pthread_mutex_destroy(&t->lock);
    free(t->cert_file);
    free(t->key_file);
    free(t->ca_pem);
    free(t);
}
