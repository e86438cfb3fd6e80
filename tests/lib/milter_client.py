#!/usr/bin/env python3
"""milter_client.py - play the MTA's side of the milter protocol (v6).

For what miltertest cannot send: miltertest crashes on a header field
over 64 KB, which Postfix sends as it is (header_size_limit = 102400).
Usage:

    milter_client.py HOST:PORT|unix:PATH HEADERFILE

Sends one message from 192.0.2.1 (queue id HUGE1) whose header fields
are HEADERFILE's lines ("Name: value", one field a line), and prints the
milter's reply to each step and the end-of-message actions, one a line:
"header-add NAME", "header-change NAME INDEX <empty|value>", "insert NAME
INDEX", "reply CODE TEXT", "continue", "accept", "reject", "tempfail",
or "closed" when the milter drops the connection. Exit 0 unless the
connection could not be made.
"""
import socket
import struct
import sys

if sys.argv[1].startswith("unix:"):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(60)
    s.connect(sys.argv[1][5:])
else:
    host, port = sys.argv[1].rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=60)


def send(cmd, data=b""):
    s.sendall(struct.pack(">I", len(data) + 1) + cmd + data)


def recv():
    def exact(n):
        buf = b""
        while len(buf) < n:
            chunk = s.recv(n - len(buf))
            if not chunk:
                raise EOFError
            buf += chunk
        return buf
    n = struct.unpack(">I", exact(4))[0]
    data = exact(n)
    return data[:1], data[1:]


FINAL = {b"c": "continue", b"a": "accept", b"r": "reject", b"t": "tempfail", b"d": "discard"}


def reply(step):
    cmd, data = recv()
    if cmd == b"y":
        print(step, "reply", data.rstrip(b"\0").decode())
    else:
        print(step, FINAL.get(cmd, "?" + cmd.decode("latin-1")))


def z(*parts):
    return b"".join(p.encode() + b"\0" for p in parts)


try:
    # version 6; every action; steps it may skip: HELO, body, EOH, unknown
    send(b"O", struct.pack(">III", 6, 0x1FF, 0x2 | 0x10 | 0x40 | 0x100))
    cmd, data = recv()
    _, actions, steps = struct.unpack(">III", data[:12])
    noreply = lambda bit: steps & bit
    send(b"D", b"C" + z("{client_addr}", "192.0.2.1"))
    send(b"C", z("client.example") + b"4" + struct.pack(">H", 25) + z("192.0.2.1"))
    if not noreply(0x1000):
        reply("connect")
    send(b"M", z("<sender@example.org>"))
    if not noreply(0x4000):
        reply("mail")
    send(b"R", z("<rcpt@example.net>"))
    if not noreply(0x8000):
        reply("rcpt")
    if not steps & 0x200:
        send(b"T")
        if not noreply(0x10000):
            reply("data")
    for line in open(sys.argv[2], encoding="latin-1"):
        name, _, value = line.rstrip("\n").partition(": ")
        send(b"L", z(name, value))
        if not noreply(0x80):
            reply("header")
    send(b"D", b"E" + z("i", "HUGE1"))
    send(b"E")
    while True:
        cmd, data = recv()
        if cmd == b"h":
            print("eom header-add", data.split(b"\0")[0].decode())
        elif cmd == b"m":
            idx = struct.unpack(">I", data[:4])[0]
            name, value = data[4:].split(b"\0")[:2]
            print("eom header-change", name.decode(), idx, value.decode() or "<empty>")
        elif cmd == b"i":
            idx = struct.unpack(">I", data[:4])[0]
            print("eom insert", data[4:].split(b"\0")[0].decode(), idx)
        else:
            cmd_data = (cmd, data)
            break
    cmd, data = cmd_data
    if cmd == b"y":
        print("eom reply", data.rstrip(b"\0").decode())
    else:
        print("eom", FINAL.get(cmd, "?" + cmd.decode("latin-1")))
    send(b"Q")
except (EOFError, ConnectionResetError, BrokenPipeError):
    print("closed")
