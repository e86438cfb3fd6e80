/*
 * conf - tern.conf(5): one file for every tern program.
 *
 * Every parameter is defined once, in conf_<section>.def (name, type,
 * default, one-line documentation); the structs below, the parser, the
 * -d/-n printers and the documentation test are all generated from those
 * tables. Loading never exits: errors come back as "file:line: message".
 * A struct conf is immutable once loaded; reload builds a new one.
 */
#ifndef TERN_CONF_H
#define TERN_CONF_H

#include <stddef.h>
#include <stdio.h>

#include "cidr.h"

#define CONF_DEFAULT_PATH SYSCONFDIR "/tern/tern.conf"

enum conf_action { ACTION_REJECT, ACTION_TEMPFAIL, ACTION_TAG, ACTION_OFF };
enum conf_onerror { ONERROR_ACCEPT, ONERROR_TEMPFAIL };
enum conf_barenl { BARENL_REJECT, BARENL_NORMALIZE };
enum conf_tls { TLS_NONE, TLS_MAY, TLS_ENCRYPT, TLS_VERIFY };
enum conf_tlsver { TLSVER_12, TLSVER_13 };

enum conf_type {
	CT_STR, CT_BOOL, CT_INT, CT_SIZE, CT_TIME, CT_ACTION, CT_ONERROR, CT_BARENL, CT_TLS, CT_TLSVER, CT_RATE, CT_CIDRS,
	CT_RATIO
};

/* C types of each configuration type; TIME is in milliseconds. */
#define CONF_CTYPE_STR char *
#define CONF_CTYPE_BOOL int
#define CONF_CTYPE_INT long long
#define CONF_CTYPE_SIZE unsigned long long
#define CONF_CTYPE_TIME long long
#define CONF_CTYPE_ACTION enum conf_action
#define CONF_CTYPE_ONERROR enum conf_onerror
#define CONF_CTYPE_BARENL enum conf_barenl
#define CONF_CTYPE_TLS enum conf_tls
#define CONF_CTYPE_TLSVER enum conf_tlsver
#define CONF_CTYPE_RATE long long	/* microseconds per message; 0: no limit */
#define CONF_CTYPE_CIDRS struct cidr_list *
#define CONF_CTYPE_RATIO double		/* 0 .. 1 */

#define P(name, type, def, doc) CONF_CTYPE_##type name;
struct conf_global {
#include "conf_global.def"
};
struct conf_milter {
#include "conf_milter.def"
};
struct conf_ternd {
#include "conf_ternd.def"
};
struct conf_peer {
	char *name;
#include "conf_peer.def"
};
#undef P

struct conf_route {
	char *domain;		/* "example.org", ".example.org" or "*" */
	char *peer;
};

/* One "name = value" line as written, for -n and error messages. */
struct conf_setting {
	char *section;
	char *name;
	char *value;
	int line;
};

struct conf {
	char *path;
	struct conf_global global;
	struct conf_milter milter;
	struct conf_ternd ternd;
	size_t npeers;
	struct conf_peer *peers;
	size_t nroutes;
	struct conf_route *routes;
	size_t nsettings;
	struct conf_setting *settings;
};

/* The generated tables, for printers and the documentation test. */
struct conf_param {
	const char *name;
	enum conf_type type;
	const char *def;
	const char *doc;
	size_t offset;
};

struct conf_section {
	const char *name;		/* "global", "milter", "peer", ... */
	const struct conf_param *params;
	size_t nparams;
	int named;			/* [peer NAME] */
	int freeform;			/* [routes]: any name = peer */
};

extern const struct conf_section conf_sections[];
extern const size_t conf_nsections;

struct conf *conf_load(const char *path, char *err, size_t errlen);
struct conf *conf_load_string(const char *text, const char *name, char *err, size_t errlen);
void conf_free(struct conf **conf);
void conf_print_defaults(FILE *fp);
void conf_print_settings(FILE *fp, const struct conf *conf);
const char *conf_control_socket(const struct conf *conf, char *buf, size_t buflen);
const char *conf_hostname(const struct conf *conf);
const struct conf_peer *conf_peer_find(const struct conf *conf, const char *name);
int conf_peer_connections(const struct conf_peer *p);
const char *conf_tls_name(enum conf_tls tls);
const char *conf_route(const struct conf *conf, const char *addr);
size_t conf_route_check(const struct conf *conf, void (*fn)(const char *msg, void *arg),
			void *arg);
const char *conf_action_name(enum conf_action action);

#endif
