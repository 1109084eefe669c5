"""A small driver for headless Chromium over the DevTools protocol (CDP), standard library only.

It exists to test qkv's self-contained HTML report: open the file, hover and press keys as a reader
would, and check that nothing was logged as an error and nothing was fetched from the network.

    with Browser() as b:
        b.navigate("file:///tmp/report.html")
        b.mouse_move(*b.center("#cell-3-4"))
        b.wait_for("document.querySelector('#tooltip').textContent.includes('0.25')")
        assert b.console_errors() == [] and b.requests() == ["file:///tmp/report.html"]

The protocol runs over --remote-debugging-pipe: Chromium reads NUL-terminated JSON messages from its
fd 3 and writes its own to fd 4, so there is no port, no websocket and no HTTP. Every wait has a
timeout and close() kills Chromium's whole process group, so a hung browser cannot hang a test. If
this Python process dies instead, Chromium sees its pipe close and exits by itself.

Protocol reference: https://chromedevtools.github.io/devtools-protocol/
"""

import base64
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time

# Debian's /usr/bin/chromium is a shell wrapper that adds its own flags (extensions, GPU
# rasterization, ...) from /etc/chromium.d; the binary behind it runs with exactly ours.
CHROMIUM = "/usr/lib/chromium/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
BROWSER = ""  # call(..., session=BROWSER) talks to the browser itself rather than to the page

# Input.dispatchKeyEvent takes the three names the page sees (event.key, event.code, event.keyCode);
# a key with text also produces a keypress, without which Enter does not activate a focused button.
KEYS = {  # key: (code, windowsVirtualKeyCode, text)
    "Enter": ("Enter", 13, "\r"), "Tab": ("Tab", 9, ""), "Escape": ("Escape", 27, ""),
    "Backspace": ("Backspace", 8, ""), "Delete": ("Delete", 46, ""), " ": ("Space", 32, " "),
    "ArrowLeft": ("ArrowLeft", 37, ""), "ArrowUp": ("ArrowUp", 38, ""),
    "ArrowRight": ("ArrowRight", 39, ""), "ArrowDown": ("ArrowDown", 40, ""),
    "Home": ("Home", 36, ""), "End": ("End", 35, ""),
    "PageUp": ("PageUp", 33, ""), "PageDown": ("PageDown", 34, ""),
}
SHIFT = 8  # the Shift bit of CDP's `modifiers`


class CdpError(RuntimeError):
    """A protocol error, a JavaScript exception, or Chromium gone."""


class Browser:
    """One headless Chromium with one page attached; use it as a context manager."""

    def __init__(self, window_size=(1280, 800), timeout=30.0, binary=CHROMIUM):
        """Starts Chromium and attaches to its page. `timeout` (seconds) bounds every call."""
        if not os.access(binary, os.X_OK):
            raise FileNotFoundError(f"{binary} not found: install the Debian package `chromium` "
                                    "(scripts/bootstrap does)")
        self.timeout = timeout
        self.window_size = window_size
        self._lock = threading.Condition()
        self._next_id = 0
        self._responses = {}  # id -> the response message
        self._events = []  # (sessionId, method, params), in arrival order
        self._records_from = 0  # the first event of the current page (see navigate)
        self._gone = None  # why the pipe closed, once it has
        self._profile = tempfile.mkdtemp(prefix="qkv-chromium-")
        self._stderr = open(os.path.join(self._profile, "stderr.log"), "wb")

        to_chromium_r, self._to_chromium = os.pipe()
        self._from_chromium, from_chromium_w = os.pipe()
        # Popen keeps passed fds at their numbers; a shell moves our pipe ends to fds 3 and 4
        # (os.pipe gives to_chromium_r < from_chromium_w, and both >= 3, so the moves can't clash).
        command = ["/bin/sh", "-c", f'exec "$0" "$@" 3<&{to_chromium_r} 4>&{from_chromium_w}',
                   binary, *FLAGS, f"--user-data-dir={self._profile}",
                   "--window-size={},{}".format(*window_size), "--remote-debugging-pipe",
                   "about:blank"]  # else the first tab opens the new-tab page, which goes online
        try:
            self.process = subprocess.Popen(command, pass_fds=(to_chromium_r, from_chromium_w),
                                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                            stderr=self._stderr, start_new_session=True)
        except BaseException:
            self._close_fds(to_chromium_r, from_chromium_w)
            self.close()
            raise
        self._close_fds(to_chromium_r, from_chromium_w)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        try:
            self.session = self._attach_page()
        except BaseException:
            self.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Kills Chromium and everything it started, and removes its profile. Idempotent."""
        process = getattr(self, "process", None)
        if process is not None and process.returncode is None:  # not yet reaped: pid still ours
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait(timeout=10)
        self._close_fds(self._to_chromium)
        self._to_chromium = None
        # The reader must see EOF before its fd is closed: a reused fd number would feed it
        # another pipe's messages.
        reader = getattr(self, "_reader", None)
        if reader is not None:
            reader.join(timeout=10)
        if reader is None or not reader.is_alive():
            self._close_fds(self._from_chromium)
            self._from_chromium = None
        if not self._stderr.closed:
            self._stderr.close()
        shutil.rmtree(self._profile, ignore_errors=True)

    # --- the protocol -------------------------------------------------------------------------

    def call(self, method, params=None, session=None, timeout=None):
        """Sends a command and returns its result; raises CdpError with the protocol's error.

        session: a sessionId; None is the attached page, BROWSER the browser itself.
        """
        session = self.session if session is None else session
        timeout = self.timeout if timeout is None else timeout
        with self._lock:
            self._next_id += 1
            number = self._next_id
            if self._gone:
                raise CdpError(f"{method}: {self._gone}")
        message = {"id": number, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        try:
            while data:
                data = data[os.write(self._to_chromium, data):]
        except (OSError, TypeError) as e:  # TypeError: the fd is None after close()
            raise CdpError(f"{method}: cannot write to chromium ({e})") from None
        with self._lock:
            if not self._lock.wait_for(lambda: number in self._responses or self._gone, timeout):
                raise TimeoutError(f"{method}: no answer from chromium in {timeout} s")
            if number not in self._responses:
                raise CdpError(f"{method}: {self._gone}")
            response = self._responses.pop(number)
        if "error" in response:
            error = response["error"]
            raise CdpError(f"{method}: {error.get('message')} (code {error.get('code')})"
                           + (f": {error['data']}" if "data" in error else ""))
        return response.get("result", {})

    def events(self, method=None):
        """The params of every event from the page since the last navigate(), oldest first."""
        return [p for _, m, p in self._page_events() if method in (None, m)]

    def _read(self):
        """The reader thread: splits Chromium's output at NULs and files responses and events."""
        buffer = b""
        while True:
            try:
                chunk = os.read(self._from_chromium, 1 << 20)
            except (OSError, TypeError):
                chunk = b""
            if not chunk:
                with self._lock:
                    self._gone = f"chromium exited ({self._stderr_tail()})"
                    self._lock.notify_all()
                return
            *messages, buffer = (buffer + chunk).split(b"\0")
            with self._lock:
                for raw in messages:
                    message = json.loads(raw)
                    if "id" in message:
                        self._responses[message["id"]] = message
                    else:
                        self._events.append((message.get("sessionId", BROWSER),
                                             message["method"], message.get("params", {})))
                self._lock.notify_all()

    def _stderr_tail(self, lines=3):
        """The last lines Chromium wrote to stderr, without its D-Bus complaints (no bus here)."""
        try:
            with open(self._stderr.name, errors="replace") as f:
                text = [line.strip() for line in f if "dbus" not in line and line.strip()]
        except OSError:
            return "no stderr"
        return " | ".join(text[-lines:]) or "nothing on stderr"

    def _attach_page(self):
        """Attaches to the page Chromium opens at start (or a new one) and enables the domains."""
        targets = self.call("Target.getTargets", session=BROWSER)["targetInfos"]
        pages = [t["targetId"] for t in targets if t["type"] == "page"]
        target = pages[0] if pages else self.call(
            "Target.createTarget", {"url": "about:blank"}, session=BROWSER)["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True},
                            session=BROWSER)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=session)
        # Headless Chromium draws an invisible toolbar: a 1280x800 window has a 1280x657 viewport.
        # Make the viewport (innerWidth/innerHeight, screenshots) the size asked for.
        width, height = self.window_size
        self.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height,
                  "deviceScaleFactor": 1, "mobile": False}, session=session)
        return session

    @staticmethod
    def _close_fds(*fds):
        for fd in fds:
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass

    # --- the page -----------------------------------------------------------------------------

    def navigate(self, url, timeout=None):
        """Loads url and waits for its load event. Starts a new record of events, console errors
        and requests: those of earlier pages are no longer reported."""
        timeout = self.timeout if timeout is None else timeout
        with self._lock:
            self._records_from = len(self._events)
        result = self.call("Page.navigate", {"url": url}, timeout=timeout)
        if "errorText" in result:
            raise CdpError(f"navigate({url}): {result['errorText']}")
        if "loaderId" not in result:
            return  # a same-document navigation (#fragment): no new document, no load event
        loader = result["loaderId"]

        def loaded():  # a load event after the new document (this navigation's loader) committed
            committed = False
            for _, method, p in self._page_events():
                committed |= method == "Page.frameNavigated" and p["frame"]["loaderId"] == loader
                if committed and method == "Page.loadEventFired":
                    return True
            return False

        with self._lock:
            done = self._lock.wait_for(lambda: self._gone or loaded(), timeout)
            if self._gone:
                raise CdpError(f"navigate({url}): {self._gone}")
        if not done:
            raise TimeoutError(f"navigate({url}): no load event in {timeout} s")

    def evaluate(self, expression, timeout=None):
        """The value of a JavaScript expression (promises awaited); raises CdpError if it throws."""
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True}, timeout=timeout)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            what = details.get("exception", {}).get("description") or details.get("text")
            raise CdpError(f"evaluate({expression!r}) threw: {what}")
        return result["result"].get("value")

    def wait_for(self, expression, timeout=10.0, interval=0.05):
        """Polls expression until it is truthy and returns its value; TimeoutError otherwise."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"wait_for({expression!r}): still {value!r} after {timeout} s")
            time.sleep(interval)

    def center(self, selector):
        """The viewport coordinates of the middle of the first element matching selector,
        scrolled into view first. The box is read two frames after the scroll: an input event
        sent sooner is hit-tested at the compositor's old scroll offset, and lands on whatever
        was there before (a neighbouring row, one test in three)."""
        box = self.evaluate(f"""(async () => {{
            const e = document.querySelector({json.dumps(selector)});
            if (!e) return null;
            e.scrollIntoView({{block: 'center', inline: 'nearest'}});
            for (let k = 0; k < 2; ++k) await new Promise(r => requestAnimationFrame(r));
            const r = e.getBoundingClientRect();
            return [r.left + r.width / 2, r.top + r.height / 2];
        }})()""")
        if box is None:
            raise CdpError(f"center({selector!r}): no such element")
        return tuple(box)

    # --- input: real events, as a mouse and a keyboard produce them ----------------------------

    def mouse_move(self, x, y):
        """Moves the mouse to viewport (x, y): fires mousemove/over/enter, and :hover applies."""
        self.call("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})

    def click(self, x, y, button="left"):
        """Moves to (x, y), then presses and releases the button there."""
        self.mouse_move(x, y)
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent",
                      {"type": kind, "x": x, "y": y, "button": button, "clickCount": 1})

    def key(self, key, shift=False):
        """Presses and releases one key, named as KeyboardEvent.key names it: 'Tab', 'Enter',
        'ArrowDown', ' ', 'a', ... (see KEYS). Goes to the focused element."""
        if key in KEYS:
            code, virtual, text = KEYS[key]
        elif len(key) == 1 and key.isalnum():
            code = ("Digit" if key.isdigit() else "Key") + key.upper()
            key = key.upper() if shift else key
            virtual, text = ord(key.upper()), key
        else:
            raise ValueError(f"key({key!r}): not one of {sorted(KEYS)} or a letter or digit")
        event = {"key": key, "code": code, "windowsVirtualKeyCode": virtual,
                 "modifiers": SHIFT if shift else 0}
        self.call("Input.dispatchKeyEvent",
                  {**event, "type": "keyDown" if text else "rawKeyDown", "text": text})
        self.call("Input.dispatchKeyEvent", {**event, "type": "keyUp"})

    # --- what the page did --------------------------------------------------------------------

    def screenshot(self, path):
        """Writes the viewport as a PNG file and returns path."""
        data = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        return path

    def console_errors(self):
        """One line per error of the current page: console.error/console.assert calls, uncaught
        exceptions (also from promises), and errors the browser logged (e.g. a failed load)."""
        errors = []
        for _, method, p in self._page_events():
            if method == "Runtime.consoleAPICalled" and p["type"] in ("error", "assert"):
                args = " ".join(str(a.get("value", a.get("description", a.get("type"))))
                                for a in p["args"])
                errors.append(f"console.{p['type']}: {args}")
            elif method == "Runtime.exceptionThrown":
                d = p["exceptionDetails"]
                what = (d.get("exception", {}).get("description") or d["text"]).splitlines()[0]
                where = f"{d.get('url', '?')}:{d['lineNumber'] + 1}"
                errors.append(f"uncaught: {what} ({where})")
            elif method == "Log.entryAdded" and p["entry"]["level"] == "error":
                e = p["entry"]
                where = f" ({e['url']})" if e.get("url") else ""
                errors.append(f"{e['source']}: {e['text']}{where}")
        return errors

    def requests(self):
        """The URL of every request the current page made (the page's own included), in order.
        Chromium reports most data: URLs as requests too."""
        return [p["request"]["url"] for _, method, p in self._page_events()
                if method == "Network.requestWillBeSent"]

    def _page_events(self):
        with self._lock:
            return [e for e in self._events[self._records_from:] if e[0] == self.session]
