"""A real headless Chromium (Debian's package), driven over the DevTools protocol on loopback, that
opens a page as a person would and tells what the browser saw: every request it made, every console
message and uncaught error, the result of a script run in the page, and a screenshot."""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import websocket

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class PageVisit:
    requests: list[str] = field(default_factory=list)
    console: list[dict] = field(default_factory=list)     # {"level", "text"}: console calls, logs, exceptions
    result: object = None
    screenshot: bytes = b""


class Browser:
    def __init__(self, width: int = 1280, height: int = 900):
        self.profile = tempfile.mkdtemp(prefix="loadstage-chromium-")
        self.process = subprocess.Popen(
            [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--no-default-browser-check", "--disable-extensions", "--disable-sync", "--disable-component-update",
             "--disable-background-networking", "--disable-default-apps", "--mute-audio",
             # nothing may leave the machine: no name resolves, and any proxied request goes nowhere
             "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
             f"--window-size={width},{height}", "--remote-debugging-address=127.0.0.1",
             "--remote-debugging-port=0", f"--user-data-dir={self.profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            env={**os.environ, "TMPDIR": self.profile})    # its own temporary files go with its profile
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError("chromium did not start its DevTools endpoint")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as answer:
            page = next(t for t in json.load(answer) if t["type"] == "page")
        self.socket = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=30, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict] = []

    def call(self, method: str, **params) -> dict:
        self.next_id += 1
        self.socket.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)

    def wait_for_event(self, method: str, timeout: float = 30) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            found = next((e for e in self.events if e["method"] == method), None)
            if found:
                return found
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {method} within {timeout} s")
            self.socket.settimeout(max(0.1, deadline - time.monotonic()))
            message = json.loads(self.socket.recv())
            if "method" in message:
                self.events.append(message)

    def visit(self, url: str, script: str) -> PageVisit:
        """Loads the page, runs `script` (an expression) in it and takes a full-page screenshot."""
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable")
        self.events.clear()
        self.call("Page.navigate", url=url)
        self.wait_for_event("Page.loadEventFired")
        result = self.call("Runtime.evaluate", expression=script, returnByValue=True)
        metrics = self.call("Page.getLayoutMetrics")["cssContentSize"]
        shot = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                         clip={"x": 0, "y": 0, "width": metrics["width"], "height": metrics["height"], "scale": 1})
        visit = PageVisit(result=result.get("result", {}).get("value"), screenshot=base64.b64decode(shot["data"]))
        for event in self.events:
            params = event["params"]
            if event["method"] == "Network.requestWillBeSent":
                visit.requests.append(params["request"]["url"])
            elif event["method"] == "Runtime.consoleAPICalled":
                visit.console.append({"level": params["type"],
                                      "text": " ".join(str(a.get("value", a.get("description", "")))
                                                       for a in params["args"])})
            elif event["method"] == "Runtime.exceptionThrown":
                visit.console.append({"level": "error", "text": params["exceptionDetails"].get("text", "")})
            elif event["method"] == "Log.entryAdded":
                visit.console.append({"level": params["entry"]["level"], "text": params["entry"]["text"]})
        return visit

    def close(self) -> None:
        if getattr(self, "socket", None) is not None:
            self.socket.close()
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)   # its own group: the browser and its helpers
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        shutil.rmtree(self.profile, ignore_errors=True)
