#!/usr/bin/env python3
"""smtp_chat.py - replay a scripted SMTP/LMTP conversation byte for byte.

Used by tests that need what swaks cannot send: bare CR/LF, smuggled end
of data, pipelined junk, huge lines. Usage:

    smtp_chat.py HOST:PORT|unix:PATH SCRIPT [--source ADDR]

SCRIPT lines:
    > TEXT     send TEXT (Python escapes: \\r \\n \\x00 ...)
    >* N TEXT  send TEXT repeated N times
    <          read one reply (up to its last line) and print that last line
    <<         read the greeting
    # ...      comment
Exits 0 when the script ran; 1 on a connection error or timeout (printed).
"""
import socket
import sys


def connect(target, source):
    if target.startswith("unix:"):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(target[5:])
    else:
        host, port = target.rsplit(":", 1)
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if source:
            s.bind((source, 0))
        s.connect((host, int(port)))
    s.settimeout(15)
    return s


def read_reply(s, buf):
    """One reply: lines until one whose fourth octet is a space."""
    while True:
        while b"\n" not in buf[0]:
            chunk = s.recv(65536)
            if not chunk:
                raise EOFError("connection closed")
            buf[0] += chunk
        line, buf[0] = buf[0].split(b"\n", 1)
        line = line.rstrip(b"\r")
        if len(line) < 4 or line[3:4] != b"-":
            return line.decode("latin-1")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    source = None
    if len(sys.argv) == 5 and sys.argv[3] == "--source":
        source = sys.argv[4]
    s = connect(sys.argv[1], source)
    buf = [b""]
    try:
        for raw in open(sys.argv[2], encoding="latin-1"):
            raw = raw.rstrip("\n")
            if raw.startswith("#") or not raw:
                continue
            if raw.startswith(">* "):
                count, text = raw[3:].split(" ", 1)
                s.sendall(text.encode("latin-1").decode("unicode_escape").encode("latin-1") * int(count))
            elif raw.startswith("> "):
                s.sendall(raw[2:].encode("latin-1").decode("unicode_escape").encode("latin-1"))
            elif raw in ("<", "<<"):
                print(read_reply(s, buf), flush=True)
    except (OSError, EOFError) as e:
        print("ERROR: %s" % e, flush=True)
        sys.exit(1)
    s.close()


if __name__ == "__main__":
    main()
