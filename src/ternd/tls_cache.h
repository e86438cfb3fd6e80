/*
 * tls_cache.h - a relayed peer's TLS client context and its sessions:
 * the context built from the peer's TLS policy (CA file, client
 * certificate, AUTH password in locked memory), the newest session
 * captured from OpenSSL and offered to every new connection, sealed
 * (AEAD, bound to the peer and its CA file) and kept in the queue
 * database through the committer, and unsealed at start. Never logs or
 * keeps a session or a password in clear outside locked or freed memory;
 * never does I/O on a connection.
 */
#ifndef TERN_TLS_CACHE_H
#define TERN_TLS_CACHE_H

#include <stddef.h>

#include <openssl/ssl.h>

#include "conf.h"

SSL_CTX *tls_cache_context(const struct conf_peer *peer, char *err, size_t errlen);
void tls_cache_load(const struct conf *conf, SSL_CTX *ctx);
void tls_cache_offer(SSL *ssl);
const char *tls_cache_password(SSL_CTX *ctx);
void tls_cache_close(void);

#endif
