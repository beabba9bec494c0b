"""What the outside checkers of the services' writes share (conc_check.py for lingo,
news_conc_check.py for news): the disagreements and counters they report, HS256 tokens as the dev
stack signs them, and plain HTTP requests to one replica. A replica's URL includes its service's
prefix (`http://127.0.0.1:19750/v1/lingo`); paths are relative to it."""

import base64
import hashlib
import hmac
import http.client
import json
import socket
import struct
import sys
import threading
import time
import urllib.parse

problems = []
counts = {}
_lock = threading.Lock()

# What a checker may loosen for its mode (conc_check.py's `--crash`: PostgreSQL goes down, so
# 503 `database_unavailable` is expected, and a replica may be down for a while).
allowed_503 = {"overloaded", "timeout"}
request_timeout_secs = 60  # the client's wait for one answer
patience_secs = 8  # how long `get_ok` retries a read that gets no 200

# No answer at all: connection refused or reset, the client's timeout, an answer cut short.
NO_ANSWER = (OSError, http.client.HTTPException)


def problem(msg):
    """Records a disagreement with the contract (the run then exits 1)."""
    with _lock:
        problems.append(msg)
        print("DISAGREEMENT:", msg, file=sys.stderr, flush=True)


def count(name, n=1):
    with _lock:
        counts[name] = counts.get(name, 0) + n


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def token(secret, sub, scope=None):
    """An HS256 token for `sub`, valid for two hours, as the dev stack's issuer and audience."""
    now = int(time.time())
    claims = {"sub": sub, "iss": "lingo-news-dev", "aud": "lingo-news", "iat": now, "exp": now + 7200}
    if scope:
        claims["scope"] = scope
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = b64url(json.dumps(claims).encode())
    signature = hmac.new(secret.encode(), f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{b64url(signature)}"


def check_5xx(method, path, status, payload, raw):
    """A 500 is always wrong; a 503 only as `overloaded` or `timeout` (docs/conventions.md,
    "Deadlines and overload"), or as another code the checker allows (`allowed_503`)."""
    if status < 500:
        return
    code = payload.get("code") if isinstance(payload, dict) else None
    count(f"{method} {status} {code}")
    if status != 503 or code not in allowed_503:
        problem(f"{method} {path} answered {status} {code}: {raw[:300]!r}")


def call(url, method, path, tok=None, body=None, key=None):
    """One request on a fresh connection (a POST is never resent by a pooled connection);
    (status, headers with lower-case names, JSON payload or None)."""
    parsed = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=request_timeout_secs)
    headers = {}
    if tok:
        headers["Authorization"] = f"Bearer {tok}"
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    if key:
        headers["Idempotency-Key"] = key
    try:
        conn.request(method, parsed.path + path, data, headers)
        resp = conn.getresponse()
        raw = resp.read()
        hdrs = {k.lower(): v for k, v in resp.getheaders()}
        try:
            payload = json.loads(raw) if raw else None
        except ValueError:
            payload = None
        check_5xx(method, path, resp.status, payload, raw)
        return resp.status, hdrs, payload
    finally:
        conn.close()


def try_call(url, method, path, tok=None, body=None, key=None):
    """`call`, or (None, {}, None) when no answer came (`NO_ANSWER`): the outcome is unknown."""
    try:
        return call(url, method, path, tok, body, key)
    except NO_ANSWER as error:
        count(f"{method} no answer ({type(error).__name__})")
        return None, {}, None


def drop(url, method, path, tok, body=None, key=None, delay=0.0, mid_body=False):
    """Sends the request (only half its body with `mid_body`) and resets the connection after
    `delay` without reading the answer."""
    parsed = urllib.parse.urlparse(url)
    data = json.dumps(body).encode() if body is not None else b""
    head = (f"{method} {parsed.path}{path} HTTP/1.1\r\nHost: {parsed.hostname}\r\n"
            f"Authorization: Bearer {tok}\r\nContent-Length: {len(data)}\r\n"
            + ("Content-Type: application/json\r\n" if body is not None else "")
            + (f"Idempotency-Key: {key}\r\n" if key else "") + "\r\n").encode()
    sock = socket.create_connection((parsed.hostname, parsed.port))
    try:
        sock.sendall(head + (data[: len(data) // 2] if mid_body else data))
        time.sleep(delay)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    finally:
        sock.close()


def get_ok(url, path, tok=None):
    """The 200 answer of a GET, retried for `patience_secs` while the service answers 503 or
    gives no answer (a replica restarting)."""
    give_up = time.time() + patience_secs
    while True:
        status, _, body = try_call(url, "GET", path, tok)
        if status == 200:
            return body
        if status not in (None, 503) or time.time() > give_up:
            raise RuntimeError(f"GET {path}: {status} {body}")
        time.sleep(0.2)


def all_pages(url, path, tok=None, limit=100):
    """Every item of a list, read page by page by `next_cursor`."""
    items, cursor = [], None
    while True:
        sep = "&" if "?" in path else "?"
        page = get_ok(url, f"{path}{sep}limit={limit}" + (f"&cursor={urllib.parse.quote(cursor)}" if cursor else ""), tok)
        items.extend(page["data"])
        cursor = page.get("next_cursor")
        if not cursor:
            return items
