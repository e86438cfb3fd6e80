#!/usr/bin/env python3
"""notify_socket.py - a service manager's notification socket, for tests.

    notify_socket.py SOCKET OUT [PORT]

Binds a unix datagram socket at SOCKET (mode 0777: the daemon sends after
dropping privileges), prints "bound" to stdout once it listens, and writes
each datagram it receives to OUT as one line: "pid=PID " followed by its
assignments joined with "|" (the sender's pid from SCM_CREDENTIALS, as
systemd checks it for NotifyAccess=main). With PORT, the first datagram
with READY=1 is followed by a line "connect=ok" or "connect=ERROR",
the result of a TCP connection to 127.0.0.1:PORT made when it arrived:
whether the daemon listened by the time it said it was ready.
"""
import os
import socket
import struct
import sys


def main():
    path, out = sys.argv[1], sys.argv[2]
    port = int(sys.argv[3]) if len(sys.argv) > 3 else None
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    s.bind(path)
    os.chmod(path, 0o777)
    print("bound", flush=True)
    ready_seen = False
    with open(out, "a", buffering=1) as f:
        while True:
            data, anc, _, _ = s.recvmsg(4096, socket.CMSG_SPACE(12))
            pid = "?"
            for level, kind, value in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                    pid = str(struct.unpack("iII", value[:12])[0])
            text = data.decode("utf-8", "replace")
            f.write("pid=%s %s\n" % (pid, text.replace("\n", "|")))
            if port is not None and not ready_seen and "READY=1" in text.split("\n"):
                ready_seen = True
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=5).close()
                    f.write("connect=ok\n")
                except OSError as e:
                    f.write("connect=%s\n" % e.__class__.__name__)


if __name__ == "__main__":
    main()
