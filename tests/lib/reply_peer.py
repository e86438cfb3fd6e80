#!/usr/bin/env python3
"""reply_peer.py - an SMTP relay peer that answers each recipient with the
reply its local part names.

    reply_peer.py PORT

Listens on 127.0.0.1:PORT (plain ESMTP, no PIPELINING or CHUNKING). A
recipient whose local part is CODE-ESC (e.g. <550-5.1.1@x.test>) gets the
reply "CODE ESC as asked", one whose local part is CODE alone (e.g.
<550@x.test>) "CODE as asked", without an enhanced status code; any other
is accepted. Message content is read and dropped; the end of data gets
250 2.0.0 if a recipient was accepted. Runs until killed.
"""
import re
import socketserver
import sys


class Session(socketserver.StreamRequestHandler):
    def reply(self, text):
        self.wfile.write((text + "\r\n").encode())
        self.wfile.flush()

    def handle(self):
        self.reply("220 reply-peer ESMTP")
        accepted = 0
        while True:
            line = self.rfile.readline()
            if not line:
                return
            cmd = line.decode("latin-1").rstrip("\r\n")
            verb = cmd[:4].upper()
            if verb == "EHLO":
                self.reply("250-reply-peer\r\n250 8BITMIME")
            elif verb == "HELO":
                self.reply("250 reply-peer")
            elif verb == "MAIL":
                accepted = 0
                self.reply("250 2.1.0 ok")
            elif verb == "RCPT":
                m = re.search(r"<(\d{3})(?:-([0-9.]+))?@", cmd)
                if m:
                    self.reply("%s %sas asked" % (m.group(1), m.group(2) + " " if m.group(2) else ""))
                else:
                    accepted += 1
                    self.reply("250 2.1.5 ok")
            elif verb == "DATA":
                if accepted == 0:
                    self.reply("554 5.5.1 no valid recipients")
                    continue
                self.reply("354 go ahead")
                while True:
                    body = self.rfile.readline()
                    if not body or body in (b".\r\n", b".\n"):
                        break
                self.reply("250 2.0.0 queued")
            elif verb == "QUIT":
                self.reply("221 2.0.0 bye")
                return
            else:
                self.reply("250 2.0.0 ok")


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


if __name__ == "__main__":
    Server(("127.0.0.1", int(sys.argv[1])), Session).serve_forever()
