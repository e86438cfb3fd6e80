/*
 * cli - the command-line options every tern program shares.
 *
 * Handles -d and -n itself (print, then exit 0), so every program answers
 * them the same way. A configuration error is fatal here, with exit status
 * 2, the status tern commands use for usage and configuration errors.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "log.h"

/* cli_init - defaults for the shared options */
void cli_init(struct cli *cli)
{
	cli->conf_path = CONF_DEFAULT_PATH;
	cli->foreground = 0;
	cli->verbose = 0;
	cli->print_defaults = 0;
	cli->print_settings = 0;
	cli->check = NULL;
}

/* cli_option - take a shared option; 1 if ch was one */
int cli_option(struct cli *cli, int ch, const char *arg)
{
	switch (ch) {
	case 'c':
		cli->conf_path = arg;
		return 1;
	case 'd':
		cli->print_defaults = 1;
		return 1;
	case 'f':
		cli->foreground = 1;
		return 1;
	case 'n':
		cli->print_settings = 1;
		return 1;
	case 'v':
		cli->verbose++;
		return 1;
	default:
		return 0;
	}
}

/* check_warning - a finding of cli->check on the standard error */
static void check_warning(const char *msg, void *arg)
{
	(void)arg;
	fprintf(stderr, "warning: %s\n", msg);
}

/* cli_load_conf - load the configuration, or print it for -d/-n and exit;
 * with check, -n then reports what it finds on the standard error (still
 * exit 0: warnings, not configuration errors) */
struct conf *cli_load_conf(const struct cli *cli)
{
	struct conf *conf;
	char err[1024];

	if (cli->print_defaults) {
		conf_print_defaults(stdout);
		exit(0);
	}
	if ((conf = conf_load(cli->conf_path, err, sizeof(err))) == NULL)
		log_fatal_status(2, "%s", err);
	if (cli->print_settings) {
		conf_print_settings(stdout, conf);
		fflush(stdout);
		if (cli->check)
			cli->check(conf, check_warning, NULL);
		conf_free(&conf);
		exit(0);
	}
	return conf;
}

/* cli_version - print the package version */
void cli_version(void)
{
	printf("%s\n", PACKAGE_STRING);
	exit(0);
}
