#!/usr/bin/env python3
"""hostile_peer.py - an SMTP relay peer on loopback that misbehaves on cue.

ternd's relay client is tested against it where no Debian program can
misbehave the right way (stall one byte a second, answer 421 at a chosen
command, send an endless or a 100 MB reply, garble STARTTLS). Usage:

    hostile_peer.py PORT LOG MODE [--tls CERT KEY] [--behave FILE]

MODE is KIND:STAGE, or "ok". STAGE is where the fault happens: greeting,
ehlo, mail, rcpt, data (the reply to DATA), dot (the reply to the end of
data), or content (while the content comes in). KIND:
    ok          behave (a plain ESMTP server that accepts everything)
    stall       send the reply one octet a second (a 120-octet reply)
    421         reply "421 4.3.2 hostile: STAGE" and close
    reset       close with a TCP reset (SO_LINGER 0) instead of replying
    endless     a multi-line reply that never ends (250-... forever)
    hugeline    one 100 MB reply line
    tlsgarbage  offer STARTTLS, answer 220, then garbage instead of a ServerHello
    junk220     offer STARTTLS, send junk right after the 220, then do TLS
    notls       do not offer STARTTLS (even with --tls)
With --tls, STARTTLS is offered and done with CERT and KEY (ok, junk220).
Once FILE (--behave) exists, new connections behave ("ok").

LOG gets one line per event, flushed at once: "N connect", "N < LINE" for
each command line received (content lines are not logged), "N tls" after
a handshake, "N content BYTES" and "N accepted" when a message was taken,
"N fault KIND:STAGE", "N closed" at the end of a session and "N stalled reply cut after
K/120 octets" when the client gave up mid-stall.
"""
import os
import socket
import socketserver
import ssl
import sys
import threading
import time

PORT, LOG, MODE = int(sys.argv[1]), sys.argv[2], sys.argv[3]
TLS = BEHAVE = None
args = sys.argv[4:]
while args:
    if args[0] == "--tls":
        TLS = (args[1], args[2])
        args = args[3:]
    elif args[0] == "--behave":
        BEHAVE = args[1]
        args = args[2:]
    else:
        sys.exit("hostile_peer.py: unknown option " + args[0])

lock = threading.Lock()
count = [0]
logf = open(LOG, "a")


def log(n, text):
    with lock:
        logf.write("%d %s\n" % (n, text))
        logf.flush()


class Closed(Exception):
    pass


class Session:
    def __init__(self, sock, n, mode):
        self.sock, self.n, self.buf = sock, n, b""
        self.kind, _, self.stage = mode.partition(":")

    def send(self, data):
        try:
            self.sock.sendall(data)
        except OSError:
            raise Closed()

    def line(self):
        while b"\n" not in self.buf:
            try:
                chunk = self.sock.recv(65536)
            except OSError:
                chunk = b""
            if not chunk:
                raise Closed()
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line.rstrip(b"\r")

    def reply(self, stage, text):
        """Send text (one reply, CRLF-terminated) unless STAGE is faulty."""
        if self.kind in ("ok", "tlsgarbage", "junk220", "notls") or stage != self.stage:
            return self.send(text.encode())
        log(self.n, "fault %s:%s" % (self.kind, stage))
        if self.kind == "421":
            self.send(("421 4.3.2 hostile: %s\r\n" % stage).encode())
            raise Closed()
        if self.kind == "reset":
            self.reset()
        if self.kind == "stall":
            data = (text[:3] + " stalled " + "." * 120)[:118].encode() + b"\r\n"
            for i in range(len(data)):
                try:
                    self.sock.sendall(data[i:i + 1])
                except OSError:
                    log(self.n, "stalled reply cut after %d/%d octets" % (i, len(data)))
                    raise Closed()
                time.sleep(1)
                if self.peer_gone():
                    log(self.n, "stalled reply cut after %d/%d octets" % (i + 1, len(data)))
                    raise Closed()
            log(self.n, "stalled reply complete")
            raise Closed()
        if self.kind == "endless":
            k = 0
            while True:
                self.send(("%s-line %d of a reply that does not end\r\n" % (text[:3], k)).encode())
                k += 1
        if self.kind == "hugeline":
            self.send(text[:4].encode())
            chunk = b"x" * 65536
            for _ in range(100 * 1024 * 1024 // len(chunk)):
                self.send(chunk)
            self.send(b"\r\n")
            log(self.n, "hugeline sent")
            raise Closed()
        raise SystemExit("hostile_peer.py: unknown kind " + self.kind)

    def peer_gone(self):
        """Has the client closed (EOF or reset) while we stall?"""
        try:
            self.sock.setblocking(False)
            try:
                data = self.sock.recv(4096, socket.MSG_PEEK)
                return data == b""
            except BlockingIOError:
                return False
            except OSError:
                return True
        finally:
            self.sock.setblocking(True)

    def reset(self):
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")
        self.sock.close()
        raise Closed()

    def ehlo_reply(self):
        keys = ["250-hostile.test", "250-8BITMIME", "250-SIZE 200000000"]
        if TLS and self.kind != "notls" and not isinstance(self.sock, ssl.SSLSocket):
            keys.append("250-STARTTLS")
        keys.append("250 ENHANCEDSTATUSCODES")
        return "\r\n".join(keys) + "\r\n"

    def run(self):
        self.reply("greeting", "220 hostile.test ESMTP\r\n")
        while True:
            line = self.line()
            log(self.n, "< " + line.decode("latin-1"))
            verb = line[:4].upper()
            if verb in (b"EHLO", b"HELO", b"LHLO"):
                self.reply("ehlo", self.ehlo_reply())
            elif verb == b"STAR" and TLS and self.kind != "notls":
                self.starttls()
            elif verb == b"MAIL":
                self.reply("mail", "250 2.1.0 Ok\r\n")
            elif verb == b"RCPT":
                self.reply("rcpt", "250 2.1.5 Ok\r\n")
            elif verb == b"DATA":
                self.reply("data", "354 End data with <CR><LF>.<CR><LF>\r\n")
                self.content()
            elif verb == b"RSET" or verb == b"NOOP":
                self.send(b"250 2.0.0 Ok\r\n")
            elif verb == b"QUIT":
                self.send(b"221 2.0.0 Bye\r\n")
                raise Closed()
            else:
                self.send(b"502 5.5.2 Error: command not recognized\r\n")

    def content(self):
        size = 0
        while True:
            line = self.line()
            if line == b".":
                break
            size += len(line) + 2
            if self.stage == "content" and size > 65536:
                log(self.n, "fault %s:content" % self.kind)
                self.reset()
        log(self.n, "content %d" % size)
        self.reply("dot", "250 2.0.0 Ok: queued as HOSTILE%d\r\n" % self.n)
        log(self.n, "accepted")

    def starttls(self):
        if self.kind == "tlsgarbage":
            self.send(b"220 2.0.0 Ready to start TLS\r\n")
            try:
                self.sock.recv(65536)    # the ClientHello
            except OSError:
                raise Closed()
            log(self.n, "fault tlsgarbage")
            self.send(b"this is not a ServerHello\r\n" * 8)
            time.sleep(1)
            raise Closed()
        if self.kind == "junk220":
            log(self.n, "fault junk220")
            self.send(b"220 2.0.0 Ready to start TLS\r\n250 junk before the handshake\r\n")
        else:
            self.send(b"220 2.0.0 Ready to start TLS\r\n")
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(TLS[0], TLS[1])
        try:
            self.sock = ctx.wrap_socket(self.sock, server_side=True)
        except (OSError, ssl.SSLError) as e:
            log(self.n, "tls failed: %s" % e)
            raise Closed()
        self.buf = b""
        log(self.n, "tls")


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        with lock:
            count[0] += 1
            n = count[0]
        mode = "ok" if BEHAVE and os.path.exists(BEHAVE) else MODE
        log(n, "connect")
        s = Session(self.request, n, mode)
        try:
            s.run()
        except Closed:
            pass
        log(n, "closed")
        try:
            s.sock.close()
        except OSError:
            pass


class Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True


Server(("127.0.0.1", PORT), Handler).serve_forever()
