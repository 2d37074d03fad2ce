#!/usr/bin/env python3
"""Browser clients in a real browser: headless Chromium against a real scangate + PostgreSQL.

scangate runs with --cors-origins=http://127.0.0.1:<A>. A small static page server (python3 http.server)
serves test pages on two origins: http://127.0.0.1:<A> (allowed) and http://127.0.0.1:<B> (not allowed).
Each page runs its fetches and writes a JSON result into the DOM; Chromium's --dump-dom prints it.
  * allowed origin: observe a key (a preflighted JSON POST), observe it again, look it up: 201, 200, 200.
  * foreign origin: the same preflighted fetch fails (CORS); the no-preflight "simple" requests a page can
    always send (fetch mode no-cors with a form-typed JSON body, a urlencoded form body, text/plain) get
    403 at scangate and record nothing.
Checked via --dump-dom and PostgreSQL (psql) and POST /lookup without Origin.
Usage (CTest, fixture pg sets SCANGATE_TEST_PG_DIR): cors_browser_test.py <scangate binary>
Exit 0 pass, 1 fail, 77 skipped (no chromium on this machine: scripts/deps.sh test installs it).
"""
import functools
import http.server
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import hashlib
import html
import uuid

TIMEOUT = 60  # seconds, bound of every wait (failure detection only)


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def chromium_binary():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve(directory):
    handler = functools.partial(Quiet, directory=directory)
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def post(port, path, body, headers=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body.encode(), method="POST",
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def psql_count(url, key):
    digest = hashlib.sha256(key.encode()).hexdigest()
    out = subprocess.run(["psql", url, "-tAc", f"SELECT count(*) FROM scan_keys WHERE digest = scangate_stored_digest('\\x{digest}'::bytea)"],
                         capture_output=True, text=True, timeout=TIMEOUT)
    if out.returncode != 0:
        fail("psql: " + out.stderr)
    return int(out.stdout.strip())


PAGE = """<!doctype html><meta charset="utf-8"><title>scangate cors test</title>
<pre id="result">pending</pre>
<script>
const S = %(server)s;
const out = {};
async function step(name, url, init) {
  try {
    const r = await fetch(S + url, init);
    out[name] = {type: r.type, status: r.status};
    if (r.type !== 'opaque') out[name].body = await r.text();
  } catch (e) {
    out[name] = {error: String(e)};
  }
}
const json = (key) => ({method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify({key})});
(async () => {
%(steps)s
  document.getElementById('result').textContent = JSON.stringify(out);
})();
</script>
"""

ALLOWED_STEPS = """
  await step('observe1', '/observe', json(%(k1)s));
  await step('observe2', '/observe', json(%(k1)s));
  await step('lookup', '/lookup', json(%(k1)s));
"""

FOREIGN_STEPS = """
  await step('cors', '/observe', json(%(k2)s));
  await step('nocors_form_json', '/observe', {method: 'POST', mode: 'no-cors',
      headers: {'Content-Type': 'application/x-www-form-urlencoded'}, body: JSON.stringify({key: %(k3)s})});
  await step('nocors_form', '/observe', {method: 'POST', mode: 'no-cors', body: new URLSearchParams({key: %(k4)s})});
  await step('nocors_text', '/observe', {method: 'POST', mode: 'no-cors', body: JSON.stringify({key: %(k5)s})});
"""


def dump_dom(chromium, url, profile):
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--virtual-time-budget=10000",
           "--dump-dom", url]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    start = r.stdout.find('<pre id="result">')
    if start < 0:
        fail(f"no result element in --dump-dom of {url} (rc {r.returncode}):\n{r.stdout}\n{r.stderr[-3000:]}")
    end = r.stdout.find("</pre>", start)
    text = r.stdout[start + len('<pre id="result">'):end]
    if text == "pending":
        fail(f"the page at {url} did not finish:\n{r.stderr[-3000:]}")
    return json.loads(html.unescape(text))


def main():
    if len(sys.argv) != 2:
        fail("usage: cors_browser_test.py <scangate binary>")
    chromium = chromium_binary()
    if chromium is None:
        print("SKIP: chromium not installed (scripts/deps.sh test installs it)")
        return 77
    pg_dir = os.environ.get("SCANGATE_TEST_PG_DIR")
    if not pg_dir:
        fail("SCANGATE_TEST_PG_DIR not set: run through ctest (fixture pg)")
    pg_url = open(os.path.join(pg_dir, "url")).read().strip()

    work = tempfile.mkdtemp(prefix="scangate-cors-browser.")
    allowed_dir = os.path.join(work, "allowed")
    foreign_dir = os.path.join(work, "foreign")
    os.makedirs(allowed_dir)
    os.makedirs(foreign_dir)
    allowed = serve(allowed_dir)
    foreign = serve(foreign_dir)
    a_port, b_port = allowed.server_address[1], foreign.server_address[1]

    port_file = os.path.join(work, "port")
    log = open(os.path.join(work, "scangate.log"), "w")
    server = subprocess.Popen([sys.argv[1], "--database-url=" + pg_url, "--listen=127.0.0.1", "--port=0",
                               "--port-file=" + port_file, "--threads=2", "--capacity=100000", "--access-log=on",
                               f"--cors-origins=http://127.0.0.1:{a_port}"], stdout=log, stderr=subprocess.STDOUT)
    ok = False
    try:
        deadline = time.monotonic() + TIMEOUT
        port = None
        while time.monotonic() < deadline:
            if server.poll() is not None:
                fail("scangate exited: " + open(log.name).read()[-3000:])
            if os.path.exists(port_file) and open(port_file).read().endswith("\n"):
                port = int(open(port_file).read())
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
                        if r.status == 200:
                            break
                except (urllib.error.URLError, ConnectionError):
                    pass
            time.sleep(0.1)
        else:
            fail("scangate not ready: " + open(log.name).read()[-3000:])

        run = uuid.uuid4().hex
        k = {f"k{i}": f"browser-{run}-{i}" for i in range(1, 6)}
        ks = {n: json.dumps(v) for n, v in k.items()}
        server_origin = json.dumps(f"http://127.0.0.1:{port}")
        with open(os.path.join(allowed_dir, "index.html"), "w") as f:
            f.write(PAGE % {"server": server_origin, "steps": ALLOWED_STEPS % ks})
        with open(os.path.join(foreign_dir, "index.html"), "w") as f:
            f.write(PAGE % {"server": server_origin, "steps": FOREIGN_STEPS % ks})

        # Allowed origin: preflighted JSON fetches work and can read the verdicts.
        res = dump_dom(chromium, f"http://127.0.0.1:{a_port}/index.html", os.path.join(work, "profile-a"))
        print("allowed origin page:", json.dumps(res))
        if res.get("observe1", {}).get("status") != 201:
            fail("allowed origin: first observe is not 201 new: %r" % res.get("observe1"))
        if json.loads(res["observe1"]["body"]).get("verdict") != "new":
            fail("allowed origin: verdict not readable as new")
        if res.get("observe2", {}).get("status") != 200 or json.loads(res["observe2"]["body"]).get("verdict") != "duplicate":
            fail("allowed origin: second observe is not a readable duplicate: %r" % res.get("observe2"))
        if res.get("lookup", {}).get("status") != 200:
            fail("allowed origin: lookup not 200: %r" % res.get("lookup"))
        if json.loads(res["lookup"]["body"]).get("digest") != hashlib.sha256(k["k1"].encode()).hexdigest():
            fail("allowed origin: lookup digest mismatch")
        if psql_count(pg_url, k["k1"]) != 1:
            fail("allowed origin: key not in PostgreSQL")

        # Foreign origin: the CORS fetch fails in the browser; the simple no-cors requests reach scangate
        # and are refused there (403) — nothing recorded.
        res = dump_dom(chromium, f"http://127.0.0.1:{b_port}/index.html", os.path.join(work, "profile-b"))
        print("foreign origin page:", json.dumps(res))
        if "error" not in res.get("cors", {}):
            fail("foreign origin: the CORS fetch did not fail: %r" % res.get("cors"))
        for step in ("nocors_form_json", "nocors_form", "nocors_text"):
            if res.get(step, {}).get("type") != "opaque":
                fail(f"foreign origin: {step} did not complete as an opaque no-cors response: {res.get(step)!r}")
        for name in ("k2", "k3", "k4", "k5"):
            if psql_count(pg_url, k[name]) != 0:
                fail(f"foreign origin: key {name} was recorded in PostgreSQL")
            status, body = post(port, "/lookup", json.dumps({"key": k[name]}))
            if status != 404:
                fail(f"foreign origin: lookup of {name} is {status} {body}, expected 404 not-recorded")
        # The refusals were scangate's 403s (not the browser dropping the requests): the preflight and the
        # three no-cors POSTs each got one.
        refused = 0
        for line in open(log.name):
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if ev.get("event") == "access" and ev.get("path") == "/observe" and ev.get("status") == 403:
                refused += 1
        if refused < 4:
            fail(f"expected >= 4 access-log lines /observe 403 (preflight + 3 no-cors POSTs), got {refused}")
        ok = True
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            server.kill()
        allowed.shutdown()
        foreign.shutdown()
        log.close()
        if ok:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print("work dir kept: " + work)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
