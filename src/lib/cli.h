/*
 * cli - the command-line options every tern program shares, like postconf:
 * -c FILE (configuration), -d (print defaults), -n (print what the file
 * sets), -f (foreground: log to stderr too), -v (verbose logging).
 */
#ifndef TERN_CLI_H
#define TERN_CLI_H

#include "conf.h"

#define CLI_COMMON_OPTS "c:dfnv"
/* the long options every program takes, for getopt_long: --help is -h
 * (usage on the standard output, exit 0), --version is -V */
#define CLI_LONG_OPTS {"help", no_argument, NULL, 'h'}, {"version", no_argument, NULL, 'V'}

struct cli {
	const char *conf_path;
	int foreground;
	int verbose;
	int print_defaults;
	int print_settings;
	/* -n also runs this, its findings on the standard error (ternd:
	 * unroutable domains, descriptors, the storage reserve); NULL: none */
	void (*check)(const struct conf *conf, void (*warn)(const char *msg, void *arg), void *arg);
};

void cli_init(struct cli *cli);
int cli_option(struct cli *cli, int ch, const char *arg);
struct conf *cli_load_conf(const struct cli *cli);
void cli_version(void);

#endif
