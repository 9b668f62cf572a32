"""One headless Chromium with one tab, driven over the DevTools protocol: what the dashboard's
cold-start benchmark and its browser tests both measure pages with (real time, not
``--virtual-time-budget``, which skips timers and cannot time a render)."""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import time

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--remote-debugging-port=0", "--window-size=1400,1000"]


class DevToolsTab:
    """Chromium (``exe``, a fresh ``profile`` directory) on about:blank, one attached tab."""

    def __init__(self, exe: str, profile: str):
        from websockets.sync.client import connect

        self.proc = subprocess.Popen([exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self._stack = contextlib.ExitStack()
        try:
            ws_url = self._endpoint()
            threading.Thread(target=self._drain, daemon=True).start()
            self.ws = self._stack.enter_context(connect(ws_url, max_size=None, open_timeout=10))
            self.next_id = 0
            target = self.call("Target.createTarget", url="about:blank")["targetId"]
            self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        except BaseException:
            self.close()
            raise

    def _endpoint(self) -> str:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline().decode("utf-8", "replace")
            if not line and self.proc.poll() is not None:
                break
            if "DevTools listening on " in line:
                return line.split("DevTools listening on ", 1)[1].strip()
        raise RuntimeError("chromium did not open its DevTools endpoint")

    def _drain(self):
        for _ in iter(self.proc.stderr.readline, b""):
            pass  # chromium's dbus complaints: read so that the pipe never fills

    def call(self, method: str, session: bool = False, **params):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        self.ws.send(json.dumps(msg))
        while True:
            reply = json.loads(self.ws.recv(timeout=30))
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    def evaluate_json(self, expression: str):
        """The value of a JS expression that returns JSON text, decoded."""
        result = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True)
        return json.loads(result["result"]["value"])

    def close(self) -> None:
        try:
            self._stack.close()
        except Exception:  # noqa: BLE001 — the browser is stopped below either way
            pass
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
