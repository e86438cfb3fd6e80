/*
 * tls_cache - TLS client contexts and the session cache (see tls_cache.h).
 *
 * The context is made before privileges are dropped (as root), so that
 * root-only certificate, key and password files can be read; it is
 * replaced, not changed, by a reload. Its ex_data holds the cache: the
 * newest session (DER), the store key it is kept under and the binding
 * it is sealed with. The session callback runs in a delivery thread
 * during a handshake; sealing hands the write to the committer.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>
#include <sodium.h>

#include "commit.h"
#include "log.h"
#include "tls_cache.h"
#include "ternd.h"
#include "traceparent.h"
#include "xalloc.h"

/*
 * The last TLS session a peer gave us, kept serialized (DER) and decoded
 * afresh for every new connection: a Postfix smarthost issues one TLS 1.3
 * ticket per full handshake and none on resumption, so treating tickets
 * as single-use would resume only every second connection.
 */
struct tls_cache {
	pthread_mutex_t lock;
	unsigned char *der;
	int len;
	char key[512];			/* peer/host/port/policy/name: the store key */
	char bind[600];			/* key and the CA file's digest: what a sealed
					 * session is bound to (associated data) */
	char *auth_password;		/* sodium_malloc'd, read-only; NULL: none */
};

static int tls_cache_index = -1;
static pthread_once_t tls_cache_once = PTHREAD_ONCE_INIT;

/* The key that seals TLS sessions in the queue database. */
static struct trace_key *session_key;

/*
 * A sealed session: a version octet, a random nonce, then the session
 * (DER) encrypted with XChaCha20-Poly1305 (AEAD) under key_file, with
 * the context's binding (peer, host, port, TLS policy, server name and
 * the CA file's digest, conn_tls_binding) as associated data. A session
 * moved under another peer's store key, or kept from before a change of
 * tls_ca_file, does not open and is discarded. Version 1 was
 * crypto_secretbox with nothing bound: discarded at upgrade.
 */
#define SEAL_VERSION 2
#define SEAL_HEAD (1 + crypto_aead_xchacha20poly1305_ietf_NPUBBYTES)
#define SEAL_OVER (SEAL_HEAD + crypto_aead_xchacha20poly1305_ietf_ABYTES)

/* A sealed session, as the committer writes it. */
struct tls_put {
	const char *key;
	unsigned char *blob;
	size_t len;
};

/* tls_cache_put - write function: keep one sealed session */
static int tls_cache_put(struct store_txn *txn, void *arg)
{
	const struct tls_put *tp = arg;

	return store_put_tls(txn, tp->key, tp->blob, tp->len);
}

/* tls_cache_save - seal a new TLS session, bound to bind, and keep it
 * under key */
static void tls_cache_save(const char *key, const char *bind, const unsigned char *der, int len)
{
	struct tls_put tp = {key, NULL, SEAL_OVER + (size_t)len};
	struct job job;

	if (session_key == NULL)
		return;
	tp.blob = xmalloc(tp.len);
	tp.blob[0] = SEAL_VERSION;
	randombytes_buf(tp.blob + 1, crypto_aead_xchacha20poly1305_ietf_NPUBBYTES);
	crypto_aead_xchacha20poly1305_ietf_encrypt(tp.blob + SEAL_HEAD, NULL, der, (size_t)len,
						   (const unsigned char *)bind, strlen(bind), NULL,
						   tp.blob + 1, session_key->bytes);
	memset(&job, 0, sizeof(job));
	job.kind = JOB_WRITE;
	job.write = tls_cache_put;
	job.arg = &tp;
	if (commit_submit(&job) < 0)
		log_warning("cannot keep a TLS session: %s", job.err);
	free(tp.blob);
}


/* tls_cache_free_cb - ex_data destructor */
static void tls_cache_free_cb(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp)
{
	struct tls_cache *tc = ptr;

	(void)parent, (void)ad, (void)idx, (void)argl, (void)argp;
	if (tc) {
		free(tc->der);
		if (tc->auth_password)
			sodium_free(tc->auth_password);
		pthread_mutex_destroy(&tc->lock);
		free(tc);
	}
}

/* tls_cache_init - register our slot in SSL_CTX ex_data, once */
static void tls_cache_init(void)
{
	tls_cache_index = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, tls_cache_free_cb);
}

/* tls_cache_new_session - OpenSSL's callback: keep the newest session (ticket) */
static int tls_cache_new_session(SSL *ssl, SSL_SESSION *sess)
{
	struct tls_cache *tc = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), tls_cache_index);
	int len = i2d_SSL_SESSION(sess, NULL);
	unsigned char *der, *p;

	if (tc == NULL || len <= 0 || len > 65536)
		return 0;
	der = p = xmalloc((size_t)len);
	i2d_SSL_SESSION(sess, &p);
	tls_cache_save(tc->key, tc->bind, der, len);	/* kept across restarts */
	pthread_mutex_lock(&tc->lock);
	free(tc->der);
	tc->der = der;
	tc->len = len;
	pthread_mutex_unlock(&tc->lock);
	return 0;	/* we did not keep sess itself */
}

/* tls_cache_offer - offer the cached session on a new connection */
void tls_cache_offer(SSL *ssl)
{
	struct tls_cache *tc = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), tls_cache_index);
	SSL_SESSION *sess = NULL;

	if (tc == NULL)
		return;
	pthread_mutex_lock(&tc->lock);
	if (tc->der) {
		const unsigned char *p = tc->der;

		sess = d2i_SSL_SESSION(NULL, &p, tc->len);
	}
	pthread_mutex_unlock(&tc->lock);
	if (sess) {
		SSL_set_session(ssl, sess);
		SSL_SESSION_free(sess);
	}
}

/* tls_cache_preload - a session kept from before (DER), to offer first */
static void tls_cache_preload(SSL_CTX *ctx, const unsigned char *der, int len)
{
	struct tls_cache *tc = SSL_CTX_get_ex_data(ctx, tls_cache_index);
	const unsigned char *p = der;
	SSL_SESSION *sess;

	if (tc == NULL || len <= 0 || (sess = d2i_SSL_SESSION(NULL, &p, len)) == NULL)
		return;		/* unreadable: a full handshake it is */
	SSL_SESSION_free(sess);
	pthread_mutex_lock(&tc->lock);
	free(tc->der);
	tc->der = xmalloc((size_t)len);
	memcpy(tc->der, der, (size_t)len);
	tc->len = len;
	pthread_mutex_unlock(&tc->lock);
}

/* tls_cache_key - what a peer's sessions are kept under: they are only
 * valid for the same peer, hosts, port and policy */
static const char *tls_cache_key(SSL_CTX *ctx)
{
	struct tls_cache *tc = SSL_CTX_get_ex_data(ctx, tls_cache_index);

	return tc ? tc->key : "";
}

/* tls_cache_binding - what a kept session is bound to: the key, and the
 * CA certificates it was verified with */
static const char *tls_cache_binding(SSL_CTX *ctx)
{
	struct tls_cache *tc = SSL_CTX_get_ex_data(ctx, tls_cache_index);

	return tc ? tc->bind : "";
}

/* tls_cache_unseal - a kept session for this context, unsealed, offered
 * first; one that is not bound to the context is discarded */
static void tls_cache_unseal(SSL_CTX *ctx)
{
	unsigned char blob[70000], der[70000];
	const char *key = tls_cache_key(ctx), *bind = tls_cache_binding(ctx);
	size_t n = store_get_tls(ternd.store, key, blob, sizeof(blob));
	unsigned long long dlen;

	if (session_key == NULL || n == 0)
		return;
	if (n < SEAL_OVER || blob[0] != SEAL_VERSION) {
		log_debug("TLS session kept under %s: of an older format: discarded, a full handshake "
			  "follows", key);
		return;
	}
	if (crypto_aead_xchacha20poly1305_ietf_decrypt(der, &dlen, NULL, blob + SEAL_HEAD,
						       n - SEAL_HEAD, (const unsigned char *)bind,
						       strlen(bind), blob + 1, session_key->bytes) != 0) {
		log_debug("TLS session kept under %s: not sealed for %s (moved, or made under other "
			  "settings or another key_file): discarded, a full handshake follows", key, bind);
		return;
	}
	tls_cache_preload(ctx, der, (int)dlen);
	sodium_memzero(der, (size_t)dlen);
}

/* tls_cache_key_open - key_file, created 0600 when absent */
static void tls_cache_key_open(const struct conf *conf)
{
	char path[4096], err[512];

	if (conf->ternd.key_file[0])
		snprintf(path, sizeof(path), "%s", conf->ternd.key_file);
	else
		snprintf(path, sizeof(path), "%s/session.key", conf->global.state_dir);
	if (access(path, F_OK) != 0 && trace_key_create(path, err, sizeof(err)) < 0)
		log_fatal("%s", err);
	if ((session_key = trace_key_load(path, err, sizeof(err))) == NULL)
		log_fatal("%s", err);
}

/* ca_digest - "ca=" and the BLAKE2b-256 of tls_ca_file's bytes in hex;
 * "ca=system" for the system store, "ca=-" without verification; -1 with
 * err if the file cannot be read */
static int ca_digest(const struct conf_peer *peer, char *out, size_t outlen, char *err,
		     size_t errlen)
{
	unsigned char buf[8192], md[32];
	char hex[2 * sizeof(md) + 1];
	crypto_generichash_state h;
	ssize_t n;
	int fd;

	if (peer->tls != TLS_VERIFY || !peer->tls_ca_file[0]) {
		snprintf(out, outlen, "ca=%s", peer->tls == TLS_VERIFY ? "system" : "-");
		return 0;
	}
	if ((fd = open(peer->tls_ca_file, O_RDONLY | O_CLOEXEC)) < 0) {
		snprintf(err, errlen, "[peer %s] tls_ca_file %s: cannot open: %s", peer->name,
			 peer->tls_ca_file, strerror(errno));
		return -1;
	}
	crypto_generichash_init(&h, NULL, 0, sizeof(md));
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		crypto_generichash_update(&h, buf, (size_t)n);
	close(fd);
	if (n < 0) {
		snprintf(err, errlen, "[peer %s] tls_ca_file %s: cannot read: %s", peer->name,
			 peer->tls_ca_file, strerror(errno));
		return -1;
	}
	crypto_generichash_final(&h, md, sizeof(md));
	sodium_bin2hex(hex, sizeof(hex), md, sizeof(md));
	snprintf(out, outlen, "ca=%s", hex);
	return 0;
}

/* secret_open - open a file that must be kept from group and others */
static int secret_open(const char *peer, const char *param, const char *path, char *err,
		       size_t errlen)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		snprintf(err, errlen, "[peer %s] %s %s: cannot open: %s", peer, param, path,
			 strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (st.st_mode & (S_IRWXG | S_IRWXO))) {
		snprintf(err, errlen, "[peer %s] %s %s: group or others may read or write it "
			 "(mode %04o): chmod 600 it", peer, param, path, (unsigned)(st.st_mode & 07777));
		close(fd);
		return -1;
	}
	return fd;
}

/* read_password - the first line of auth_password_file, in read-only
 * sodium memory; NULL with err set */
static char *read_password(const struct conf_peer *peer, char *err, size_t errlen)
{
	char buf[1025], *pw = NULL;
	ssize_t n;
	size_t len;
	int fd;

	if ((fd = secret_open(peer->name, "auth_password_file", peer->auth_password_file, err,
			      errlen)) < 0)
		return NULL;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	len = strcspn(buf, "\r\n");
	if (n < 0 || len == 0 || len > 512)
		snprintf(err, errlen, "[peer %s] auth_password_file %s: %s", peer->name,
			 peer->auth_password_file, n < 0 ? strerror(errno)
			 : "the first line must hold the password (1 to 512 octets)");
	else if ((pw = sodium_malloc(len + 1)) == NULL)
		snprintf(err, errlen, "[peer %s] cannot allocate secure memory", peer->name);
	if (pw) {
		memcpy(pw, buf, len);
		pw[len] = '\0';
		sodium_mprotect_readonly(pw);
	}
	sodium_memzero(buf, sizeof(buf));
	return pw;
}

/* client_cert - tls_cert_file and tls_key_file into the context */
static int client_cert(SSL_CTX *ctx, const struct conf_peer *peer, char *err, size_t errlen)
{
	const char *key = peer->tls_key_file[0] ? peer->tls_key_file : peer->tls_cert_file;
	int fd;

	if (!peer->tls_cert_file[0])
		return 0;
	if ((fd = secret_open(peer->name, peer->tls_key_file[0] ? "tls_key_file" : "tls_cert_file",
			      key, err, errlen)) < 0)
		return -1;
	close(fd);
	if (SSL_CTX_use_certificate_chain_file(ctx, peer->tls_cert_file) != 1)
		snprintf(err, errlen, "[peer %s] tls_cert_file %s: cannot load a PEM certificate: %s",
			 peer->name, peer->tls_cert_file, ERR_reason_error_string(ERR_get_error()));
	else if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1)
		snprintf(err, errlen, "[peer %s] %s %s: cannot load a PEM private key: %s",
			 peer->name, peer->tls_key_file[0] ? "tls_key_file" : "tls_cert_file", key,
			 ERR_reason_error_string(ERR_get_error()));
	else if (SSL_CTX_check_private_key(ctx) != 1)
		snprintf(err, errlen, "[peer %s] the private key in %s does not match the certificate "
			 "in %s", peer->name, key, peer->tls_cert_file);
	else
		return 0;
	ERR_clear_error();
	return -1;
}

/* tls_cache_context - the TLS client context for a peer's policy, with
 * its client certificate and AUTH password: call it before dropping
 * privileges, so that root-only files can be read */
SSL_CTX *tls_cache_context(const struct conf_peer *peer, char *err, size_t errlen)
{
	SSL_CTX *ctx;
	struct tls_cache *tc;

	if (peer->tls == TLS_NONE) {
		if (peer->auth_user[0])
			snprintf(err, errlen, "[peer %s] auth_user needs TLS, but tls = none: AUTH is only "
				 "sent over TLS (set tls = encrypt or verify)", peer->name);
		else if (peer->tls_cert_file[0])
			snprintf(err, errlen, "[peer %s] tls_cert_file is set, but tls = none", peer->name);
		else
			err[0] = '\0';
		return NULL;
	}
	if ((ctx = SSL_CTX_new(TLS_client_method())) == NULL) {
		snprintf(err, errlen, "cannot create a TLS context");
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, peer->tls_min_version == TLSVER_13 ? TLS1_3_VERSION
				      : TLS1_2_VERSION);
	pthread_once(&tls_cache_once, tls_cache_init);
	tc = xcalloc(1, sizeof(*tc));
	pthread_mutex_init(&tc->lock, NULL);
	snprintf(tc->key, sizeof(tc->key), "%s/%s/%lld/%s/%s", peer->name, peer->host, peer->port,
		 conf_tls_name(peer->tls), peer->tls_servername);
	SSL_CTX_set_ex_data(ctx, tls_cache_index, tc);	/* freed with ctx */
	/* The CA file is read here, once per context, as the context loads
	 * it below: a session verified under other CAs does not resume. */
	{
		char ca[80];

		if (ca_digest(peer, ca, sizeof(ca), err, errlen) < 0) {
			SSL_CTX_free(ctx);
			return NULL;
		}
		snprintf(tc->bind, sizeof(tc->bind), "%s/%s", tc->key, ca);
	}
	if (client_cert(ctx, peer, err, errlen) < 0) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	if (peer->auth_user[0] && !peer->auth_password_file[0]) {
		snprintf(err, errlen, "[peer %s] auth_user is set, but auth_password_file is not",
			 peer->name);
		SSL_CTX_free(ctx);
		return NULL;
	}
	if (peer->auth_user[0] && (tc->auth_password = read_password(peer, err, errlen)) == NULL) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
	SSL_CTX_sess_set_new_cb(ctx, tls_cache_new_session);
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	/* kernel TLS where the kernel has it; checked per connection */
	SSL_CTX_set_options(ctx, SSL_OP_ENABLE_KTLS);
	if (peer->tls == TLS_VERIFY) {
		int ok = peer->tls_ca_file[0]
			? SSL_CTX_load_verify_locations(ctx, peer->tls_ca_file, NULL)
			: SSL_CTX_set_default_verify_paths(ctx);

		if (!ok) {
			snprintf(err, errlen, "[peer %s] cannot load CA certificates from %s", peer->name,
				 peer->tls_ca_file[0] ? peer->tls_ca_file : "the system store");
			SSL_CTX_free(ctx);
			return NULL;
		}
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	} else {
		SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
	}
	return ctx;
}


/* tls_cache_password - the AUTH password read with the context, or NULL */
const char *tls_cache_password(SSL_CTX *ctx)
{
	struct tls_cache *tc = ctx ? SSL_CTX_get_ex_data(ctx, tls_cache_index) : NULL;

	return tc ? tc->auth_password : NULL;
}

/* tls_cache_load - at start or when a reload adds a peer: open key_file
 * (once) and offer the session kept for ctx first; NULL ctx: plain */
void tls_cache_load(const struct conf *conf, SSL_CTX *ctx)
{
	if (ctx == NULL)
		return;
	if (session_key == NULL)
		tls_cache_key_open(conf);
	tls_cache_unseal(ctx);
}

/* tls_cache_close - forget the sealing key (at stop) */
void tls_cache_close(void)
{
	trace_key_free(&session_key);
}
