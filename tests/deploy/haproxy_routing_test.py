#!/usr/bin/env python3
"""Key affinity of deploy/haproxy.cfg's filter frontend, with the real haproxy (issue 42, item 7).

Three tiny backends stand in for the --ack=filter instances: each reads HAProxy's PROXY v2 header, answers
GET /readyz 200, and answers POST /observe with its name and the key scangate would decide on (the JSON
"key", unescaped, trailing CR/LF trimmed: server/http/request.cc). For 40 ASCII keys and 10 non-ASCII ones:
  - every spelling of a key that scangate reads as that key — plain, with a trailing "\\r\\n", "\\n" or "\\r"
    (escaped, as a till's JSON encoder writes them), with "\\u000d\\u000a", with an ASCII character written
    as "\\u00XX", with a GS (FNC1) raw-escaped as "\\u001d" — lands on the one backend the plain spelling
    lands on, and that backend reads the plain key;
  - a spelling HAProxy cannot hash as scangate reads it ("\\u00e9" for "é", "\\u0101", "\\/", a form body) is
    refused with 400 key-not-routable, never sent to a backend that may not own the key;
and no key is ever seen by two backends. With 3 backends a router hashing the untrimmed or Latin-1 reading
would send about 2 in 3 of those spellings elsewhere: on 87ad733's haproxy.cfg this test fails (trailing CR/LF
on another backend; "\\u00e9" routed). Usage: haproxy_routing_test.py SOURCE_DIR [HAPROXY_CFG]
"""
import http.client
import json
import os
import random
import socket
import string
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PROXY_V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_backend(name):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK stall each

        def setup(self):
            super().setup()
            head = self.rfile.read(16)  # PROXY v2: signature, version/command, family, address length
            if head[:12] != PROXY_V2_SIGNATURE:
                raise ConnectionError("no PROXY v2 header")
            self.rfile.read(int.from_bytes(head[14:16], "big"))

        def answer(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self.answer(200, {"ready": True})

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            key = json.loads(body)["key"].rstrip("\r\n")  # TrimScannerNewline
            self.answer(201, {"backend": name, "key": key})

        def log_message(self, *args):
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request, client_address):
            pass  # a health check HAProxy closed early

    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def ascii_escape(s, i):
    """`s` as a JSON string literal body with its i-th character written as \\u00XX."""
    return "".join("\\u%04x" % ord(c) if j == i else json.dumps(c)[1:-1] for j, c in enumerate(s))


def main():
    source = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    cfg = sys.argv[2] if len(sys.argv) > 2 else os.path.join(source, "deploy", "haproxy.cfg")
    backends = [make_backend("sf%d" % i) for i in (1, 2, 3)]
    listen = free_port()
    env = dict(os.environ)
    env.update({
        "SG_LISTEN_FILTER": "127.0.0.1:%d" % listen,
        "SG_LISTEN_COMMIT": "127.0.0.1:%d" % free_port(),
        "SG_STATS": "127.0.0.1:%d" % free_port(),
        "SG_ERRORS_DIR": os.path.join(source, "deploy", "errors"),
    })
    for i, b in enumerate(backends, 1):
        env["SG_FILTER_%d" % i] = env["SG_COMMIT_%d" % i] = "127.0.0.1:%d" % b.server_address[1]
    log = tempfile.TemporaryFile()
    haproxy = subprocess.Popen(["haproxy", "-db", "-f", cfg], env=env, stdout=log, stderr=log)
    failures = []
    try:
        conn = None

        def post(body, content_type="application/json"):
            nonlocal conn
            for attempt in range(2):  # a keep-alive connection HAProxy closed: once more on a new one
                try:
                    if conn is None:
                        conn = http.client.HTTPConnection("127.0.0.1", listen, timeout=5)
                    conn.request("POST", "/observe", body=body.encode(), headers={"Content-Type": content_type})
                    r = conn.getresponse()
                    return r.status, json.loads(r.read() or b"{}")
                except (ConnectionError, http.client.HTTPException, OSError):
                    conn = None
                    if attempt == 1:
                        raise

        # Every backend up (two checks of 300 ms each): until then HAProxy answers 503.
        deadline = time.time() + 15
        while True:
            try:
                seen = {post(json.dumps({"key": "warmup-%d" % i}))[1].get("backend") for i in range(30)}
            except OSError:
                seen = set()
            if len(seen) == 3:
                break
            if time.time() > deadline or haproxy.poll() is not None:
                log.seek(0)
                sys.exit("haproxy_routing_test: FAIL: the backends never all came up behind haproxy:\n" +
                         log.read().decode(errors="replace"))
            time.sleep(0.2)

        rng = random.Random(42)
        ascii_keys = ["".join(rng.choice(string.ascii_letters + string.digits) for _ in range(12)) for _ in range(40)]
        ascii_keys += ["01095011010209171719050810ABC\u001d21XYZ%d" % i for i in range(5)]  # a GS1 string with FNC1
        latin_keys = ["caf\u00e9-%d" % i for i in range(10)]
        owner = {}  # key -> backend
        by_backend = {}  # key -> set of backends that read it

        def route(key, literal, label):
            status, body = post('{"key":"%s","source":"t"}' % literal)
            if status != 201:
                failures.append("%s of %r: %d %s" % (label, key, status, body))
                return
            by_backend.setdefault(body["key"], set()).add(body["backend"])
            if body["key"] != key:
                failures.append("%s of %r: the backend read %r" % (label, key, body["key"]))
            elif owner.setdefault(key, body["backend"]) != body["backend"]:
                failures.append("%s of %r: on %s, the plain key on %s" % (label, key, body["backend"], owner[key]))

        def refused(key, body, label, content_type="application/json"):
            status, answer = post(body, content_type)
            if status != 400 or answer.get("type") != "urn:scangate:problem:key-not-routable":
                failures.append("%s of %r: %d %s, expected 400 key-not-routable" % (label, key, status, answer))

        for k in ascii_keys:
            plain = json.dumps(k)[1:-1]  # json.dumps escapes the GS as \u001d
            route(k, plain, "plain")
            for suffix in ("\\r\\n", "\\n", "\\r", "\\u000d\\u000a", "\\r\\n\\r\\n"):
                route(k, plain + suffix, "plain + %s" % suffix)
            route(k, ascii_escape(k, 0), "first character as \\u00XX")
            route(k, ascii_escape(k, len(k) - 1) + "\\r\\n", "last character as \\u00XX + CR LF")
        for k in latin_keys:
            route(k, k, "raw UTF-8")
            route(k, k + "\\r\\n", "raw UTF-8 + CR LF")
            refused(k, '{"key":"%s"}' % json.dumps(k)[1:-1], "\\u00e9 escape")  # json.dumps: ASCII only
            refused(k, '{"source":"t", "key" : "%s\\r\\n"}' % json.dumps(k)[1:-1], "\\u00e9 escape + CR LF")
        refused("x\u00c3\u00a9", '{"key":"x\\u00C3\\u00a9"}', "Latin-1 escapes that read as a raw \u00e9")
        refused("\u0101", '{"key":"\\u0101"}', "\\u0100 and up")
        refused("a/b", '{"key":"a\\/b"}', "\\/")
        refused("k", "key=k%0D%0A", "form body", "application/x-www-form-urlencoded")
        for key, seen in by_backend.items():
            if len(seen) > 1 and key in owner:
                failures.append("%r reached %s: one key, two filters" % (key, sorted(seen)))
        spread = {b: sum(1 for o in owner.values() if o == b) for b in ("sf1", "sf2", "sf3")}
        if min(spread.values()) == 0:
            failures.append("keys not spread over the backends (%s): the test would prove nothing" % spread)
    finally:
        haproxy.terminate()
        haproxy.wait(timeout=10)
        for b in backends:
            b.shutdown()
    if failures:
        print("haproxy_routing_test: FAIL (%d):" % len(failures))
        for f in failures[:40]:
            print("  " + f)
        sys.exit(1)
    print("haproxy_routing_test: OK: %d keys, every spelling on its key's backend %s; escapes HAProxy cannot read "
          "exactly refused" % (len(owner), spread))


if __name__ == "__main__":
    main()
