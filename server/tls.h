/* gpserve server: the TLS credentials of --tls-cert / --tls-key (and the
 * client CA of --tls-client-ca), re-read on SIGHUP.
 *
 * libmicrohttpd runs the TLS (GnuTLS) and asks for the certificate in each
 * handshake through a callback (MHD_OPTION_HTTPS_CERT_CALLBACK, in
 * server/conn.c). The callback hands out the current credentials with a
 * reference held by the connection until it closes; a reload builds new ones
 * and swaps the pointer under a lock, so a connection keeps the key pair it
 * shook hands with, new handshakes get the new pair, and nothing is dropped.
 * A new pair that does not load (unreadable, not PEM, key not matching the
 * certificate) leaves the current one in place. */
#ifndef GP_SERVER_TLS_H
#define GP_SERVER_TLS_H

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <stddef.h>

/* TLS 1.2 and 1.3 only; AEAD ciphers with forward secrecy (ECDHE): Mozilla's
 * "intermediate" set. The server's order wins. Why: docs/design/api.md, TLS. */
#define GP_TLS_PRIORITIES                                                                          \
    "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:-CIPHER-ALL:+AES-256-GCM:+AES-128-GCM:"           \
    "+CHACHA20-POLY1305:-MAC-ALL:+AEAD:-KX-ALL:+ECDHE-ECDSA:+ECDHE-RSA:-GROUP-ALL:+GROUP-X25519:"  \
    "+GROUP-SECP256R1:+GROUP-SECP384R1:%SERVER_PRECEDENCE"

/* One loaded certificate chain and key; shared by the handshakes that used it. */
typedef struct gp_tls_cred gp_tls_cred;

typedef struct gp_tls gp_tls;

/* Load cert_file and key_file (and client_ca_file, may be NULL); NULL with a
 * message in msg when one does not load. */
gp_tls *gp_tls_open(const char *cert_file, const char *key_file, const char *client_ca_file,
                    char *msg, size_t msg_size);

/* Re-read the certificate and key files: 0 and the new pair in use, or -1
 * with why in msg and the old pair kept. The client CA is not re-read. */
int gp_tls_reload(gp_tls *t, char *msg, size_t msg_size);

/* The client CAs as PEM text (for MHD_OPTION_HTTPS_MEM_TRUST), or NULL. */
const char *gp_tls_client_ca_pem(const gp_tls *t);

/* The current credentials with a reference taken; give it back with
 * gp_tls_release. */
gp_tls_cred *gp_tls_acquire(gp_tls *t);
void gp_tls_release(gp_tls_cred *c);

/* The chain and key of c, as a GnuTLS retrieve callback returns them. */
void gp_tls_cred_get(gp_tls_cred *c, gnutls_pcert_st **pcert, unsigned *n,
                     gnutls_privkey_t *key);

/* Frees t (its current credentials once no connection holds them). */
void gp_tls_free(gp_tls *t);

#endif
