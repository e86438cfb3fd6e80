#!/usr/bin/env python3
"""record_peer.py - an SMTP peer for relay tests that records when each
command arrives relative to its own replies.

    record_peer.py PORT LOG DIR [--no-chunking] [--no-pipelining]
                   [--delay SECONDS] [--drop-after N] [--close-after N]
                   [--fail N:WHAT]... [--max-mails N] [--rcvbuf OCTETS]

Listens on 127.0.0.1:PORT and offers PIPELINING (unless
--no-pipelining), CHUNKING (unless --no-chunking), 8BITMIME and SIZE.
Each end of data or BDAT ... LAST is answered --delay seconds (0.3) after
it arrived (not after the previous reply: a pipelined window is answered as a
round trip would, not queued behind a slow server), reading whatever
arrives meanwhile. Every command is logged to LOG as

    conn=C VERB first|before|after

"first": no final reply was sent yet on this connection; "before": the
command had arrived completely before the previous final reply was sent;
"after": it came later. Each message is written byte for byte (DATA
un-stuffed, without its end) to DIR/C.N.msg and logged as
"conn=C stored C.N.msg". --drop-after N: on the Nth message of the whole
run only, once its content is stored, wait (30 s at most) for the next
MAIL command, log "conn=C drop" (or "conn=C drop without a next MAIL") and
close the connection without a final reply. --close-after N: on the Nth
message of the run only, close the connection right after its final reply
(log "conn=C close"), leaving unanswered whatever came behind it.

Each MAIL is also logged as "conn=C mail K ahead F size S": the Kth MAIL
on the connection, F final replies sent on it before that MAIL had
arrived completely, S its SIZE= (0 without): K - F transactions were in
flight when it arrived. Replies 4xx and 5xx are logged as
"conn=C reply CODE".

--max-mails N: as OpenSMTPD's "smtp limit max-mails", every MAIL after the
Nth of a connection (counted after its RSET too) is answered "452 4.5.3
Error: Too many messages sent" and the session stays open (log "conn=C
max-mails").

--fail N:WHAT (repeatable) acts on the Nth transaction (MAIL) of the
whole run, once: "N:mail:REPLY", "N:rcpt:REPLY" (to each of its RCPTs) or
"N:bdat:REPLY" (to its BDAT ... LAST, content not stored, the transaction
left open: a MAIL without RSET before it gets 503) answer REPLY instead
of 250, after --delay seconds of reading what arrives; a 421 REPLY then
closes the connection (log "conn=C 421"). "N:drop": once its content is
stored, read for --delay seconds and close without its final reply (log
"conn=C drop"). "N:rst": right after its final reply, close with a TCP
reset, reading nothing more (log "conn=C rst"). --rcvbuf: the receive
buffer of each connection (SO_RCVBUF), so that a large message blocks
its sender. Replies are counted, never queued out of order. Runs until
killed.
"""
import argparse
import os
import re
import socket
import struct
import threading
import time

args = None
lock = threading.Lock()
state = {"conns": 0, "msgs": 0, "dropped": False, "closed": False, "mails": 0}
fails = {}  # transaction number of the run -> (what, reply)


def log(line):
    with lock:
        with open(args.log, "a") as f:
            f.write(line + "\n")


class Session:
    def __init__(self, sock, cid):
        self.s = sock
        self.cid = cid
        self.buf = b""
        self.got = 0          # octets received on this connection
        self.used = 0         # octets taken from the stream so far
        self.mark = None      # self.got when the last final reply was sent
        self.mail = None
        self.rcpts = 0
        self.n = 0
        self.marks = []       # self.got at each final reply sent
        self.mails = 0        # MAIL commands on this connection
        self.fail = None      # (what, reply) for the current transaction
        self.arrived = []     # (self.got after a read, when it was read)

    def recv(self, timeout=None):
        self.s.settimeout(timeout)
        try:
            data = self.s.recv(65536)
        except socket.timeout:
            return True
        if not data:
            return False
        self.buf += data
        self.got += len(data)
        self.arrived.append((self.got, time.monotonic()))
        return True

    def arrival(self):
        """when the octets taken so far had all arrived"""
        while len(self.arrived) > 1 and self.arrived[0][0] < self.used:
            self.arrived.pop(0)
        return self.arrived[0][1] if self.arrived else time.monotonic()

    def line(self):
        while b"\r\n" not in self.buf:
            if not self.recv(60):
                return None
        line, self.buf = self.buf.split(b"\r\n", 1)
        self.used += len(line) + 2
        return line.decode("latin-1")

    def octets(self, n):
        while len(self.buf) < n:
            if not self.recv(60):
                return None
        data, self.buf = self.buf[:n], self.buf[n:]
        self.used += n
        return data

    def send(self, text):
        if text[:1] in "45":
            log("conn=%d reply %s" % (self.cid, text[:3]))
        self.s.sendall(text.encode() + b"\r\n")

    def finished(self):
        """a final reply was just sent"""
        self.mark = self.got
        self.marks.append(self.got)

    def failing(self, what):
        """the reply --fail gives at this stage, or None; after --delay"""
        if self.fail is None or self.fail[0] != what:
            return None
        self.linger(args.delay)
        return self.fail[1]

    def refuse(self, reply):
        """a --fail reply; False when it closes the connection (421)"""
        self.send(reply)
        if reply.startswith("421"):
            log("conn=%d 421" % self.cid)
            return False
        return True

    def linger(self, seconds):
        """read what arrives for a while, as a slow server would not"""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if not self.recv(max(0.001, end - time.monotonic())):
                return

    def store(self, data):
        with lock:
            state["msgs"] += 1
            nth = state["msgs"]
        self.n += 1
        name = "%d.%d.msg" % (self.cid, self.n)
        with open(os.path.join(args.dir, name), "wb") as f:
            f.write(data)
        log("conn=%d stored %s" % (self.cid, name))
        return nth

    def final(self, nth):
        """the final reply of a transaction, late; or a drop"""
        with lock:
            drop = nth == args.drop_after and not state["dropped"]
            state["dropped"] |= drop
        if drop:
            end = time.monotonic() + 30
            while b"MAIL " not in self.buf and time.monotonic() < end:
                if not self.recv(max(0.001, end - time.monotonic())):
                    break
            log("conn=%d drop%s" % (self.cid, "" if b"MAIL " in self.buf else " without a next MAIL"))
            return False
        if self.fail is not None and self.fail[0] == "drop":
            self.linger(args.delay)
            log("conn=%d drop" % self.cid)
            return False
        self.linger(max(0.0, self.arrival() + args.delay - time.monotonic()))
        self.send("250 2.0.0 Ok: queued as %d.%d" % (self.cid, self.n))
        self.finished()
        self.mail, self.rcpts = None, 0
        if self.fail is not None and self.fail[0] == "rst":
            time.sleep(0.1)  # the reply leaves first (TCP_NODELAY), then the reset
            log("conn=%d rst" % self.cid)
            self.s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return False
        with lock:
            close = nth == args.close_after and not state["closed"]
            state["closed"] |= close
        if close:
            log("conn=%d close" % self.cid)
            return False
        return True

    def run(self):
        self.send("220 record.test ESMTP")
        while True:
            line = self.line()
            if line is None:
                return
            verb = line.split(" ", 1)[0].upper()
            when = "first" if self.mark is None else "before" if self.used <= self.mark else "after"
            log("conn=%d %s %s" % (self.cid, verb, when))
            if verb == "EHLO":
                ext = ["8BITMIME", "SIZE 100000000"]
                if not args.no_pipelining:
                    ext.insert(0, "PIPELINING")
                if not args.no_chunking:
                    ext.append("CHUNKING")
                self.send("250-record.test")
                for e in ext[:-1]:
                    self.send("250-" + e)
                self.send("250 " + ext[-1])
            elif verb == "MAIL" and args.max_mails and self.mails >= args.max_mails:
                log("conn=%d max-mails" % self.cid)
                self.send("452 4.5.3 Error: Too many messages sent")
            elif verb == "MAIL":
                self.mails += 1
                size = re.search(r" SIZE=(\d+)", line)
                log("conn=%d mail %d ahead %d size %s" % (self.cid, self.mails,
                    sum(1 for m in self.marks if m < self.used), size.group(1) if size else 0))
                if self.mail is not None:
                    self.send("503 5.5.1 Error: nested MAIL command")
                    continue
                with lock:
                    state["mails"] += 1
                    self.fail = fails.pop(state["mails"], None)
                reply = self.failing("mail")
                if reply is not None:
                    if not self.refuse(reply):
                        return
                    continue
                self.mail = line
                self.send("250 2.1.0 Ok")
            elif verb == "RCPT":
                if self.mail is None:
                    self.send("503 5.5.1 Error: need MAIL command")
                else:
                    reply = self.failing("rcpt")
                    if reply is not None:
                        if not self.refuse(reply):
                            return
                        continue
                    self.rcpts += 1
                    self.send("250 2.1.5 Ok")
            elif verb == "DATA":
                if not self.rcpts:
                    self.send("554 5.5.1 Error: no valid recipients")
                    continue
                self.send("354 End data with <CR><LF>.<CR><LF>")
                lines = []
                while True:
                    l = self.line()
                    if l is None:
                        return
                    if l == ".":
                        break
                    lines.append(l[1:] if l.startswith(".") else l)
                data = "".join(l + "\r\n" for l in lines).encode("latin-1")
                if not self.final(self.store(data)):
                    return
            elif verb == "BDAT":
                words = line.split()
                data = self.octets(int(words[1]))
                if data is None:
                    return
                if len(words) < 3 or words[2].upper() != "LAST":
                    self.send("250 2.0.0 Ok: %d octets" % len(data))
                    continue
                if not self.rcpts:
                    self.send("554 5.5.1 Error: no valid recipients")
                    self.finished()
                    continue
                reply = self.failing("bdat")
                if reply is not None:
                    ok = self.refuse(reply)
                    self.finished()
                    if not ok:
                        return
                    continue
                if not self.final(self.store(data)):
                    return
            elif verb == "RSET":
                self.mail, self.rcpts = None, 0
                self.send("250 2.0.0 Ok")
            elif verb == "NOOP":
                self.send("250 2.0.0 Ok")
            elif verb == "QUIT":
                self.send("221 2.0.0 Bye")
                return
            else:
                self.send("502 5.5.2 Error: command not recognized")


def serve(sock, cid):
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        Session(sock, cid).run()
    except OSError:
        pass
    finally:
        sock.close()


def main():
    global args
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("log")
    ap.add_argument("dir")
    ap.add_argument("--no-chunking", action="store_true")
    ap.add_argument("--no-pipelining", action="store_true")
    ap.add_argument("--max-mails", type=int, default=0)
    ap.add_argument("--delay", type=float, default=0.3)
    ap.add_argument("--drop-after", type=int, default=0)
    ap.add_argument("--close-after", type=int, default=0)
    ap.add_argument("--fail", action="append", default=[])
    ap.add_argument("--rcvbuf", type=int, default=0)
    args = ap.parse_args()
    for spec in args.fail:
        n, what, *reply = spec.split(":", 2)
        fails[int(n)] = (what, reply[0] if reply else None)
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if args.rcvbuf:
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, args.rcvbuf)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", args.port))
    ls.listen(16)
    while True:
        sock, _ = ls.accept()
        with lock:
            state["conns"] += 1
            cid = state["conns"]
        threading.Thread(target=serve, args=(sock, cid), daemon=True).start()


if __name__ == "__main__":
    main()
