#!/usr/bin/env python3
"""A loopback TCP proxy that can cut its connections (bench/chaos.sh puts one between an
instance and PostgreSQL). Standard library only.

    tcp_cut.py LISTEN_PORT TARGET_PORT CUT_SECONDS

Listens on 127.0.0.1:LISTEN_PORT and relays every connection to 127.0.0.1:TARGET_PORT.
On SIGUSR1 it cuts for CUT_SECONDS, as a network partition would: nothing more is relayed
on any connection (in-flight queries hang), new connections are accepted but get nothing;
when the cut ends every connection that lived through it is reset (the peer has lost its
state), and new connections are relayed again. Each cut logs one line on stdout when it
starts and one when it ends. Exits on SIGTERM.
"""

import signal
import socket
import struct
import sys
import threading
import time

lock = threading.Lock()
pairs = set()
cutting = threading.Event()
cut_requested = threading.Event()


class Pair:
    def __init__(self, client):
        self.client = client
        self.upstream = None
        self.closed = False

    def close(self, reset=False):
        with lock:
            if self.closed:
                return
            self.closed = True
            pairs.discard(self)
        for s in (self.client, self.upstream):
            if s is None:
                continue
            try:
                if reset:
                    # SO_LINGER 0: close sends an RST instead of a FIN.
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.close()
            except OSError:
                pass


def pump(pair, src, dst):
    import select

    while not pair.closed:
        if cutting.is_set():
            time.sleep(0.05)
            continue
        try:
            ready, _, _ = select.select([src], [], [], 0.2)
        except (OSError, ValueError):
            break
        if not ready or cutting.is_set() or pair.closed:
            continue
        try:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
        except OSError:
            break
    pair.close()


def serve(pair, target):
    try:
        pair.upstream = socket.create_connection(("127.0.0.1", target), timeout=5)
        pair.upstream.settimeout(None)
    except OSError:
        pair.close()
        return
    if pair.closed:
        pair.close()
        return
    threading.Thread(target=pump, args=(pair, pair.client, pair.upstream), daemon=True).start()
    threading.Thread(target=pump, args=(pair, pair.upstream, pair.client), daemon=True).start()


def cut(seconds):
    with lock:
        cutting.set()
        held = list(pairs)
    print(f"tcp_cut: cut for {seconds:.0f} s, {len(held)} connection(s) frozen", flush=True)
    time.sleep(seconds)
    with lock:
        doomed = list(pairs)
    for p in doomed:
        p.close(reset=True)
    cutting.clear()
    print(f"tcp_cut: cut over, {len(doomed)} connection(s) reset", flush=True)


def main():
    listen, target, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    signal.signal(signal.SIGUSR1, lambda *_: cut_requested.set())
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", listen))
    srv.listen(256)
    srv.settimeout(0.2)
    print(f"tcp_cut: 127.0.0.1:{listen} -> 127.0.0.1:{target}", flush=True)
    while True:
        if cut_requested.is_set():
            cut_requested.clear()
            threading.Thread(target=cut, args=(seconds,), daemon=True).start()
        try:
            client, _ = srv.accept()
        except socket.timeout:
            continue
        except InterruptedError:
            continue
        client.settimeout(None)
        pair = Pair(client)
        with lock:
            pairs.add(pair)
            frozen = cutting.is_set()
        if not frozen:
            threading.Thread(target=serve, args=(pair, target), daemon=True).start()
        # A connection accepted during the cut is held silent and reset when it ends.


if __name__ == "__main__":
    main()
