#!/usr/bin/env python3
"""slow_client.py - clients that trickle their input, run side by side.

Each case connects (HOST:PORT or unix:PATH), reads the greeting, sends
its preamble (whole commands) and reads one reply per command line of
it, except a final BDAT line, whose reply comes after the chunk; then it
sends its payload at RATE octets a second (in pieces ten times a second,
one octet at a time below 10 octets a second) while it reads what ternd
answers, for at most MAX seconds. Usage:

    slow_client.py MAX NAME TARGET RATE PREAMBLE PAYLOAD [NAME ...]

PREAMBLE and PAYLOAD take Python escapes. One line per case,
in the order given:

    NAME SECONDS REPLY | EOF
    NAME SECONDS none

SECONDS is the time from the first octet of the payload to the first
reply line that came during it (to its end when none came), REPLY that
line, EOF when the connection was closed after it (within a second).
"""
import socket
import sys
import threading
import time

from smtp_chat import connect


class Reader:
    """Reply lines from a socket, one at a time."""

    def __init__(self, s):
        self.s = s
        self.buf = b""

    def line(self):
        while b"\n" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.rstrip(b"\r").decode("latin-1")

    def reply(self):
        while True:
            line = self.line()
            if line is None or line[3:4] != "-":
                return line


def unescape(text):
    return text.encode("latin-1").decode("unicode_escape").encode("latin-1")


def run(limit, target, rate, preamble, payload, out):
    s = connect(target, None)
    r = Reader(s)
    r.reply()
    lines = [x for x in preamble.split(b"\n") if x]
    s.sendall(preamble)
    for x in lines:
        if not x.upper().startswith(b"BDAT"):
            r.reply()
    step = 1 if rate < 10 else rate // 10
    gap = step / rate
    start = time.monotonic()
    got = []

    def read():
        for wait in (limit + 2, 1):
            s.settimeout(wait)
            try:
                line = r.line()
            except socket.timeout:
                return
            except OSError:     # reset: closed
                line = None
            got.append((line, time.monotonic()))
            if line is None:
                return

    t = threading.Thread(target=read, daemon=True)
    t.start()
    off = 0
    while off < len(payload) and time.monotonic() - start < limit and not got:
        try:
            s.sendall(payload[off:off + step])
        except OSError:
            break
        off += step
        time.sleep(gap)
    # a reply came: the reader waits up to 1 s more for the close, so wait
    # for it (checking got at once saw "open" when the close came later)
    t.join(1.5 if got else max(0.0, limit - (time.monotonic() - start)) + 2.5)
    if not got or got[0][0] is None:
        out.append("%.1f none" % (time.monotonic() - start))
    else:
        end = "EOF" if len(got) > 1 and got[1][0] is None else "open"
        out.append("%.1f %s | %s" % (got[0][1] - start, got[0][0], end))
    s.close()


def main():
    limit = float(sys.argv[1])
    args = sys.argv[2:]
    cases = []
    while args:
        name, target, rate, pre, pay = args[:5]
        args = args[5:]
        cases.append((name, target, int(rate), unescape(pre), unescape(pay)))
    outs = [[] for _ in cases]
    threads = [threading.Thread(target=run, args=(limit, c[1], c[2], c[3], c[4], o))
               for c, o in zip(cases, outs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c, o in zip(cases, outs):
        print(c[0], o[0] if o else "error", flush=True)


if __name__ == "__main__":
    main()
