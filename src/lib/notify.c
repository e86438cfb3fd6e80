/*
 * notify - sd_notify messages to the service manager.
 *
 * RELOADING=1 carries MONOTONIC_USEC, which systemd 253 and later want
 * (Type=notify-reload); systemd 252 (Debian 12) takes RELOADING=1 and
 * READY=1 alone. The environment is never unset: a daemon's threads may
 * notify at any time. This module must never block or exit.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifdef HAVE_LIBSYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "clock.h"
#include "notify.h"

/* notify_send - one notification (newline-separated assignments) */
static void notify_send(const char *msg)
{
#ifdef HAVE_LIBSYSTEMD
	(void)sd_notify(0, msg);
#else
	(void)msg;
#endif
}

/* notify_active - $NOTIFY_SOCKET set, and sd_notify built in */
int notify_active(void)
{
#ifdef HAVE_LIBSYSTEMD
	const char *s = getenv("NOTIFY_SOCKET");

	return s != NULL && s[0] != '\0';
#else
	return 0;
#endif
}

/* notify_ready - the daemon takes work (after start, after a reload) */
void notify_ready(void)
{
	notify_send("READY=1");
}

/* notify_reloading - a reload starts; notify_ready ends it */
void notify_reloading(void)
{
	char msg[64];

	snprintf(msg, sizeof(msg), "RELOADING=1\nMONOTONIC_USEC=%llu",
		 (unsigned long long)ms_now() * 1000ULL);
	notify_send(msg);
}

/* notify_stopping - the daemon stops */
void notify_stopping(void)
{
	notify_send("STOPPING=1");
}

/* notify_status - one line for "systemctl status" (cut at 200 octets) */
void notify_status(const char *fmt, ...)
{
	char msg[7 + 200 + 1] = "STATUS=";
	va_list ap;

	if (!notify_active())
		return;
	va_start(ap, fmt);
	vsnprintf(msg + 7, sizeof(msg) - 7, fmt, ap);
	va_end(ap);
	for (char *p = msg; *p; p++)
		if (*p == '\n')
			*p = ' ';	/* one assignment, never a second one */
	notify_send(msg);
}
