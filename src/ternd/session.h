/* session.h - one inbound SMTP or LMTP session */
#ifndef TERN_SESSION_H
#define TERN_SESSION_H

void session_run(int fd, int lmtp, const char *client);

#endif
