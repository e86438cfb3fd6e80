/*
 * notify - the service manager's readiness protocol (sd_notify, for
 * systemd's Type=notify units): READY once the daemon takes work,
 * RELOADING and READY around a reload, STOPPING, and a STATUS line.
 *
 * Without libsystemd (configure found none) or without $NOTIFY_SOCKET
 * (not started by systemd), every call does nothing. A call never blocks
 * and never fails the daemon: a notification that cannot be sent is lost.
 */
#ifndef TERN_NOTIFY_H
#define TERN_NOTIFY_H

void notify_ready(void);
void notify_reloading(void);
void notify_stopping(void);
void notify_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* notify_active - whether notifications go anywhere ($NOTIFY_SOCKET) */
int notify_active(void);

#endif
