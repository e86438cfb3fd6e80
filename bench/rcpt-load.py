#!/usr/bin/env python3
"""rcpt-load.py - recipients by the thousand, and a live peer's delivery
latency, for bench/queue-scale.sh's dead-peer case.

    rcpt-load.py fill HOST:PORT MESSAGES RCPTS DOMAIN [SESSIONS]
    rcpt-load.py latency HOST:PORT SINK_PORT SAMPLES INTERVAL DOMAIN

fill: SESSIONS (4) SMTP sessions send MESSAGES messages of RCPTS
recipients each (r<message>.<n>@DOMAIN, all unique), every transaction
pipelined in one write (MAIL, the RCPTs, DATA), the 200-byte content after
354. Prints "messages=N accepted=N rcpts=N failed=N seconds=S rcpts/s=R".

latency: an SMTP sink on 127.0.0.1:SINK_PORT (EHLO with PIPELINING, every
command answered 250/354), and a client that sends SAMPLES messages, one
every INTERVAL seconds, to one recipient at DOMAIN through HOST:PORT, each
with a unique X-Probe header. For each it takes the time from the client
reading the 250 to the end of data to the sink reading that message's
end of data (the same clock: time.monotonic in one process), and prints
one line per sample (negative when the sink had it before the client read
its 250), then "samples=N delivered=N p50_ms=X p99_ms=X max_ms=X
over_100ms=N".
Exits 1 if a message is refused or not delivered within 10 s.
"""
import socket
import sys
import threading
import time


def parse_addr(s):
    host, port = s.rsplit(":", 1)
    return host, int(port)


class Client:
    """One SMTP client connection, reading replies line by line."""

    def __init__(self, addr):
        self.s = socket.create_connection(addr, timeout=120)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.reply()
        self.s.sendall(b"EHLO load.test\r\n")
        self.reply()

    def reply(self):
        """One (possibly multi-line) reply: its code."""
        while True:
            i = self.buf.find(b"\r\n")
            if i < 0:
                d = self.s.recv(65536)
                if not d:
                    raise OSError("connection closed")
                self.buf += d
                continue
            line, self.buf = self.buf[:i], self.buf[i + 2:]
            if len(line) < 4 or line[3:4] != b"-":
                return int(line[:3])

    def close(self):
        try:
            self.s.sendall(b"QUIT\r\n")
            self.reply()
        except OSError:
            pass
        self.s.close()


def fill(addr, messages, rcpts, domain, sessions):
    lock = threading.Lock()
    st = {"next": 0, "ok": 0, "failed": 0}
    body = b"Subject: dead peer backlog\r\n\r\n" + b"x" * 170 + b"\r\n.\r\n"

    def run():
        c = Client(addr)
        while True:
            with lock:
                m = st["next"]
                if m >= messages:
                    break
                st["next"] += 1
            cmds = [b"MAIL FROM:<fill@load.test>\r\n"]
            cmds += [b"RCPT TO:<r%d.%d@%s>\r\n" % (m, n, domain.encode()) for n in range(rcpts)]
            cmds.append(b"DATA\r\n")
            c.s.sendall(b"".join(cmds))
            codes = [c.reply() for _ in range(rcpts + 2)]
            good = codes[0] == 250 and all(x == 250 for x in codes[1:-1]) and codes[-1] == 354
            if codes[-1] == 354:
                c.s.sendall(body)
                good = c.reply() == 250 and good
            with lock:
                st["ok" if good else "failed"] += 1
        c.close()

    t0 = time.monotonic()
    ts = [threading.Thread(target=run) for _ in range(sessions)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    secs = time.monotonic() - t0
    print("messages=%d accepted=%d rcpts=%d failed=%d seconds=%.1f rcpts/s=%.0f"
          % (messages, st["ok"], st["ok"] * rcpts, st["failed"], secs, st["ok"] * rcpts / secs))
    return 0 if st["failed"] == 0 else 1


def sink(port, seen, cv):
    """A minimal SMTP sink: notes when each message's end of data arrives."""
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(16)

    def serve(s):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        f = b""
        data = None
        s.sendall(b"220 sink.test ESMTP\r\n")
        while True:
            d = s.recv(65536)
            if not d:
                return
            f += d
            while True:
                if data is not None:
                    data, f = data + f, b""
                    i = data.find(b"\r\n.\r\n")
                    if i < 0:
                        break
                    msg, f, data = data[:i], data[i + 5:], None
                    at = time.monotonic()
                    for line in msg.split(b"\r\n"):
                        if line.startswith(b"X-Probe: "):
                            with cv:
                                seen[line[9:].decode()] = at
                                cv.notify_all()
                    s.sendall(b"250 2.0.0 ok\r\n")
                    continue
                i = f.find(b"\r\n")
                if i < 0:
                    break
                line, f = f[:i], f[i + 2:]
                verb = line[:4].upper()
                if verb == b"EHLO":
                    s.sendall(b"250-sink.test\r\n250-PIPELINING\r\n250 8BITMIME\r\n")
                elif verb == b"DATA":
                    data = b""
                    s.sendall(b"354 go\r\n")
                elif verb == b"QUIT":
                    s.sendall(b"221 bye\r\n")
                    s.close()
                    return
                else:
                    s.sendall(b"250 ok\r\n")

    def accept():
        while True:
            s, _ = ls.accept()
            threading.Thread(target=serve, args=(s,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()


def latency(addr, sink_port, samples, interval, domain):
    seen, cv = {}, threading.Condition()
    sink(sink_port, seen, cv)
    time.sleep(interval)  # ternd's warm connections to the sink come up
    lat, rc = [], 0
    for k in range(samples):
        tag = "p%d.%d" % (time.time_ns(), k)
        c = Client(addr)
        c.s.sendall(b"MAIL FROM:<probe@load.test>\r\nRCPT TO:<live%d@%s>\r\nDATA\r\n"
                    % (k, domain.encode()))
        codes = [c.reply() for _ in range(3)]
        if codes != [250, 250, 354]:
            print("sample %d: refused: %s" % (k, codes))
            return 1
        c.s.sendall(b"Subject: live\r\nX-Probe: %s\r\n\r\nlive\r\n.\r\n" % tag.encode())
        code = c.reply()
        t250 = time.monotonic()
        c.close()
        if code != 250:
            print("sample %d: end of data got %d" % (k, code))
            return 1
        with cv:
            cv.wait_for(lambda: tag in seen, timeout=10)
            at = seen.get(tag)
        if at is None:
            print("sample %d: not delivered within 10 s" % k)
            rc = 1
        else:
            lat.append((at - t250) * 1000)
            print("sample %d: %.1f ms" % (k, lat[-1]), flush=True)
        time.sleep(interval)
    lat.sort()
    p50 = lat[(len(lat) - 1) // 2] if lat else float("nan")
    p99 = lat[(len(lat) * 99 + 99) // 100 - 1] if lat else float("nan")
    print("samples=%d delivered=%d p50_ms=%.1f p99_ms=%.1f max_ms=%.1f over_100ms=%d"
          % (samples, len(lat), p50, p99, lat[-1] if lat else float("nan"),
             sum(1 for x in lat if x > 100)))
    return rc


def main():
    a = sys.argv[1:]
    if len(a) >= 5 and a[0] == "fill":
        return fill(parse_addr(a[1]), int(a[2]), int(a[3]), a[4], int(a[5]) if len(a) > 5 else 4)
    if len(a) == 6 and a[0] == "latency":
        return latency(parse_addr(a[1]), int(a[2]), int(a[3]), float(a[4]), a[5])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
