"""A probe report in Python: its behaviour is chosen by the job parameter
`probe`, to see what the host does with a componentize-py component.

- `escape`: tries to reach outside the sandbox (a file, the environment,
  the root directory, a TCP connection, an HTTP request, plus the clock and
  randomness) and reports in its summary, as JSON, what each attempt got:
  `{"error": "<exception type>", "message": ...}` or `{"ok": <value>}`.
  Then it returns normally.
- `raise`: raises `ValueError("bad row 7: amount is negative")`, uncaught.
- `invalid`: raises `jobhost.InvalidData("region is missing")`.
- `raise-chained`: raises `RuntimeError("could not total the window")` from
  a `KeyError('amount')` (two tracebacks on stderr).
- `raise-multiline`: raises `ValueError("first line\\nsecond line")`.
- `raise-custom`: raises `probe_errors.AmountError("amount is negative")`,
  a class from another module (printed with its module name).
- `traceback`: returns, as its summary, the exact text CPython's default
  excepthook writes for `raise` (from `traceback.format_exception`), chained
  case included, as a JSON list of strings.
- `exit`: calls `sys.exit(3)`.
- `print`: prints a line to stdout and one to stderr, then returns `ok`.
- `memory`: allocates until the memory limit stops it.
- `loop`: loops until the time limit stops it.
- `describe-raise`: runs as `ok`, then `describe` raises `RuntimeError`.
- `decode`: reads every batch (the SDK validates and decodes each column)
  and returns `{"rows": n, "batches": m}`, to time decoding alone.
- `raw`: the same through the generated bindings, without the SDK's
  decoding (what componentize-py's lifting of the WIT lists costs alone).
- `host-errors`: asks the host for what it refuses (a send to an
  undeclared destination, with a content type that is none, of a body past
  the default 4 MiB limit, past the default 100 messages; a second `open`
  while one is open) and returns, as JSON, the error each became in the
  SDK: `{"error": <class>, "case": <send-error case>, "message": ...}`.
- `ok` (or no `probe`): returns the summary `probe ok`.

Build: see README.md beside this file.
"""

import builtins
import encodings.idna  # noqa: F401 - socket and urllib encode host names with it, lazily
import json
import os
import random
import sys
import time
import traceback

import jobhost
import probe_errors

# componentize-py resolves imports only while it builds the component, so
# everything a probe may touch is imported here; a module the bundled
# CPython lacks is reported as such.
try:
    import socket
except ImportError as e:  # pragma: no cover
    socket = None
    SOCKET_IMPORT = f"{type(e).__name__}: {e}"
try:
    import urllib.error
    import urllib.request
except ImportError as e:  # pragma: no cover
    urllib = None
    URLLIB_IMPORT = f"{type(e).__name__}: {e}"


def attempt(action):
    """What `action()` got: its value (shortened) or its exception."""
    try:
        value = action()
    except BaseException as e:  # a probe wants to see everything
        return {"error": f"{type(e).__module__}.{type(e).__qualname__}", "message": str(e)[:300]}
    return {"ok": value if isinstance(value, (int, float, bool, type(None))) else repr(value)[:300]}


def read_passwd():
    with builtins.open("/etc/passwd", encoding="utf-8") as f:
        return f.read(200)


def connect():
    if socket is None:
        raise ImportError(SOCKET_IMPORT)
    with socket.create_connection(("127.0.0.1", 5432), timeout=2) as s:
        return s.getpeername()


def connect_raw():
    if socket is None:
        raise ImportError(SOCKET_IMPORT)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.settimeout(2)
        s.connect(("127.0.0.1", 5432))
        return s.getpeername()
    finally:
        s.close()


def fetch_url():
    if urllib is None:
        raise ImportError(URLLIB_IMPORT)
    with urllib.request.urlopen("http://127.0.0.1:8080/", timeout=2) as r:
        return r.status


def refused(action):
    """The SDK error `action()` raised, as a JSON-ready dict."""
    try:
        action()
    except jobhost.Error as e:
        return {"error": type(e).__name__, "case": getattr(e, "case", None), "message": str(e)}
    return {"ok": None}


def too_many(ctx):
    for _ in range(100):
        jobhost.send(ctx.destinations[0], b"x", "text/plain")
    jobhost.send(ctx.destinations[0], b"x", "text/plain")


def open_twice():
    with jobhost.open():
        jobhost.open()


def host_errors(ctx) -> str:
    results = {
        "unknown-destination": refused(lambda: jobhost.send("nowhere", b"x", "text/plain")),
        "invalid-content-type": refused(lambda: jobhost.send(ctx.destinations[0], b"x", "plain")),
        "too-large": refused(lambda: jobhost.send(ctx.destinations[0], bytes(4 * 1024 * 1024 + 1),
                                                  "application/octet-stream")),
        "too-many-messages": refused(lambda: too_many(ctx)),
        "open-twice": refused(open_twice),
    }
    return json.dumps(results, sort_keys=True)


def escape() -> str:
    results = {
        "open('/etc/passwd')": attempt(read_passwd),
        "os.environ": attempt(lambda: dict(os.environ)),
        "os.listdir('/')": attempt(lambda: os.listdir("/")),
        "os.getcwd()": attempt(os.getcwd),
        "socket.create_connection(('127.0.0.1', 5432))": attempt(connect),
        "socket.socket().connect(('127.0.0.1', 5432))": attempt(connect_raw),
        "urllib.request.urlopen('http://127.0.0.1:8080/')": attempt(fetch_url),
        "sys.argv": attempt(lambda: list(sys.argv)),
        "time.time()": attempt(time.time),
        "random.random()": attempt(random.random),
    }
    return json.dumps(results, sort_keys=True)


class Probe(jobhost.Report):
    """The probe."""

    def __init__(self):
        self.mode = "ok"

    def run(self, ctx):
        self.mode = ctx.param("probe") or "ok"
        if self.mode == "escape":
            return jobhost.Output(escape())
        if self.mode == "host-errors":
            return jobhost.Output(host_errors(ctx))
        if self.mode == "decode":
            rows = batches = 0
            with jobhost.open() as source:
                for batch in source.batches():
                    rows += len(batch)
                    batches += 1
            return jobhost.Output(json.dumps({"rows": rows, "batches": batches}))
        if self.mode == "raw":
            rows = batches = 0
            host = jobhost._host.current()
            cursor = host.open()
            while True:
                batch = cursor.next_batch(jobhost.BATCH_ROWS)
                if batch is None:
                    break
                rows += batch.rows
                batches += 1
            host.close(cursor)
            return jobhost.Output(json.dumps({"rows": rows, "batches": batches}))
        if self.mode == "raise":
            raise ValueError("bad row 7: amount is negative")
        if self.mode == "traceback":
            texts = []
            for action in (lambda: self._raise_plain(), lambda: self._raise_chained()):
                try:
                    action()
                except Exception as e:
                    texts.append("".join(traceback.format_exception(e)))
            return jobhost.Output(json.dumps(texts))
        if self.mode == "raise-chained":
            try:
                {}["amount"]
            except KeyError as e:
                raise RuntimeError("could not total the window") from e
        if self.mode == "raise-multiline":
            raise ValueError("first line\nsecond line")
        if self.mode == "raise-custom":
            raise probe_errors.AmountError("amount is negative")
        if self.mode == "exit":
            sys.exit(3)
        if self.mode == "print":
            print("to stdout from the probe")
            print("to stderr from the probe", file=sys.stderr)
            return jobhost.Output("probe ok")
        if self.mode == "memory":
            hoard = []
            while True:
                hoard.append(bytearray(1 << 20))
        if self.mode == "loop":
            n = 0
            while True:
                n += 1
        if self.mode == "invalid":
            raise jobhost.InvalidData("region is missing")
        if self.mode in ("ok", "describe-raise"):
            return jobhost.Output("probe ok")
        raise jobhost.ReportError(f"unknown probe `{self.mode}`")

    @staticmethod
    def _raise_plain():
        raise ValueError("bad row 7: amount is negative")

    @staticmethod
    def _raise_chained():
        try:
            {}["amount"]
        except KeyError as e:
            raise RuntimeError("could not total the window") from e

    def describe(self, ctx, output):
        if self.mode == "describe-raise":
            raise RuntimeError("describe failed on purpose")
        return None


WitWorld = jobhost.export(Probe)
