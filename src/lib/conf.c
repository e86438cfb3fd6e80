/*
 * conf - tern.conf(5) parser, built on libinih.
 *
 * libinih splits lines into section/name/value; everything else is here:
 * the parameter tables (generated from conf_*.def), value types and units,
 * line numbers for every error, and the printers behind -d and -n. libinih
 * is fed through our own line reader so that we know the line number of
 * each value, can refuse lines longer than its buffer instead of letting it
 * split them, and see section headers (to refuse unknown ones).
 *
 * Must never exit or log: callers decide what a bad file means (fatal at
 * start, keep the old configuration on reload).
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <unistd.h>

#include <ini.h>

#include "conf.h"
#include "units.h"
#include "xalloc.h"

#define CONF_FILE_MAX (1024 * 1024)	/* larger is certainly a mistake */
#define CONF_SECTION_MAX 48		/* libinih keeps 50 bytes of "[...]" */

/* Parameter tables, one per section, generated from the .def files. */
#define P(name, type, def, doc) {#name, CT_##type, def, doc, offsetof(SECTION_STRUCT, name)},
#define SECTION_STRUCT struct conf_global
static const struct conf_param global_params[] = {
#include "conf_global.def"
};
#undef SECTION_STRUCT
#define SECTION_STRUCT struct conf_milter
static const struct conf_param milter_params[] = {
#include "conf_milter.def"
};
#undef SECTION_STRUCT
#define SECTION_STRUCT struct conf_ternd
static const struct conf_param ternd_params[] = {
#include "conf_ternd.def"
};
#undef SECTION_STRUCT
#define SECTION_STRUCT struct conf_peer
static const struct conf_param peer_params[] = {
#include "conf_peer.def"
};
#undef SECTION_STRUCT
#undef P

#define TABLE(t) t, sizeof(t) / sizeof(t[0])
const struct conf_section conf_sections[] = {
	{"global", TABLE(global_params), 0, 0},
	{"milter", TABLE(milter_params), 0, 0},
	{"ternd", TABLE(ternd_params), 0, 0},
	{"peer", TABLE(peer_params), 1, 0},
	{"routes", NULL, 0, 0, 1},
	{"report", NULL, 0, 0, 0},
};
const size_t conf_nsections = sizeof(conf_sections) / sizeof(conf_sections[0]);

static const char *const action_names[] = {"reject", "tempfail", "tag", "off", NULL};
static const char *const onerror_names[] = {"accept", "tempfail", NULL};
static const char *const barenl_names[] = {"reject", "normalize", NULL};
static const char *const tls_names[] = {"none", "may", "encrypt", "verify", NULL};
static const char *const tlsver_names[] = {"TLSv1.2", "TLSv1.3", NULL};

/* Parser state shared by the line reader and the libinih handler. */
struct conf_parse {
	struct conf *conf;
	const char *file;		/* name for messages */
	const char *cursor;		/* rest of the text */
	int line;			/* number of the line last read */
	int continuation;		/* that line starts with white space */
	char *err;
	size_t errlen;
	int failed;
};

/* conf_fail - record the first error as "file:line: message" */
static void __attribute__((format(printf, 3, 4)))
conf_fail(struct conf_parse *ps, int line, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (ps->failed)
		return;
	ps->failed = 1;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (line > 0)
		snprintf(ps->err, ps->errlen, "%s:%d: %s", ps->file, line, msg);
	else
		snprintf(ps->err, ps->errlen, "%s: %s", ps->file, msg);
}

/* conf_action_name - the tern.conf spelling of an action */
const char *conf_action_name(enum conf_action action)
{
	return action_names[action];
}

/* find_section - the table entry for a section name */
static const struct conf_section *find_section(const char *name)
{
	for (size_t i = 0; i < conf_nsections; i++)
		if (strcmp(conf_sections[i].name, name) == 0)
			return &conf_sections[i];
	return NULL;
}

/* find_param - the table entry for a parameter of a section */
static const struct conf_param *find_param(const struct conf_section *sec, const char *name)
{
	for (size_t i = 0; i < sec->nparams; i++)
		if (strcmp(sec->params[i].name, name) == 0)
			return &sec->params[i];
	return NULL;
}

/* find_peer - a peer by name, or NULL */
static struct conf_peer *find_peer(const struct conf *conf, const char *name)
{
	for (size_t i = 0; i < conf->npeers; i++)
		if (strcmp(conf->peers[i].name, name) == 0)
			return &conf->peers[i];
	return NULL;
}

/* section_base - where the values of a section live; arg names the peer */
static void *section_base(struct conf *conf, const struct conf_section *sec, const char *arg)
{
	if (strcmp(sec->name, "peer") == 0)
		return find_peer(conf, arg);
	if (strcmp(sec->name, "global") == 0)
		return &conf->global;
	if (strcmp(sec->name, "milter") == 0)
		return &conf->milter;
	if (strcmp(sec->name, "ternd") == 0)
		return &conf->ternd;
	return NULL;
}

/* parse_enum - index of value in a NULL-terminated name list */
static int parse_enum(const char *value, const char *const *names)
{
	for (int i = 0; names[i]; i++)
		if (strcasecmp(value, names[i]) == 0)
			return i;
	return -1;
}

/* conf_set - parse value as type into field; NULL or the reason it is bad */
static const char *conf_set(enum conf_type type, void *field, const char *value)
{
	const char *why = NULL;
	unsigned long long u;
	long long ll;
	int i;

	switch (type) {
	case CT_STR:
		free(*(char **)field);
		*(char **)field = xstrdup(value);
		return NULL;
	case CT_BOOL:
		if (strcasecmp(value, "yes") == 0)
			*(int *)field = 1;
		else if (strcasecmp(value, "no") == 0)
			*(int *)field = 0;
		else
			return "expected yes or no";
		return NULL;
	case CT_INT:
		if (units_uint(value, INT_MAX, &u, &why) < 0)
			return why;
		*(long long *)field = (long long)u;
		return NULL;
	case CT_SIZE:
		if (units_size(value, &u, &why) < 0)
			return why;
		*(unsigned long long *)field = u;
		return NULL;
	case CT_TIME:
		if (units_duration(value, &ll, &why) < 0)
			return why;
		*(long long *)field = ll;
		return NULL;
	case CT_ACTION:
		if ((i = parse_enum(value, action_names)) < 0)
			return "expected reject, tempfail, tag or off";
		*(enum conf_action *)field = (enum conf_action)i;
		return NULL;
	case CT_ONERROR:
		if ((i = parse_enum(value, onerror_names)) < 0)
			return "expected accept or tempfail";
		*(enum conf_onerror *)field = (enum conf_onerror)i;
		return NULL;
	case CT_BARENL:
		if ((i = parse_enum(value, barenl_names)) < 0)
			return "expected reject or normalize";
		*(enum conf_barenl *)field = (enum conf_barenl)i;
		return NULL;
	case CT_TLS:
		if ((i = parse_enum(value, tls_names)) < 0)
			return "expected none, may, encrypt or verify";
		*(enum conf_tls *)field = (enum conf_tls)i;
		return NULL;
	case CT_TLSVER:
		if ((i = parse_enum(value, tlsver_names)) < 0)
			return "expected TLSv1.2 or TLSv1.3";
		*(enum conf_tlsver *)field = (enum conf_tlsver)i;
		return NULL;
	case CT_RATE: {
		static const struct {
			const char *unit;
			long long us;
		} per[] = {{"/s", 1000000LL}, {"/m", 60000000LL}, {"/h", 3600000000LL}};
		char num[32];
		const char *slash = strchr(value, '/');

		if (strcmp(value, "0") == 0) {
			*(long long *)field = 0;
			return NULL;
		}
		if (slash == NULL || (size_t)(slash - value) >= sizeof(num))
			return "expected a rate: N/s, N/m or N/h (or 0)";
		memcpy(num, value, (size_t)(slash - value));
		num[slash - value] = '\0';
		if (units_uint(num, 1000000, &u, &why) < 0 || u == 0)
			return why ? why : "expected a rate: N/s, N/m or N/h (or 0)";
		for (i = 0; i < 3; i++)
			if (strcmp(slash, per[i].unit) == 0) {
				*(long long *)field = per[i].us / (long long)u;
				return *(long long *)field ? NULL : "rate too high";
			}
		return "expected a rate: N/s, N/m or N/h (or 0)";
	}
	case CT_RATIO: {
		/* 0, 1, 0.N or 1.0 (up to 6 decimals): no sign, no exponent */
		size_t frac = value[1] == '.' ? strspn(value + 2, "0123456789") : 0;

		if ((value[0] != '0' && value[0] != '1')
		    || (value[1] != '\0' && (value[1] != '.' || frac == 0 || frac > 6
					     || value[2 + frac] != '\0'))
		    || (value[0] == '1' && value[1] == '.' && strspn(value + 2, "0") != frac))
			return "expected a fraction from 0 to 1, such as 0.5";
		*(double *)field = strtod(value, NULL);
		return NULL;
	}
	case CT_CIDRS: {
		struct cidr_list *list = cidr_list_parse(value, &why);

		if (list == NULL)
			return why;
		cidr_list_free((struct cidr_list **)field);
		*(struct cidr_list **)field = list;
		return NULL;
	}
	}
	return "unknown parameter type";
}

/* conf_set_defaults - give every parameter of a section its default */
static void conf_set_defaults(const struct conf_section *sec, void *base)
{
	for (size_t i = 0; i < sec->nparams; i++) {
		const struct conf_param *p = &sec->params[i];
		const char *why = conf_set(p->type, (char *)base + p->offset, p->def);

		if (why) {		/* a bad default is a bug in a .def file */
			fprintf(stderr, "tern: bad default for %s: %s\n", p->name, why);
			abort();
		}
	}
}

/* conf_free_values - release what a section's values own */
static void conf_free_values(const struct conf_section *sec, void *base)
{
	for (size_t i = 0; i < sec->nparams; i++) {
		void *field = (char *)base + sec->params[i].offset;

		if (sec->params[i].type == CT_STR)
			free(*(char **)field);
		else if (sec->params[i].type == CT_CIDRS)
			cidr_list_free((struct cidr_list **)field);
	}
}

/* valid_name - a peer name: letters, digits, '-', '_', '.' */
static int valid_name(const char *s)
{
	if (*s == '\0')
		return 0;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr("-_.", *s))
			return 0;
	return 1;
}

/* valid_route_domain - "*", "example.org" or ".example.org" */
static int valid_route_domain(const char *s)
{
	if (strcmp(s, "*") == 0)
		return 1;
	if (*s == '.')
		s++;
	if (*s == '\0' || *s == '.' || s[strlen(s) - 1] == '.' || strstr(s, ".."))
		return 0;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr("-._", *s))
			return 0;
	return 1;
}

/* conf_section_line - check a "[section]" header the reader saw */
static void conf_section_line(struct conf_parse *ps, const char *line)
{
	const char *end = strchr(line, ']');
	char name[128], arg[128];
	const struct conf_section *sec;
	int n;

	if (end == NULL)
		return;		/* libinih reports the syntax error */
	if (end - line > CONF_SECTION_MAX) {	/* libinih would truncate it */
		conf_fail(ps, ps->line, "section header longer than %d characters", CONF_SECTION_MAX);
		return;
	}
	n = sscanf(line + 1, "%127[^] \t] %127[^] \t]", name, arg);
	if (n < 1) {
		conf_fail(ps, ps->line, "empty section name");
		return;
	}
	if ((sec = find_section(name)) == NULL) {
		conf_fail(ps, ps->line, "unknown section [%s]", name);
		return;
	}
	if (sec->named && n != 2) {
		conf_fail(ps, ps->line, "section [%s] needs a name: [%s NAME]", name, name);
		return;
	}
	if (!sec->named && n == 2) {
		conf_fail(ps, ps->line, "section [%s] takes no name", name);
		return;
	}
	if (sec->named) {
		struct conf *conf = ps->conf;

		if (!valid_name(arg)) {
			conf_fail(ps, ps->line, "bad %s name \"%s\" (letters, digits, '-', '_', '.')",
				  name, arg);
			return;
		}
		if (find_peer(conf, arg)) {
			conf_fail(ps, ps->line, "[%s %s] defined twice", name, arg);
			return;
		}
		conf->peers = xreallocarray(conf->peers, conf->npeers + 1, sizeof(*conf->peers));
		memset(&conf->peers[conf->npeers], 0, sizeof(conf->peers[0]));
		conf_set_defaults(sec, &conf->peers[conf->npeers]);
		conf->peers[conf->npeers++].name = xstrdup(arg);
	}
}

/* conf_reader - libinih line reader over a buffer that tracks line numbers */
static char *conf_reader(char *str, int num, void *stream)
{
	struct conf_parse *ps = stream;
	const char *nl, *p;
	size_t len;

	if (ps->failed || *ps->cursor == '\0')
		return NULL;
	nl = strchr(ps->cursor, '\n');
	len = nl ? (size_t)(nl - ps->cursor) + 1 : strlen(ps->cursor);
	ps->line++;
	if (len + 1 > (size_t)num) {
		conf_fail(ps, ps->line, "line longer than %d characters "
			  "(continue a long value on lines starting with white space)", num - 2);
		return NULL;
	}
	memcpy(str, ps->cursor, len);
	str[len] = '\0';
	ps->cursor += len;
	if (memchr(str, '\0', len)) {
		conf_fail(ps, ps->line, "NUL byte in configuration file");
		return NULL;
	}
	p = str + strspn(str, " \t\r");
	ps->continuation = (str[0] == ' ' || str[0] == '\t') && *p != '\n' && *p != '\0'
		&& *p != '#' && *p != ';';
	if (*p == '[')
		conf_section_line(ps, p);
	return str;
}

/* conf_handler - libinih callback: record one name = value */
static int conf_handler(void *user, const char *section, const char *name, const char *value)
{
	struct conf_parse *ps = user;
	struct conf *conf = ps->conf;
	struct conf_setting *last = conf->nsettings ? &conf->settings[conf->nsettings - 1] : NULL;

	if (ps->failed)
		return 1;
	if (ps->continuation && last && strcmp(last->section, section) == 0
	    && strcmp(last->name, name) == 0) {
		char *joined = xasprintf("%s %s", last->value, value);

		free(last->value);
		last->value = joined;
		return 1;
	}
	if (*section == '\0') {
		conf_fail(ps, ps->line, "\"%s\" before the first [section]", name);
		return 1;
	}
	conf->settings = xreallocarray(conf->settings, conf->nsettings + 1, sizeof(*conf->settings));
	conf->settings[conf->nsettings++] = (struct conf_setting) {
		xstrdup(section), xstrdup(name), xstrdup(value), ps->line
	};
	return 1;
}

/* conf_apply - turn the recorded settings into values, checking each */
static void conf_apply(struct conf_parse *ps)
{
	struct conf *conf = ps->conf;

	for (size_t i = 0; i < conf->nsettings && !ps->failed; i++) {
		const struct conf_setting *s = &conf->settings[i];
		char secname[128] = "", secarg[128] = "";
		const struct conf_section *sec;
		const struct conf_param *p;
		const char *why;

		sscanf(s->section, "%127s %127s", secname, secarg);
		if ((sec = find_section(secname)) == NULL) {	/* checked by the reader */
			conf_fail(ps, s->line, "unknown section [%s]", s->section);
			return;
		}
		for (size_t j = 0; j < i; j++) {
			if (strcmp(conf->settings[j].section, s->section) == 0
			    && strcmp(conf->settings[j].name, s->name) == 0) {
				conf_fail(ps, s->line, "%s is already set on line %d",
					  s->name, conf->settings[j].line);
				return;
			}
		}
		if (sec->freeform) {
			struct conf_route *r;

			if (!valid_route_domain(s->name)) {
				conf_fail(ps, s->line, "bad route domain \"%s\" "
					  "(use example.org, .example.org or *)", s->name);
				return;
			}
			if (find_peer(conf, s->value) == NULL) {
				conf_fail(ps, s->line, "route %s names unknown peer \"%s\" "
					  "(define it with [peer %s])", s->name, s->value, s->value);
				return;
			}
			conf->routes = xreallocarray(conf->routes, conf->nroutes + 1, sizeof(*r));
			r = &conf->routes[conf->nroutes++];
			r->domain = xstrdup(s->name);
			for (char *c = r->domain; *c; c++)
				*c = (char)tolower((unsigned char)*c);
			r->peer = xstrdup(s->value);
			continue;
		}
		if ((p = find_param(sec, s->name)) == NULL) {
			conf_fail(ps, s->line, "unknown parameter \"%s\" in [%s]", s->name, secname);
			return;
		}
		why = conf_set(p->type, (char *)section_base(conf, sec, secarg) + p->offset, s->value);
		if (why) {
			conf_fail(ps, s->line, "%s = %s: %s", s->name, s->value, why);
			return;
		}
	}
}

/* conf_new - a configuration holding only defaults */
static struct conf *conf_new(const char *path)
{
	struct conf *conf = xcalloc(1, sizeof(*conf));

	conf->path = xstrdup(path);
	conf_set_defaults(find_section("global"), &conf->global);
	conf_set_defaults(find_section("milter"), &conf->milter);
	conf_set_defaults(find_section("ternd"), &conf->ternd);
	return conf;
}

/* conf_load_string - parse configuration text; name is used in messages */
struct conf *conf_load_string(const char *text, const char *name, char *err, size_t errlen)
{
	struct conf_parse ps = {0};
	int rc;

	ps.conf = conf_new(name);
	ps.file = name;
	ps.cursor = text;
	ps.err = err;
	ps.errlen = errlen;
	rc = ini_parse_stream(conf_reader, &ps, conf_handler, &ps);
	if (!ps.failed && rc > 0)
		conf_fail(&ps, rc, "syntax error (expected \"name = value\" or \"[section]\")");
	else if (!ps.failed && rc < 0)
		conf_fail(&ps, 0, "out of memory");
	if (!ps.failed)
		conf_apply(&ps);
	if (ps.failed)
		conf_free(&ps.conf);
	return ps.conf;
}

/* conf_load - read and parse a configuration file */
struct conf *conf_load(const char *path, char *err, size_t errlen)
{
	struct conf *conf;
	FILE *fp = fopen(path, "re");
	char *text;
	size_t n;

	if (fp == NULL) {
		snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		return NULL;
	}
	text = xmalloc(CONF_FILE_MAX + 1);
	n = fread(text, 1, CONF_FILE_MAX + 1, fp);
	if (ferror(fp) || n > CONF_FILE_MAX) {
		snprintf(err, errlen, "%s: %s", path,
			 ferror(fp) ? "read error" : "file larger than 1 MB");
		fclose(fp);
		free(text);
		return NULL;
	}
	fclose(fp);
	text[n] = '\0';
	if (strlen(text) != n) {
		snprintf(err, errlen, "%s: NUL byte in configuration file", path);
		free(text);
		return NULL;
	}
	conf = conf_load_string(text, path, err, errlen);
	free(text);
	return conf;
}

/* conf_free - release a configuration and clear the pointer */
void conf_free(struct conf **confp)
{
	struct conf *conf = *confp;

	if (conf == NULL)
		return;
	conf_free_values(find_section("global"), &conf->global);
	conf_free_values(find_section("milter"), &conf->milter);
	conf_free_values(find_section("ternd"), &conf->ternd);
	for (size_t i = 0; i < conf->npeers; i++) {
		conf_free_values(find_section("peer"), &conf->peers[i]);
		free(conf->peers[i].name);
	}
	free(conf->peers);
	for (size_t i = 0; i < conf->nroutes; i++) {
		free(conf->routes[i].domain);
		free(conf->routes[i].peer);
	}
	free(conf->routes);
	for (size_t i = 0; i < conf->nsettings; i++) {
		free(conf->settings[i].section);
		free(conf->settings[i].name);
		free(conf->settings[i].value);
	}
	free(conf->settings);
	free(conf->path);
	free(conf);
	*confp = NULL;
}

/* conf_print_defaults - every parameter with its default, as tern.conf text (-d) */
void conf_print_defaults(FILE *fp)
{
	for (size_t i = 0; i < conf_nsections; i++) {
		const struct conf_section *sec = &conf_sections[i];

		if (sec->nparams == 0)
			continue;
		fprintf(fp, sec->named ? "[%s NAME]\n" : "[%s]\n", sec->name);
		for (size_t j = 0; j < sec->nparams; j++)
			fprintf(fp, "%s = %s\n", sec->params[j].name, sec->params[j].def);
		fputc('\n', fp);
	}
}

/* conf_print_settings - what the file sets, grouped by section (-n) */
void conf_print_settings(FILE *fp, const struct conf *conf)
{
	const char *printed = NULL;

	for (size_t i = 0; i < conf->nsettings; i++) {
		const struct conf_setting *s = &conf->settings[i];

		if (printed == NULL || strcmp(printed, s->section) != 0) {
			fprintf(fp, "%s[%s]\n", printed ? "\n" : "", s->section);
			printed = s->section;
		}
		fprintf(fp, "%s = %s\n", s->name, s->value);
	}
}

/* conf_control_socket - the control socket path, RUN_DIR/control.sock by default */
const char *conf_control_socket(const struct conf *conf, char *buf, size_t buflen)
{
	if (conf->ternd.control_socket[0] != '\0')
		return conf->ternd.control_socket;
	snprintf(buf, buflen, "%s/control.sock", conf->global.run_dir);
	return buf;
}

/* conf_hostname - the configured host name, or the system's */
const char *conf_hostname(const struct conf *conf)
{
	static char name[256];

	if (conf->global.hostname[0] != '\0')
		return conf->global.hostname;
	if (name[0] == '\0' && (gethostname(name, sizeof(name) - 1) < 0 || name[0] == '\0'))
		snprintf(name, sizeof(name), "localhost");
	return name;
}

/* conf_peer_find - a peer by name, or NULL */
const struct conf_peer *conf_peer_find(const struct conf *conf, const char *name)
{
	return find_peer(conf, name);
}

/* conf_peer_connections - the connections (delivery threads) a peer gets:
 * max_connections, or 1 when it is 0 */
int conf_peer_connections(const struct conf_peer *p)
{
	return p->max_connections > 0 ? (int)p->max_connections : 1;
}

/* conf_tls_name - the tern.conf spelling of a TLS policy */
const char *conf_tls_name(enum conf_tls tls)
{
	return tls_names[tls];
}

/* conf_route_check - what the [routes] and [peer] sections leave
 * unroutable, one sentence per finding to fn (ternd -n, ternd's start and
 * reload); the number of findings. A route naming an undefined peer never
 * gets here: conf_load refuses it. */
size_t conf_route_check(const struct conf *c, void (*fn)(const char *msg, void *arg), void *arg)
{
	char msg[512];
	size_t n = 0;
	int star = 0;

	for (size_t i = 0; i < c->nroutes; i++)
		star |= strcmp(c->routes[i].domain, "*") == 0;
	if (c->nroutes == 0) {
		fn("no [routes]: every recipient is deferred with 451 4.4.4", arg);
		n++;
	} else if (!star) {
		fn("no default route (*): recipients in other domains are deferred with 451 4.4.4",
		   arg);
		n++;
	}
	for (size_t i = 0; i < c->nroutes; i++) {
		const struct conf_peer *p = find_peer(c, c->routes[i].peer);

		if (p == NULL || p->host[0] != '\0')
			continue;
		snprintf(msg, sizeof(msg), "route %s: peer %s has no host: its mail is accepted "
			 "and stays queued", c->routes[i].domain, p->name);
		fn(msg, arg);
		n++;
	}
	return n;
}

/* conf_route - the peer for a recipient address by [routes]: the exact
 * domain, else the longest ".suffix", else "*"; NULL if none */
const char *conf_route(const struct conf *c, const char *addr)
{
	const char *at = strrchr(addr, '@'), *domain = at ? at + 1 : "";
	const char *best = NULL, *star = NULL;
	size_t dlen = strlen(domain), best_len = 0;

	for (size_t i = 0; i < c->nroutes; i++) {
		const char *d = c->routes[i].domain;
		size_t len = strlen(d);

		if (strcasecmp(d, domain) == 0)
			return c->routes[i].peer;
		if (strcmp(d, "*") == 0)
			star = c->routes[i].peer;
		else if (d[0] == '.' && dlen > len && strcasecmp(domain + dlen - len, d) == 0
			 && len > best_len) {
			best = c->routes[i].peer;
			best_len = len;
		}
	}
	return best ? best : star;
}
