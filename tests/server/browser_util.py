# SPDX-License-Identifier: MIT
"""A headless Chromium driven over the Chrome DevTools Protocol, with Python's standard library only.

The browser is started with --remote-debugging-pipe, which speaks the protocol as NUL-terminated
JSON messages on its file descriptors 3 (commands in) and 4 (replies and events out), so no
websocket client and no chromedriver is needed. One page is opened and driven through
Runtime.evaluate and Input events; exceptions the page throws and security errors (a
Content-Security-Policy violation) are collected, so a test can insist there were none."""

import base64
import fcntl
import json
import os
import select
import shutil
import signal
import tempfile
import time



def check(condition, message):
    """Fails the browser test with `message` unless `condition` holds."""
    if not condition:
        raise AssertionError(message)


def js(value):
    """`value` as a JavaScript literal, for expressions evaluated in the page."""
    return json.dumps(value)

def find_chromium():
    """The browser to run: $MB_CHROMIUM, else Debian's chromium (or another Chromium on PATH)."""
    for name in (os.environ.get("MB_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


class BrowserError(Exception):
    pass


def _above_stdio(fd):
    """The descriptor moved to 10 or above, so placing the pipes at 3 and 4 in the child cannot
    overwrite one with the other."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved


class Browser:
    """Headless Chromium with a temporary profile; use as a context manager."""

    def __init__(self, executable):
        self.profile = tempfile.mkdtemp(prefix="mambacpp_chromium_")
        self.log_path = os.path.join(self.profile, "browser_stderr.txt")
        command_read, self._commands = map(_above_stdio, os.pipe())
        self._replies, reply_write = map(_above_stdio, os.pipe())
        log = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        null = os.open(os.devnull, os.O_RDWR)
        arguments = [executable, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-sync",
                     "--disable-background-networking", "--disable-component-update", "--mute-audio",
                     "--remote-debugging-pipe", "--user-data-dir=" + self.profile, "about:blank"]
        # Its own process group, so closing it ends the renderer and helper processes too.
        self.pid = os.posix_spawn(executable, arguments, os.environ, setpgroup=0, file_actions=[
            (os.POSIX_SPAWN_DUP2, null, 0), (os.POSIX_SPAWN_DUP2, null, 1), (os.POSIX_SPAWN_DUP2, log, 2),
            (os.POSIX_SPAWN_DUP2, command_read, 3), (os.POSIX_SPAWN_DUP2, reply_write, 4)])
        for fd in (command_read, reply_write, log, null):
            os.close(fd)
        self._buffer = b""
        self._next_id = 0
        self.session = None
        self.problems = []  # exceptions thrown by the page and security (CSP) errors

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def stderr(self):
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def _message(self, deadline):
        while b"\0" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self._replies], [], [], remaining)[0]:
                raise BrowserError("the browser did not answer in time")
            data = os.read(self._replies, 1 << 16)
            if not data:
                raise BrowserError("the browser exited: " + self.stderr()[-2000:])
            self._buffer += data
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def _event(self, message):
        method, params = message.get("method"), message.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.problems.append("exception: " + details.get("exception", {}).get("description",
                                                                                details.get("text", "")))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("source") == "security":
            self.problems.append("security: " + params["entry"].get("text", ""))

    def call(self, method, params=None, session="page", timeout=30):
        """One protocol command; returns its result. session "page" sends it to the opened page."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session == "page":
            session = self.session
        if session:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self._commands, data):]
        deadline = time.monotonic() + timeout
        while True:
            reply = self._message(deadline)
            if reply.get("id") != self._next_id:
                self._event(reply)
                continue
            if "error" in reply:
                raise BrowserError(f"{method}: {reply['error']}")
            return reply["result"]

    def open(self, url, timeout=30):
        """Opens url in a new page and waits until it has loaded."""
        target = self.call("Target.createTarget", {"url": "about:blank"}, session=None)["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True},
                                 session=None)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(domain + ".enable")
        self.call("Page.navigate", {"url": url})
        self.wait_for("document.readyState === 'complete' && location.href === " + json.dumps(url),
                      "the page to load", timeout)

    def evaluate(self, expression, timeout=30):
        """The value of a JavaScript expression in the page (promises are awaited)."""
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True}, timeout=timeout)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression, what, timeout=30):
        """Polls a JavaScript expression until it is truthy; returns its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout} s waiting for {what} ({expression}); page text: "
                                     + str(self.evaluate("document.body ? document.body.innerText : ''"))[:1500])
            time.sleep(0.02)

    def reload(self, timeout=30):
        """Reloads the page and waits until the new document has loaded."""
        self.evaluate("window.__mbOldDocument = true")
        self.call("Page.reload", {"ignoreCache": True})
        self.wait_for("!window.__mbOldDocument && document.readyState === 'complete'", "the page to reload", timeout)

    def set_color_scheme(self, scheme):
        """Emulates the system's prefers-color-scheme ("light" or "dark")."""
        self.call("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": scheme}]})

    def screenshot(self, path, width=1000, height=720):
        """Saves a PNG of the page at the given window size."""
        self.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1,
                                                         "mobile": False})
        with open(path, "wb") as f:
            f.write(base64.b64decode(self.call("Page.captureScreenshot", {"format": "png"})["data"]))

    def type_text(self, text):
        """Types into the focused element, as an input method would."""
        self.call("Input.insertText", {"text": text})

    def press_enter(self):
        for kind in ("keyDown", "keyUp"):
            self.call("Input.dispatchKeyEvent", {"type": kind, "key": "Enter", "code": "Enter",
                                                 "windowsVirtualKeyCode": 13, "text": "\r"})

    def close(self):
        try:
            self.call("Browser.close", session=None, timeout=5)
        except (BrowserError, OSError):
            pass
        deadline = time.monotonic() + 5
        while os.waitpid(self.pid, os.WNOHANG) == (0, 0) and time.monotonic() < deadline:
            time.sleep(0.05)
        try:
            os.killpg(self.pid, signal.SIGKILL)  # anything of its group still there
        except ProcessLookupError:
            pass
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass
        os.close(self._commands)
        os.close(self._replies)
        shutil.rmtree(self.profile, ignore_errors=True)
