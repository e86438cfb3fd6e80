#!/usr/bin/env python3
"""control_client.py - raw clients of ternd's control socket, for tests.

    control_client.py ask PATH LINE
        send LINE and a newline, print the one answer line; exit 1 when
        no line came back
    control_client.py slow PATH TEXT INTERVAL LIMIT
        send TEXT one byte every INTERVAL seconds and print, when ternd
        closes the connection, "closed after N s: ANSWER" (N whole seconds
        since the connection, ANSWER what came back); after LIMIT seconds
        print "still open after LIMIT s" and exit 1
    control_client.py fill PATH N
        open N connections and keep them open; then open one more and
        print its answer line (or "no answer")
    control_client.py mute PATH
        a control socket that accepts connections and never answers
        (until killed)
"""
import os
import select
import socket
import sys
import time


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    return s


def read_line(s, timeout=10.0):
    """one line from s (without its newline), or None at EOF or timeout"""
    data = b""
    deadline = time.monotonic() + timeout
    while not data.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([s], [], [], left)[0]:
            return None
        try:
            chunk = s.recv(1)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            return None
        data += chunk
    return data[:-1].decode("ascii", "replace")


def ask(path, line):
    s = connect(path)
    try:
        s.sendall(line.encode() + b"\n")
    except (BrokenPipeError, ConnectionResetError):
        pass  # refused before it read: the answer may be there still
    answer = read_line(s)
    if answer is None:
        print("no answer")
        return 1
    print(answer)
    return 0


def slow(path, text, interval, limit):
    s = connect(path)
    start = time.monotonic()
    got = b""
    data = text.encode()
    i = 0
    while time.monotonic() - start < limit:
        if i < len(data):
            try:
                s.send(data[i:i + 1])
            except (BrokenPipeError, ConnectionResetError):
                pass
            i += 1
        until = min(start + limit, time.monotonic() + interval)
        while (left := until - time.monotonic()) > 0:
            if not select.select([s], [], [], left)[0]:
                continue
            try:
                chunk = s.recv(4096)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                print("closed after %d s: %s" % (int(time.monotonic() - start),
                                                 got.decode("ascii", "replace").strip()))
                return 0
            got += chunk
    print("still open after %d s" % limit)
    return 1


def fill(path, n):
    held = [connect(path) for _ in range(n)]
    time.sleep(0.5)  # ternd has accepted them all and given each a thread
    extra = connect(path)
    answer = read_line(extra, 5.0)
    print(answer if answer is not None else "no answer")
    for s in held + [extra]:
        s.close()
    return 0


def mute(path):
    if os.path.exists(path):
        os.unlink(path)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.listen(16)
    conns = []
    while True:
        c, _ = s.accept()
        conns.append(c)  # kept open, never answered


def main(argv):
    if len(argv) == 4 and argv[1] == "ask":
        return ask(argv[2], argv[3])
    if len(argv) == 6 and argv[1] == "slow":
        return slow(argv[2], argv[3], float(argv[4]), float(argv[5]))
    if len(argv) == 4 and argv[1] == "fill":
        return fill(argv[2], int(argv[3]))
    if len(argv) == 3 and argv[1] == "mute":
        return mute(argv[2])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
