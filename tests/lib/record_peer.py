#!/usr/bin/env python3
"""record_peer.py - an SMTP peer for relay tests that records when each
command arrives relative to its own replies.

    record_peer.py PORT LOG DIR [--no-chunking] [--delay SECONDS]
                   [--drop-after N] [--close-after N]

Listens on 127.0.0.1:PORT and offers PIPELINING, CHUNKING (unless
--no-chunking), 8BITMIME and SIZE. Each end of data or BDAT ... LAST is
answered after --delay seconds (0.3), reading whatever arrives meanwhile.
Every command is logged to LOG as

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
Replies are counted, never queued out of order. Runs until killed.
"""
import argparse
import os
import socket
import threading
import time

args = None
lock = threading.Lock()
state = {"conns": 0, "msgs": 0, "dropped": False, "closed": False}


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
        return True

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
        self.s.sendall(text.encode() + b"\r\n")

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
        self.linger(args.delay)
        self.mark = self.got
        self.send("250 2.0.0 Ok: queued as %d.%d" % (self.cid, self.n))
        self.mail, self.rcpts = None, 0
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
                ext = ["PIPELINING", "8BITMIME", "SIZE 100000000"]
                if not args.no_chunking:
                    ext.append("CHUNKING")
                self.send("250-record.test")
                for e in ext[:-1]:
                    self.send("250-" + e)
                self.send("250 " + ext[-1])
            elif verb == "MAIL":
                if self.mail is not None:
                    self.send("503 5.5.1 Error: nested MAIL command")
                else:
                    self.mail = line
                    self.send("250 2.1.0 Ok")
            elif verb == "RCPT":
                if self.mail is None:
                    self.send("503 5.5.1 Error: need MAIL command")
                else:
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
                    self.mark = self.got
                    self.send("554 5.5.1 Error: no valid recipients")
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
    ap.add_argument("--delay", type=float, default=0.3)
    ap.add_argument("--drop-after", type=int, default=0)
    ap.add_argument("--close-after", type=int, default=0)
    args = ap.parse_args()
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
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
