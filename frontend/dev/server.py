"""Dev harness: serve the built bundle and mock JSON routes the way TensorBoard does, CSP included.

    python frontend/dev/server.py [--port 6007] [--prefix /tb] [--scenario default|empty|runs-error|stuck]

Pages (with --prefix P, everything moves under P):
  P/                                       an outer page that iframes the plugin, like TensorBoard's dashboard
  P/data/plugin_entry.html?name=gpuinsight  TensorBoard's plugin entry page, byte for byte the same markup
  P/data/plugin/gpuinsight/index.js        tb_gpuinsight/static/index.js
  P/data/plugin/gpuinsight/<route>         mock JSON routes (mock.py)
Not shipped: frontend/ is not package data.
"""
from __future__ import annotations

import argparse
import base64
import hashlib
import json
import sys
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Dict, Optional, Tuple
from urllib.parse import parse_qsl, urlsplit

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from mock import Mock, check_selection  # noqa: E402

BUNDLE = HERE.parent.parent / "tb_gpuinsight" / "static" / "index.js"
PLUGIN = "gpuinsight"

# TensorBoard's plugin-entry page (tensorboard/backend/application.py, _serve_plugin_entry).
SCRIPT = 'import("./index.js").then((m) => void m.render());'
ENTRY_HTML = textwrap.dedent(
    """
    <!DOCTYPE html>
    <head><base href="plugin/{name}/" /></head>
    <body><script type="module">{script}</script></body>
    """
).format(name=PLUGIN, script=SCRIPT)
SCRIPT_SHA = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()

# TensorBoard's HTML CSP, minus its 'unsafe-eval' and gstatic allowances (stricter, so the bundle must not need them).
CSP = "; ".join([
    "default-src 'self'",
    "font-src 'self' data:",
    "frame-src 'self'",
    "img-src 'self' data: blob:",
    "object-src 'none'",
    "style-src 'self' 'unsafe-inline'",
    "connect-src 'self'",
    f"script-src 'self' 'sha256-{SCRIPT_SHA}'",
])


def make_handler(mock: Mock, prefix: str, scenario: str):
    class Handler(BaseHTTPRequestHandler):
        server_version = "gpuinsight-dev"

        def log_message(self, fmt, *args):  # quiet; set GI_DEV_LOG=1 to see requests
            if "GI_DEV_LOG" in __import__("os").environ:
                sys.stderr.write("%s\n" % (fmt % args))

        def _send(self, code: int, body: bytes, ctype: str, html: bool = False) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Cache-Control", "no-cache, must-revalidate")
            if html:
                self.send_header("Content-Security-Policy", CSP)
            self.end_headers()
            self.wfile.write(body)

        def _json(self, code: int, obj) -> None:
            self._send(code, json.dumps(obj).encode(), "application/json")

        def do_GET(self) -> None:  # noqa: N802
            url = urlsplit(self.path)
            path = url.path
            q: Dict[str, str] = dict(parse_qsl(url.query, keep_blank_values=True))
            if not path.startswith(prefix + "/"):
                return self._send(404, b"not found", "text/plain")
            path = path[len(prefix):]
            if path in ("/", "/index.html"):
                return self._send(200, (HERE / "index.html").read_bytes(), "text/html; charset=utf-8", html=True)
            if path == "/data/plugin_entry.html":
                if q.get("name") != PLUGIN:
                    return self._send(404, b"no such plugin", "text/plain")
                return self._send(200, ENTRY_HTML.encode(), "text/html; charset=utf-8", html=True)
            base = f"/data/plugin/{PLUGIN}/"
            if not path.startswith(base):
                return self._send(404, b"not found", "text/plain")
            route = path[len(base):]
            if route == "index.js":
                return self._send(200, BUNDLE.read_bytes(), "text/javascript; charset=utf-8")
            try:
                result = self.route(route, q)
            except KeyError as err:
                return self._json(404, {"error": str(err.args[0]) if err.args else "not found"})
            except ValueError as err:
                return self._json(400, {"error": str(err)})
            if result is None:
                return self._json(404, {"error": f"no route {route!r}"})
            code, obj = result
            if isinstance(obj, bytes):
                return self._send(code, obj, "application/gzip")
            return self._json(code, obj)

        def route(self, route: str, q: Dict[str, str]) -> Optional[Tuple[int, object]]:
            if route == "_restart_loading":  # dev only
                mock.restart_loading()
                return 200, {"ok": True}
            if route == "runs":
                if scenario == "runs-error":
                    return 500, {"error": "logdir scan failed: permission denied: /data/logs"}
                return 200, mock.runs()
            if route not in ("devices", "kernels", "roofline", "kernel_ops", "trace"):
                return None
            problem = check_selection(mock, q)
            if problem:
                raise ValueError(problem)
            if route == "devices":
                return 200, {"devices": mock.devices_with_summary(q)}
            if route == "kernels":
                return 200, mock.kernels(q)
            if route == "roofline":
                return 200, mock.roofline(q)
            if route == "kernel_ops":
                return 200, mock.kernel_ops(q)
            if route == "trace":
                import gzip
                return 200, gzip.compress(b'{"traceEvents": []}', mtime=0)
            return None

    return Handler


def serve(port: int = 0, prefix: str = "", scenario: str = "default") -> Tuple[ThreadingHTTPServer, str]:
    """Start the harness in a background thread; returns the server and its base URL (ending in '/')."""
    prefix = prefix.rstrip("/")
    httpd = ThreadingHTTPServer(("127.0.0.1", port), make_handler(Mock(scenario), prefix, scenario))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}{prefix}/"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=6007)
    parser.add_argument("--prefix", default="", help="like TensorBoard's --path_prefix, e.g. /tb")
    parser.add_argument("--scenario", default="default", choices=["default", "empty", "runs-error", "stuck"])
    args = parser.parse_args()
    httpd, url = serve(args.port, args.prefix, args.scenario)
    print(f"serving {url} (plugin page: {url}data/plugin_entry.html?name={PLUGIN})", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        httpd.shutdown()


if __name__ == "__main__":
    main()
