#!/usr/bin/env python3
"""openapi.yaml against the real server's answers: every route and method, every problem type, for real.

Starts the real scangate (the binary under test: the release build's, or the sanitized one in the ASan step) against
the throwaway PostgreSQL of CTest fixture "pg" in a few configurations, and the real haproxy with the shipped
deploy/haproxy.cfg in front of one of them, provokes every answer the document declares and checks each one with
tests/api/openapi_check.py (the status is declared for the route and method, required headers such as Retry-After,
Allow and WWW-Authenticate are there and fit, Content-Type is the declared one, the body fits the schema, a problem
carries one of the types its response lists). Then:
  - every operation of the document was met, and every status it declares was answered, but for a short list of
    answers no request can provoke (NOT_PROVOKED, each with its reason);
  - every problem type of the document was answered (the same list aside), every problem type the server's code
    builds (server/http/problem.cc) or the shipped haproxy.cfg and deploy/errors/ answer is in the document, and
    the document names none that neither does;
  - negative controls: the same recorded answers, checked against copies of the document with one declaration
    removed, fail (so this test fails when the server answers what the document does not declare).
The instances:
  main     --admin-listen, --cors-origins, --allowed-hosts, a small --max-body-bytes-in-flight (503 before a body is
           read): the client routes on the main port, the operational ones on the admin listener, 404 across
  tokens   --tokens-file with three terminals, --keys=gs1: 401, 403 route/source-not-allowed, invalid-gs1, the
           failed-authentication limit (429); in a database of its own (<the test's>_gs1): a database records one
           digest scheme (sql/014) and refuses an instance with another --keys
  rate     --rate-limit=1 --rate-burst=1 per client address: 429 on each client route
  writer   --writers=1 --request-timeout=1s behind haproxy (PROXY v2 from 127.0.0.2): a row held by the test's own
           transaction stalls its writer, so a request's deadline passes while its key's transaction is in flight
           (503 outcome-unknown) or still queued (503 unavailable)
  mtls     HTTPS with --tls-client-ca: a client certificate whose CN names no terminal (403 certificate-not-allowed)
  nodb     PostgreSQL through a relay the test cuts (an outage): /readyz and the client routes 503 unavailable
  haproxy  deploy/haproxy.cfg: its commit frontend to "writer"; its filter frontend to a stand-in instance that
           answers health checks and drops requests (502 -> outcome-unknown), then to none (503 -> unavailable);
           400 key-not-routable and 421 batch-not-routable; deploy/errors/504.http (a 20 s timeout) is checked as
           the file HAProxy sends
Usage (CTest sets SCANGATE_TEST_PG_DIR: fixture "pg"): openapi_responses_test.py SOURCE_DIR SCANGATE_BINARY
Needs python3-yaml, python3-jsonschema, haproxy, psql (scripts/deps.sh test); fails, never skips, without them.
"""
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import openapi_check  # noqa: E402
from openapi_check import Answer, Checker, Document  # noqa: E402

TIMEOUT = 30  # seconds: the bound of every wait (failure detection only)
PREFIX = "urn:scangate:problem:"
RUN = uuid.uuid4().hex[:16]
ALLOWED_ORIGIN = "http://till.test"
PROXY_SOURCE = "127.0.0.2"  # deploy/haproxy.cfg's default SG_PROXY_SOURCE

# Declared answers no request can provoke, with the reason; everything else the document declares must be met.
NOT_PROVOKED = {
    "500": "internal: an exception stopped at a handler's boundary (a bug or bad_alloc); no request provokes it",
}
NOT_PROVOKED_TYPES = {
    PREFIX + "internal": NOT_PROVOKED["500"],
}


def fail(msg):
    print("openapi_responses_test: FAIL: " + msg, flush=True)
    sys.exit(1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------------------------------------------------------
# HTTP on a raw socket: the tests need what HTTP libraries refuse to send (bad framing, two Host fields, an 9 KiB
# header, a Content-Length with the body withheld).

def read_answer(sock, head_only):
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("connection closed before a complete response header: %r" % buf[:200])
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        name = name.strip().lower()
        headers[name] = headers[name] + ", " + value.strip() if name in headers else value.strip()
    if head_only or status in (204, 304):
        return Answer(status, headers, b"")
    if "content-length" in headers:
        n = int(headers["content-length"])
        while len(rest) < n:
            chunk = sock.recv(65536)
            if not chunk:
                break
            rest += chunk
        return Answer(status, headers, rest[:n])
    if headers.get("transfer-encoding", "").lower() == "chunked":
        raise ConnectionError("chunked response: not expected from scangate or HAProxy")
    while True:  # HTTP/1.0-style: the body ends with the connection
        chunk = sock.recv(65536)
        if not chunk:
            return Answer(status, headers, rest)
        rest += chunk


def exchange(port, method, target, body=b"", headers=(), host=None, content_type="application/json",
             withhold_body=False, raw=None, source=None, tls=None):
    """One request on a fresh connection and its answer. `withhold_body`: send Content-Length but not the body (the
    server answers from the header); `raw`: the request's bytes as given; `tls`: an ssl.SSLContext (HTTPS)."""
    if raw is None:
        if isinstance(body, str):
            body = body.encode()
        lines = ["%s %s HTTP/1.1" % (method, target), "Host: %s" % (host or "127.0.0.1:%d" % port)]
        if body or withhold_body:
            if content_type is not None:
                lines.append("Content-Type: " + content_type)
            lines.append("Content-Length: %d" % len(body))
        lines += ["%s: %s" % h for h in headers]
        raw = ("\r\n".join(lines) + "\r\n\r\n").encode() + (b"" if withhold_body else body)
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT,
                                  source_address=(source, 0) if source else None) as s:
        if tls is not None:
            s = tls.wrap_socket(s)
        s.sendall(raw)
        return read_answer(s, method == "HEAD")


def post_json(port, target, obj, **kw):
    return exchange(port, "POST", target, json.dumps(obj), **kw)


# ------------------------------------------------------------------------------------------------------------------
# Processes

class Scangate:
    def __init__(self, binary, work, name, flags):
        self.name = name
        self.dir = os.path.join(work, name)
        os.makedirs(self.dir)
        self.log_path = os.path.join(self.dir, "scangate.log")
        self.port_file = os.path.join(self.dir, "port")
        self.admin = any(f.startswith("--admin-listen") for f in flags)
        args = [binary, "--listen=127.0.0.1", "--port=0", "--port-file=" + self.port_file, "--threads=2",
                "--capacity=100000", "--journal-dir=" + os.path.join(self.dir, "journal")] + flags
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        self.port = self.admin_port = None

    def wait_serving(self, ready=True):
        """Until the port file is written and (ready) /readyz answers 200, or (not ready) answers at all."""
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                fail("%s: scangate exited (%d):\n%s" % (self.name, self.proc.returncode, self.tail()))
            if self.port is None and os.path.exists(self.port_file):
                text = open(self.port_file).read()
                if text.endswith("\n"):
                    self.port = int(text)
            if self.admin and self.admin_port is None:
                for line in open(self.log_path, errors="replace"):
                    if '"listening"' in line:
                        try:
                            self.admin_port = json.loads(line).get("admin_port")
                        except ValueError:
                            pass
            ops = self.admin_port if self.admin else self.port
            if ops:
                try:
                    status = exchange(ops, "GET", "/readyz").status
                    if status == 200 or not ready:
                        return
                except OSError:
                    pass
            time.sleep(0.05)
        fail("%s: not %s within %d s:\n%s" % (self.name, "ready" if ready else "serving", TIMEOUT, self.tail()))

    def tail(self):
        if not self.log.closed:
            self.log.flush()
        return open(self.log_path, errors="replace").read()[-4000:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self.log.closed:
            self.log.close()
        return self.proc.returncode


class RowBlocker:
    """An uncommitted row for a key's digest in a psql session of the test's own: the writer inserting that key
    waits on its lock until release() rolls it back (tests/server/harness.h has the C++ twin)."""

    def __init__(self, pg_url, key):
        self.pg_url = pg_url
        self.psql = subprocess.Popen(["psql", pg_url, "-q", "-v", "ON_ERROR_STOP=1"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        digest = hashlib.sha256(key.encode()).hexdigest()
        self.psql.stdin.write("BEGIN;\nINSERT INTO scan_keys (digest, seen_by) VALUES "
                              "(scangate_stored_digest(decode('%s', 'hex')), 'blocker');\n\\echo inserted\n" % digest)
        self.psql.stdin.flush()
        if self.psql.stdout.readline().strip() != "inserted":  # the row is held before the key is sent
            fail("the blocking psql session failed: " + self.psql.stderr.read())

    def wait_for_waiter(self):
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            out = subprocess.run(["psql", self.pg_url, "-tAc",
                                  "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE "
                                  "NOT l.granted AND a.datname = current_database() AND "
                                  "a.backend_type = 'client backend'"], capture_output=True, text=True, timeout=TIMEOUT)
            if out.returncode != 0:
                fail("psql: " + out.stderr)
            if int(out.stdout.strip() or 0) > 0:
                return
            if self.psql.poll() is not None:
                fail("the blocking psql session ended: " + self.psql.stderr.read())
            time.sleep(0.02)
        fail("the writer never waited on the test's row")

    def release(self):
        try:
            self.psql.stdin.write("ROLLBACK;\n\\q\n")
            self.psql.stdin.close()
        except OSError:
            pass  # the session ended already (its failure is reported)
        self.psql.wait(timeout=TIMEOUT)


def make_certificates(work):
    """A CA, a server certificate for 127.0.0.1 and a client certificate whose CN is no terminal id (openssl(1))."""
    d = os.path.join(work, "tls")
    os.makedirs(d)

    def run(*args):
        r = subprocess.run(["openssl"] + list(args), cwd=d, capture_output=True, text=True, timeout=TIMEOUT)
        if r.returncode != 0:
            fail("openssl %s: %s" % (" ".join(args), r.stderr))

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    run("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=openapi-test-ca")
    for name, subject, ext in (("server", "/CN=127.0.0.1", "subjectAltName=IP:127.0.0.1"),
                               ("client", "/CN=not a terminal!", "extendedKeyUsage=clientAuth")):
        run("req", *ec, "-keyout", name + ".key", "-out", name + ".csr", "-subj", subject)
        with open(os.path.join(d, name + ".ext"), "w") as f:
            f.write(ext + "\n")
        run("x509", "-req", "-in", name + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out",
            name + ".pem", "-days", "2", "-extfile", name + ".ext")
    return d


class PgLink:
    """A TCP relay between an instance and PostgreSQL that the test can cut: every connection through it is reset
    and new ones are closed at once — an outage as the instance sees it, without stopping the cluster other tests
    share (scangate needs PostgreSQL to start, so it starts through the relay, up)."""

    def __init__(self, pg_port):
        self.pg_port = pg_port
        self.down = False
        self.lock = threading.Lock()
        self.socks = []
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.down:
                client.close()
                continue
            try:
                server = socket.create_connection(("127.0.0.1", self.pg_port), timeout=TIMEOUT)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.socks += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        self.down = True
        with self.lock:
            socks, self.socks = self.socks, []
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.cut()
        self.listener.close()


def stand_in_backend():
    """An --ack=filter instance as HAProxy's health check sees it (PROXY v2, GET /readyz 200) that drops every other
    request unanswered: a crash mid-request, which HAProxy answers 502 (deploy/errors/502.http)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self):
            super().setup()
            head = self.rfile.read(16)
            self.rfile.read(int.from_bytes(head[14:16], "big"))

        def do_GET(self):
            body = b'{"status":"ready"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            self.close_connection = True  # no answer: the connection closes under HAProxy

        def log_message(self, *args):
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request, client_address):
            pass

    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


# ------------------------------------------------------------------------------------------------------------------
# What the server's code and the shipped HAProxy files answer, read from the source (static: no request needed)

def problem_types_in_source(source):
    text = open(os.path.join(source, "server", "http", "problem.cc")).read()
    slugs = set(re.findall(r'(?:Make|TooManyRequests)\(\s*(?:\d+,\s*)?"([a-z0-9-]+)"', text))
    if len(slugs) < 20:
        fail("read only %d problem slugs from server/http/problem.cc: the pattern no longer matches its Make() calls"
             % len(slugs))
    server = {PREFIX + s for s in slugs}
    haproxy = set()
    for path in [os.path.join(source, "deploy", "haproxy.cfg")] + [
            os.path.join(source, "deploy", "errors", f) for f in sorted(os.listdir(os.path.join(source, "deploy",
                                                                                                 "errors")))]:
        haproxy |= set(re.findall(r"urn:scangate:problem:[a-z0-9-]+", open(path).read()))
    return server, haproxy


def errorfile_answer(path):
    data = open(path, "rb").read()
    head, _, body = data.replace(b"\r\n", b"\n").partition(b"\n\n")
    lines = head.decode().split("\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return Answer(int(lines[0].split(" ")[1]), headers, body.rstrip(b"\n"))


# ------------------------------------------------------------------------------------------------------------------

def gs1_database(pg_url):
    """A fresh database beside the test's own, for the --keys=gs1 instance: a database records one digest scheme
    (sql/014: the secret, --keys, the stored form) and refuses an instance with another at start (exit 2)."""
    m = re.match(r"^(postgres(?:ql)?://[^/]*/)([^/?]+)(\?.*)?$", pg_url)
    if not m:
        fail("cannot name a second database beside %r" % pg_url)
    name = m.group(2) + "_gs1"
    for sql in ("DROP DATABASE IF EXISTS %s" % name, "CREATE DATABASE %s" % name):
        out = subprocess.run(["psql", pg_url, "-q", "-v", "ON_ERROR_STOP=1", "-c", sql],
                             capture_output=True, text=True, timeout=TIMEOUT)
        if out.returncode != 0:
            fail("psql %s: %s" % (sql, out.stderr))
    return m.group(1) + name + (m.group(3) or "")


def main():
    if len(sys.argv) != 3:
        fail("usage: openapi_responses_test.py SOURCE_DIR SCANGATE_BINARY")
    source, binary = sys.argv[1], sys.argv[2]
    pg_dir = os.environ.get("SCANGATE_TEST_PG_DIR")
    if not pg_dir:
        fail("SCANGATE_TEST_PG_DIR not set: run through ctest (fixture pg)")
    for tool in ("haproxy", "psql"):
        if shutil.which(tool) is None:
            fail("%s not installed (scripts/deps.sh test installs it)" % tool)
    pg_url = open(os.path.join(pg_dir, "url")).read().strip()
    try:
        doc = Document(openapi_check.load_strict(os.path.join(source, "openapi.yaml")))
    except Exception as e:  # noqa: BLE001 - any parse error is the finding
        fail("openapi.yaml does not parse strictly: %s" % e)
    checker = Checker(doc)
    recorded = []  # (label, method, target, answer): the negative controls re-check them

    def check(label, method, target, answer, status=None, ptype=None):
        recorded.append((label, method, target, answer))
        # A HEAD answer has no body to name its problem type: its status, headers and Content-Type are checked.
        checker.check(label, method, target, answer, status, None if method == "HEAD" else ptype)

    def key(tag):
        return "oa-%s-%s-%s" % (RUN, tag, uuid.uuid4().hex[:8])

    work = tempfile.mkdtemp(prefix="scangate-openapi.")
    procs = []
    links = []
    haproxy = None
    ok = False
    t0 = time.monotonic()
    try:
        tokens_path = os.path.join(work, "tokens.txt")
        tokens = {t: "tok-%s-%s" % (t, uuid.uuid4().hex) for t in ("till1", "till2", "till3")}
        with open(tokens_path, "w") as f:
            f.write("%s till1 observe,batch,lookup\n" % hashlib.sha256(tokens["till1"].encode()).hexdigest())
            f.write("%s till2 lookup\n" % hashlib.sha256(tokens["till2"].encode()).hexdigest())
            f.write("%s till3 observe\n" % hashlib.sha256(tokens["till3"].encode()).hexdigest())
        # Started together: their warm starts overlap.
        main_p = Scangate(binary, work, "main", ["--database-url=" + pg_url, "--admin-listen=127.0.0.1:0",
                                                 "--cors-origins=" + ALLOWED_ORIGIN, "--allowed-hosts=127.0.0.1",
                                                 "--max-body-bytes-in-flight=4096"])
        tok_p = Scangate(binary, work, "tokens", ["--database-url=" + gs1_database(pg_url),
                                                  "--tokens-file=" + tokens_path, "--keys=gs1"])
        rate_p = Scangate(binary, work, "rate", ["--database-url=" + pg_url, "--rate-limit=1", "--rate-burst=1"])
        writer_p = Scangate(binary, work, "writer", ["--database-url=" + pg_url, "--writers=1",
                                                     "--request-timeout=1s", "--proxy-protocol-from=" + PROXY_SOURCE])
        tls_dir = make_certificates(work)
        mtls_p = Scangate(binary, work, "mtls", ["--database-url=" + pg_url, "--admin-listen=127.0.0.1:0",
                                                 "--tls-cert=" + os.path.join(tls_dir, "server.pem"),
                                                 "--tls-key=" + os.path.join(tls_dir, "server.key"),
                                                 "--tls-client-ca=" + os.path.join(tls_dir, "ca.pem")])
        pg_port = open(os.path.join(pg_dir, "port")).read().strip()
        link = PgLink(int(pg_port))
        links.append(link)
        nodb_p = Scangate(binary, work, "nodb", ["--database-url=" + pg_url.replace(":%s/" % pg_port,
                                                                                   ":%d/" % link.port)])
        procs += [main_p, tok_p, rate_p, writer_p, mtls_p, nodb_p]
        for p in (main_p, tok_p, rate_p, writer_p, mtls_p, nodb_p):
            p.wait_serving()
        M, A = main_p.port, main_p.admin_port
        client_routes = ["/observe", "/observe/batch", "/lookup"]

        def listener(path):
            return M if path in client_routes else A

        def wrong_listener(path):
            return A if path in client_routes else M

        # ---- main: the verdicts and the operational routes' answers
        k1, k2, kf, kb = key("k1"), key("k2"), key("form"), key("batch")
        check("observe new", "POST", "/observe", post_json(M, "/observe", {"key": k1, "source": "t9"}), 201)
        check("observe duplicate", "POST", "/observe", post_json(M, "/observe", {"key": k1}), 200)
        idem = [("Idempotency-Key", '"%s"' % uuid.uuid4())]
        check("observe with Idempotency-Key", "POST", "/observe", post_json(M, "/observe", {"key": k2}, headers=idem), 201)
        replay = post_json(M, "/observe", {"key": k2}, headers=idem)
        check("observe retried (replayed)", "POST", "/observe", replay, 201)
        if replay.header("idempotent-replayed") != "true" or (replay.json() or {}).get("replayed") is not True:
            checker.fail("observe retried", "not a replay: %r" % replay)
        check("observe form body", "POST", "/observe",
              exchange(M, "POST", "/observe", "key=%s&source=t9" % kf, content_type="application/x-www-form-urlencoded"),
              201)
        check("observe from a listed origin", "POST", "/observe",
              post_json(M, "/observe", {"key": key("cors")}, headers=[("Origin", ALLOWED_ORIGIN)]), 201)
        check("batch", "POST", "/observe/batch",
              post_json(M, "/observe/batch", {"keys": [k1, kb, {"key": kb, "source": "t9", "request_id": "r-1"}]}), 200)
        check("lookup found", "POST", "/lookup", post_json(M, "/lookup", {"key": k1}), 200)
        check("lookup form body", "POST", "/lookup",
              exchange(M, "POST", "/lookup", "key=" + kf, content_type="application/x-www-form-urlencoded"), 200)
        check("lookup not recorded", "POST", "/lookup", post_json(M, "/lookup", {"key": key("never")}), 404,
              "not-recorded")
        for path in client_routes:
            check("preflight " + path, "OPTIONS", path,
                  exchange(M, "OPTIONS", path, headers=[("Origin", ALLOWED_ORIGIN),
                                                        ("Access-Control-Request-Method", "POST"),
                                                        ("Access-Control-Request-Headers", "content-type")]), 204)
            check("OPTIONS without Origin " + path, "OPTIONS", path, exchange(M, "OPTIONS", path), 405,
                  "method-not-allowed")
        for path in ("/healthz", "/readyz", "/metrics", "/stats", "/dashboard"):
            for method in ("GET", "HEAD"):
                check("%s %s" % (method, path), method, path, exchange(A, method, path), 200)

        # ---- main: each client route's refusals
        bad_bodies = [
            ("malformed-json", "/observe", '{"key":'), ("duplicate-member", "/observe", '{"key":"a","key":"b"}'),
            ("invalid-key", "/observe", '{"key":""}'), ("invalid-source", "/observe", '{"key":"x","source":"a\\u0007"}'),
            ("malformed-json", "/observe/batch", "[[["), ("invalid-batch", "/observe/batch", '{"keys":[]}'),
            ("invalid-key", "/observe/batch", '{"keys":[""]}'),
            ("invalid-idempotency-key", "/observe/batch", '{"keys":[{"key":"x","request_id":"a b"}]}'),
            ("malformed-json", "/lookup", "nope"), ("invalid-key", "/lookup", '{"key":7}'),
        ]
        for slug, path, body in bad_bodies:
            check("%s on %s" % (slug, path), "POST", path, exchange(M, "POST", path, body), 400, slug)
        check("malformed-form", "POST", "/observe",
              exchange(M, "POST", "/observe", "key=%zz", content_type="application/x-www-form-urlencoded"), 400,
              "malformed-form")
        check("invalid-idempotency-key header", "POST", "/observe",
              post_json(M, "/observe", {"key": key("idem")}, headers=[("Idempotency-Key", "x" * 300)]), 400,
              "invalid-idempotency-key")
        limits = {"/observe": 16 * 1024, "/observe/batch": 1024 * 1024, "/lookup": 16 * 1024}
        for path in client_routes:
            check("415 " + path, "POST", path, exchange(M, "POST", path, "{}", content_type="text/plain"), 415,
                  "unsupported-media-type")
            check("413 " + path, "POST", path,
                  exchange(M, "POST", path, b"x" * (limits[path] + 1), withhold_body=True), 413, "body-too-large")
            # --max-body-bytes-in-flight=4096: a body over it (a batch: over half of it) is refused before it is read.
            check("503 body budget " + path, "POST", path, exchange(M, "POST", path, b"x" * 5000, withhold_body=True),
                  503, "unavailable")

        # ---- main: every operation of the document — framing, Origin, Host, header size, the other listener
        for path, method in doc.operations():
            m = method.upper()
            port = listener(path)
            check("bad framing %s %s" % (m, path), m, path,
                  exchange(port, m, path, headers=[("Transfer-Encoding", "gzip")]), 400, "bad-request")
            check("foreign Origin %s %s" % (m, path), m, path,
                  exchange(port, m, path, headers=[("Origin", "http://evil.test")]), 403, "origin-not-allowed")
            check("Host not allowed %s %s" % (m, path), m, path, exchange(port, m, path, host="evil.test"), 421,
                  "host-not-allowed")
            check("431 %s %s" % (m, path), m, path, exchange(port, m, path, headers=[("X-Pad", "p" * 9000)]), 431,
                  "header-too-large")
            check("other listener %s %s" % (m, path), m, path, exchange(wrong_listener(path), m, path), 404,
                  "not-found")
            if method in ("get", "head"):
                check("body on %s %s" % (m, path), m, path, exchange(port, m, path, b"abcd"), 413, "body-too-large")
        for path in doc.paths():
            check("PUT " + path, "PUT", path, exchange(listener(path), "PUT", path, "{}"), 405, "method-not-allowed")
            if path in client_routes:
                check("GET " + path, "GET", path, exchange(M, "GET", path), 405, "method-not-allowed")
        check("unknown path", "GET", "/nope?key=secret", exchange(M, "GET", "/nope?key=secret"), 404, "not-found")
        check("second Host", "POST", "/observe",
              exchange(M, "POST", "/observe", raw=b"POST /observe HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: 127.0.0.1\r\n"
                                                   b"Content-Length: 2\r\n\r\n{}"), 400, "bad-request")

        # ---- tokens (+ --keys=gs1): 401, 403, invalid-gs1, the failed-authentication limit
        T = tok_p.port

        def bearer(t):
            return [("Authorization", "Bearer " + tokens[t])]

        serial = uuid.uuid4().hex[:20]
        pack = "010036141403000817271231" + "10LOT42\x1d21" + serial  # GTIN, expiry, lot, GS, serial
        pack_other_lot = "010036141403000817271231" + "10LOT43\x1d21" + serial
        check("gs1 new", "POST", "/observe", post_json(T, "/observe", {"key": pack}, headers=bearer("till1")), 201)
        dup = post_json(T, "/observe", {"key": pack_other_lot}, headers=bearer("till1"))
        check("gs1 duplicate, another lot", "POST", "/observe", dup, 200)
        if (dup.json() or {}).get("mismatch") != ["lot"]:
            checker.fail("gs1 duplicate, another lot", "no mismatch [lot]: %r" % dup)
        check("gs1 lookup by another terminal", "POST", "/lookup",
              post_json(T, "/lookup", {"key": pack}, headers=bearer("till2")), 200)
        check("gs1 batch", "POST", "/observe/batch",
              post_json(T, "/observe/batch", {"keys": [pack]}, headers=bearer("till1")), 200)
        for path in client_routes:
            body = {"keys": [pack]} if path == "/observe/batch" else {"key": pack}
            check("no token " + path, "POST", path, post_json(T, path, body), 401, "unauthorized")
            check("wrong token " + path, "POST", path,
                  post_json(T, path, body, headers=[("Authorization", "Bearer nope-%d" % len(path))]), 401,
                  "unauthorized")
            bad = {"keys": ["0100361414030009" + "21X"]} if path == "/observe/batch" else {"key": "0100361414030009"
                                                                                                   "21X"}
            invalid = post_json(T, path, bad, headers=bearer("till1"))
            check("invalid-gs1 " + path, "POST", path, invalid, 400, "invalid-gs1")
            if not (invalid.json() or {}).get("ai"):
                checker.fail("invalid-gs1 " + path, "no ai member: %r" % invalid)
        check("route-not-allowed /observe", "POST", "/observe",
              post_json(T, "/observe", {"key": pack}, headers=bearer("till2")), 403, "route-not-allowed")
        check("route-not-allowed /observe/batch", "POST", "/observe/batch",
              post_json(T, "/observe/batch", {"keys": [pack]}, headers=bearer("till3")), 403, "route-not-allowed")
        check("route-not-allowed /lookup", "POST", "/lookup",
              post_json(T, "/lookup", {"key": pack}, headers=bearer("till3")), 403, "route-not-allowed")
        check("source-not-allowed /observe", "POST", "/observe",
              post_json(T, "/observe", {"key": pack, "source": "till2"}, headers=bearer("till1")), 403,
              "source-not-allowed")
        check("source-not-allowed /observe/batch", "POST", "/observe/batch",
              post_json(T, "/observe/batch", {"keys": [{"key": pack, "source": "till2"}]}, headers=bearer("till1")),
              403, "source-not-allowed")
        # The failed-authentication limit (20 at once, then 1/s per address): a wrong token past it is 429.
        for i in range(40):
            a = post_json(T, "/observe", {"key": pack}, headers=[("Authorization", "Bearer wrong-%d" % i)])
            if a.status == 429:
                check("failed authentications limited", "POST", "/observe", a, 429, "rate-limited")
                break
            check("wrong token %d" % i, "POST", "/observe", a, 401, "unauthorized")
        else:
            checker.fail("failed authentications limited", "40 wrong tokens in a row were never limited")

        # ---- mtls: HTTPS on the main port, a client certificate whose CN names no terminal
        client_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        client_tls.check_hostname = False
        client_tls.verify_mode = ssl.CERT_NONE
        client_tls.load_cert_chain(os.path.join(tls_dir, "client.pem"), os.path.join(tls_dir, "client.key"))
        for path in client_routes:
            body = {"keys": [key("tls")]} if path == "/observe/batch" else {"key": key("tls")}
            check("certificate-not-allowed " + path, "POST", path,
                  post_json(mtls_p.port, path, body, tls=client_tls), 403, "certificate-not-allowed")

        # ---- rate: --rate-limit=1 --rate-burst=1 per address
        R = rate_p.port
        for path in client_routes:
            body = {"keys": [key("rl")]} if path == "/observe/batch" else {"key": key("rl")}
            for _ in range(20):
                a = post_json(R, path, body)
                if a.status == 429:
                    check("rate-limited " + path, "POST", path, a, 429, "rate-limited")
                    break
                check("under the rate limit " + path, "POST", path, a)
            else:
                checker.fail("rate-limited " + path, "20 requests at once were never limited")

        # ---- nodb: PostgreSQL becomes unreachable (its relay cut)
        N = nodb_p.port
        link.cut()
        until_status = time.monotonic() + TIMEOUT
        while exchange(N, "GET", "/readyz").status != 503:
            if time.monotonic() > until_status:
                fail("nodb: /readyz never answered 503 with PostgreSQL cut off:\n" + nodb_p.tail())
            time.sleep(0.05)
        check("readyz without PostgreSQL", "GET", "/readyz", exchange(N, "GET", "/readyz"), 503, "unavailable")
        check("HEAD readyz without PostgreSQL", "HEAD", "/readyz", exchange(N, "HEAD", "/readyz"), 503)
        check("healthz without PostgreSQL", "GET", "/healthz", exchange(N, "GET", "/healthz"), 200)
        for path in client_routes:
            body = {"keys": [key("down")]} if path == "/observe/batch" else {"key": key("down")}
            check("%s without PostgreSQL" % path, "POST", path, post_json(N, path, body), 503, "unavailable")

        # ---- writer: a deadline passes while the key's transaction is in flight / while it is queued
        W = writer_p.port
        for path in ("/observe", "/observe/batch"):
            held, queued = key("held"), key("queued")
            blocker = RowBlocker(pg_url, held)
            try:
                first = {}
                body = {"keys": [held]} if path == "/observe/batch" else {"key": held}
                t = threading.Thread(target=lambda: first.update(a=post_json(W, path, body)))
                t.start()
                blocker.wait_for_waiter()
                check("queued behind a stalled writer", "POST", "/observe", post_json(W, "/observe", {"key": queued}),
                      503, "unavailable")
                t.join(TIMEOUT)
                check("in flight past the deadline " + path, "POST", path, first.get("a") or Answer(0, {}, b""), 503,
                      "outcome-unknown")
            finally:
                blocker.release()

        # ---- the shipped haproxy.cfg: the commit frontend to "writer", the filter frontend to a stand-in
        stand_in = stand_in_backend()
        commit_port, filter_port = free_port(), free_port()
        env = dict(os.environ)
        env.update({"SG_LISTEN_COMMIT": "127.0.0.1:%d" % commit_port, "SG_LISTEN_FILTER": "127.0.0.1:%d" % filter_port,
                    "SG_STATS": "127.0.0.1:%d" % free_port(), "SG_ERRORS_DIR": os.path.join(source, "deploy", "errors"),
                    "SG_COMMIT_1": "127.0.0.1:%d" % W, "SG_COMMIT_2": "127.0.0.1:%d" % free_port(),
                    "SG_COMMIT_3": "127.0.0.1:%d" % free_port(),
                    "SG_FILTER_1": "127.0.0.1:%d" % stand_in.server_address[1],
                    "SG_FILTER_2": "127.0.0.1:%d" % free_port(), "SG_FILTER_3": "127.0.0.1:%d" % free_port()})
        hlog = open(os.path.join(work, "haproxy.log"), "w")
        haproxy = subprocess.Popen(["haproxy", "-db", "-f", os.path.join(source, "deploy", "haproxy.cfg")], env=env,
                                   stdout=hlog, stderr=subprocess.STDOUT)

        def until(what, probe, want):
            deadline = time.monotonic() + TIMEOUT
            while time.monotonic() < deadline:
                if haproxy.poll() is not None:
                    fail("haproxy exited:\n" + open(hlog.name).read()[-3000:])
                try:
                    a = probe()
                    if want(a):
                        return a
                except OSError:
                    pass
                time.sleep(0.1)
            fail("haproxy: %s never happened:\n%s" % (what, open(hlog.name).read()[-3000:]))

        a = until("a 201 from scangate through the commit frontend",
                  lambda: post_json(commit_port, "/observe", {"key": key("via-haproxy")}), lambda a: a.status == 201)
        check("through haproxy: observe", "POST", "/observe", a, 201)
        check("through haproxy: a scangate problem", "POST", "/observe",
              exchange(commit_port, "POST", "/observe", "{", host="127.0.0.1"), 400, "malformed-json")
        check("through haproxy: healthz", "GET", "/healthz", exchange(commit_port, "GET", "/healthz"), 200)
        check("haproxy: key-not-routable (form body)", "POST", "/observe",
              exchange(filter_port, "POST", "/observe", "key=x", content_type="application/x-www-form-urlencoded"),
              400, "key-not-routable")
        check("haproxy: key-not-routable (\\u00e9)", "POST", "/observe",
              exchange(filter_port, "POST", "/observe", '{"key":"caf\\u00e9"}'), 400, "key-not-routable")
        check("haproxy: batch-not-routable", "POST", "/observe/batch",
              post_json(filter_port, "/observe/batch", {"keys": ["a"]}), 421, "batch-not-routable")
        check("haproxy: batch-not-routable (preflight)", "OPTIONS", "/observe/batch",
              exchange(filter_port, "OPTIONS", "/observe/batch", headers=[("Origin", ALLOWED_ORIGIN)]), 421,
              "batch-not-routable")
        a = until("the stand-in up (a 502 for a dropped request)",
                  lambda: post_json(filter_port, "/observe", {"key": key("dropped")}),
                  lambda a: a.problem_type() == PREFIX + "outcome-unknown")
        check("haproxy: the instance failed mid-request (502)", "POST", "/observe", a, 503, "outcome-unknown")
        stand_in.shutdown()
        stand_in.server_close()
        a = until("no filter instance up", lambda: post_json(filter_port, "/observe", {"key": key("none-up")}),
                  lambda a: a.problem_type() == PREFIX + "unavailable")
        check("haproxy: no instance up", "POST", "/observe", a, 503, "unavailable")
        writer_p.stop()  # the commit frontend's one instance: then every route there is HAProxy's 503
        until("no commit instance up", lambda: exchange(commit_port, "GET", "/healthz"),
              lambda a: a.problem_type() == PREFIX + "unavailable")
        for path, method in doc.operations():
            m = method.upper()
            check("haproxy, no instance up: %s %s" % (m, path), m, path,
                  exchange(commit_port, m, path, b"{}" if m == "POST" else b""), 503, "unavailable")
        check("haproxy's 504 (deploy/errors/504.http)", "POST", "/observe",
              errorfile_answer(os.path.join(source, "deploy", "errors", "504.http")), 503, "outcome-unknown")

        # ---- coverage: every operation, every declared status, every problem type
        for path, method in doc.operations():
            for code in doc.paths()[path][method]["responses"]:
                if (path, method, code) not in checker.seen and code not in NOT_PROVOKED:
                    checker.fail("coverage", "%s %s: the declared %s was never answered" % (method.upper(), path, code))
        for t in doc.problem_types():
            if t not in checker.seen_types and t not in NOT_PROVOKED_TYPES:
                checker.fail("coverage", "problem type %s was never answered" % t)
        for t in checker.seen_types:
            if t not in doc.problem_types():
                checker.fail("coverage", "problem type %s answered, not in the document (first: %s)" % (
                    t, checker.seen_types[t]))
        server_types, haproxy_types = problem_types_in_source(source)
        for t in sorted((server_types | haproxy_types) - set(doc.problem_types())):
            checker.fail("source", "%s is answered (server/http/problem.cc, deploy/) but not in openapi.yaml" % t)
        for t in sorted(set(doc.problem_types()) - server_types - haproxy_types):
            checker.fail("source", "openapi.yaml names %s, which neither the server nor deploy/ answers" % t)

        # ---- negative controls: the same answers against a document missing one declaration each
        def controls():
            def drop_status(tree):
                del tree["paths"]["/observe"]["post"]["responses"]["421"]

            def drop_type(tree):
                tree["components"]["schemas"]["Problem"]["properties"]["type"]["enum"].remove(PREFIX + "invalid-key")

            def drop_retry_after(tree):
                tree["components"]["responses"]["Unavailable"]["headers"]["Retry-After"]["schema"] = {"const": 2}

            def narrow_lookup(tree):
                tree["paths"]["/lookup"]["post"]["responses"]["200"]["content"]["application/json"]["schema"][
                    "required"].append("keep_until")

            def drop_head(tree):
                del tree["paths"]["/healthz"]["head"]

            yield "a 421 the document does not declare for POST /observe", drop_status, "Host not allowed POST /observe"
            yield "a problem type not in the document", drop_type, "invalid-key on /observe"
            yield "a Retry-After the document does not allow", drop_retry_after, "503 body budget /observe"
            yield "a body without a member the schema requires", narrow_lookup, "lookup found"
            yield "a method the document does not list", drop_head, "HEAD /healthz"

        for what, edit, label in controls():
            control = Checker(openapi_check.mutated(doc, edit))
            answers = [r for r in recorded if r[0] == label]
            if not answers:
                checker.fail("negative control", "no recorded answer labelled %r" % label)
                continue
            for lbl, method, target, answer in answers:
                control.check(lbl, method, target, answer)
            if not control.failures:
                checker.fail("negative control", "%s (%s) passed the check" % (what, label))
        ok = not checker.failures
    finally:
        if haproxy is not None:
            haproxy.terminate()
            haproxy.wait(timeout=TIMEOUT)
        for p in procs:
            # SIGTERM is a graceful stop: exit status 0 (under ASan, a leak or an error at exit makes it non-zero).
            if p.stop() != 0 and ok:
                checker.fail(p.name, "scangate exited with status %s after SIGTERM:\n%s" % (p.proc.returncode,
                                                                                         p.tail()))
                ok = False
        for link in links:
            link.close()
        if ok:
            shutil.rmtree(work, ignore_errors=True)
    if checker.failures:
        print("openapi_responses_test: FAIL (%d):" % len(checker.failures))
        for f in checker.failures[:80]:
            print("  " + f)
        print("work dir kept (server logs): " + work)
        sys.exit(1)
    print("openapi_responses_test: OK: %d answers checked against openapi.yaml in %.1f s: %d of %d operations, %d of "
          "%d declared statuses (not provoked: %s), %d of %d problem types (not provoked: %s); negative controls "
          "fail as they must" % (len(recorded), time.monotonic() - t0, len({(p, m) for p, m, _ in checker.seen}),
                                 len(doc.operations()), len(checker.seen),
                                 sum(len(doc.paths()[p][m]["responses"]) for p, m in doc.operations()),
                                 ", ".join(sorted(NOT_PROVOKED)), len(checker.seen_types), len(doc.problem_types()),
                                 ", ".join(t[len(PREFIX):] for t in sorted(NOT_PROVOKED_TYPES))))


if __name__ == "__main__":
    main()
