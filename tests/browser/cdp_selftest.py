#!/usr/bin/env python3
"""Self-test of tests/browser/cdp.py, the headless Chromium driver that tests the HTML report.

Writes small pages to a temporary directory and checks each thing the report's tests rely on, on a
page where it must report nothing and on one where it must report something: console errors and
uncaught exceptions, network requests (the machine may be offline: the request is still seen),
hover through real mouse events, keys reaching the focused element, screenshot size, errors raised
by evaluate/wait_for/call/navigate, and Chromium killed even when the test fails inside `with`.

Usage: python3 tests/browser/cdp_selftest.py [--keep DIR]
Needs only the standard library and Debian's chromium. Prints one line per check and
'N passed, M failed'; exits 0 only if all passed.
"""

import argparse
import os
import pathlib
import signal
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cdp import Browser, CdpError  # noqa: E402

WATCHDOG_S = 100  # below the ctest TIMEOUT, so a hang ends here, with Chromium killed by `with`


class Watchdog(BaseException):
    """Raised by SIGALRM; not an Exception, so no check mistakes it for its own failure."""

PAGES = {
    "clean.html": "<!doctype html><title>clean</title><p>attention</p>"
                  "<script>console.log('not an error')</script>",
    "errors.html": "<!doctype html><script>console.error('x')</script>"
                   "<script>throw new Error('boom')</script>",
    "image.html": '<!doctype html><img src="http://example.invalid/x.png">',
    "hover.html": "<!doctype html><div id=target onmouseenter=\"this.textContent='hovered'\" "
                  "style='position:absolute; left:300px; top:200px; width:160px; height:80px'>"
                  "idle</div>",
    "keys.html": "<!doctype html><button id=b onclick=\"this.textContent='pressed'\" "
                 "onkeydown='keys.push(event.key)'>press</button>"
                 "<button id=c onclick=\"this.textContent='clicked'\">click</button>"
                 "<script>var keys = []</script>",
}


def png_size(path):
    """(width, height) from a PNG's IHDR chunk, which must come first."""
    data = pathlib.Path(path).read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        raise AssertionError(f"{path} is not a PNG (starts {data[:16]!r})")
    return struct.unpack(">II", data[16:24])


def living_processes(group):
    """The processes of a process group that are not zombies (killed children of Chromium stay
    zombies in its group until init reaps them)."""
    alive = []
    for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # after "pid (command)"
        except OSError:  # gone meanwhile
            continue
        if int(fields[2]) == group and fields[0] != "Z":
            alive.append(int(stat.parent.name))
    return alive


def expect_equal(what, got, expected):
    if got != expected:
        raise AssertionError(f"{what}: got {got!r}, expected {expected!r}")


def expect_raises(what, error, action):
    try:
        action()
    except error as e:
        return str(e)
    raise AssertionError(f"{what}: no {error.__name__} raised")


# --- the checks: each gets the browser and a function that gives a page's file:// URL ----------


def check_clean_page(b, url):
    b.navigate(url("clean.html"))
    expect_equal("console errors", b.console_errors(), [])
    expect_equal("requests", b.requests(), [url("clean.html")])
    b.navigate(url("clean.html") + "#part")  # same document: returns without a load event
    expect_equal("location.hash", b.evaluate("location.hash"), "#part")


def check_errors_detected(b, url):
    b.navigate(url("errors.html"))
    expect_equal("console errors", b.console_errors(),
                 ["console.error: x", f"uncaught: Error: boom ({url('errors.html')}:1)"])


def check_request_detected(b, url):
    b.navigate(url("image.html"))
    expect_equal("requests", b.requests(), [url("image.html"), "http://example.invalid/x.png"])
    # Offline or not, example.invalid never resolves: the browser logs the failed load.
    errors = b.console_errors()
    if len(errors) != 1 or "http://example.invalid/x.png" not in errors[0]:
        raise AssertionError(f"console errors: expected the failed image load, got {errors!r}")


def check_hover(b, url):
    b.navigate(url("hover.html"))
    expect_equal("text before the mouse moves", b.evaluate("target.textContent"), "idle")
    x, y = b.center("#target")
    expect_equal("center of #target", (x, y), (380, 240))
    b.mouse_move(x, y)
    b.wait_for("target.textContent == 'hovered' && target.matches(':hover')", timeout=5)


def check_keys_and_click(b, url):
    b.navigate(url("keys.html"))
    b.key("Tab")
    expect_equal("focus after Tab", b.evaluate("document.activeElement.id"), "b")
    b.key("ArrowDown")
    b.key("Enter")
    expect_equal("keys seen by the focused button", b.evaluate("keys"), ["ArrowDown", "Enter"])
    expect_equal("button text after Enter", b.evaluate("b.textContent"), "pressed")
    b.click(*b.center("#c"))
    expect_equal("button text after click", b.evaluate("c.textContent"), "clicked")


def check_screenshot(b, url, out):
    b.navigate(url("clean.html"))
    path = b.screenshot(os.path.join(out, "clean.png"))
    expect_equal("screenshot size", png_size(path), b.window_size)


def check_errors_raised(b, url):
    message = expect_raises("evaluate of a throw", CdpError,
                            lambda: b.evaluate("(() => { throw new Error('thrown') })()"))
    assert "thrown" in message, message
    expect_raises("wait_for of a false expression", TimeoutError,
                  lambda: b.wait_for("1 + 1 == 3", timeout=0.3))
    message = expect_raises("an unknown method", CdpError, lambda: b.call("Page.noSuchMethod"))
    assert "wasn't found" in message, message
    expect_raises("navigate to a missing file", CdpError, lambda: b.navigate(url("missing.html")))
    expect_equal("evaluate after the errors", b.evaluate("6 * 7"), 42)


def check_killed_on_failure(out):
    """A failure inside `with` still kills Chromium (process group and all) and removes its
    profile; window_size sets the viewport."""
    try:
        with Browser(window_size=(640, 480)) as b:
            pid, profile = b.process.pid, b._profile
            expect_equal("small screenshot",
                         png_size(b.screenshot(os.path.join(out, "small.png"))), (640, 480))
            raise KeyError("a failing test")
    except KeyError:
        pass
    alive = living_processes(pid)
    if alive:
        raise AssertionError(f"chromium's processes {alive} are still alive after close()")
    if os.path.exists(profile):
        raise AssertionError(f"the profile {profile} is still there after close()")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", help="write the pages and screenshots here and keep them")
    args = parser.parse_args()

    def watchdog(signum, frame):
        raise Watchdog(f"cdp_selftest: still running after {WATCHDOG_S} s")

    signal.signal(signal.SIGALRM, watchdog)
    signal.alarm(WATCHDOG_S)
    with tempfile.TemporaryDirectory(prefix="qkv-cdp-") as scratch:
        out = args.keep or scratch
        os.makedirs(out, exist_ok=True)
        for name, html in PAGES.items():
            pathlib.Path(out, name).write_text(html)

        def url(name):
            return pathlib.Path(out, name).resolve().as_uri()

        start = time.monotonic()
        try:
            browser = Browser()
        except FileNotFoundError as e:
            print(f"cdp_selftest: {e}", file=sys.stderr)
            return 1
        checks = [
            ("clean page: no console errors, only its own request; #fragment", check_clean_page),
            ("console.error and an uncaught exception are both reported", check_errors_detected),
            ("a request to example.invalid is reported", check_request_detected),
            ("mouse_move hovers: onmouseenter and :hover", check_hover),
            ("Tab focuses, ArrowDown/Enter reach the button, click clicks", check_keys_and_click),
            ("screenshot is a PNG of the window size", lambda b, u: check_screenshot(b, u, out)),
            ("evaluate/wait_for/call/navigate raise on errors", check_errors_raised),
        ]
        failed = 0
        with browser as b:
            b.navigate(url("clean.html"))
            print(f"chromium started and loaded a page in {time.monotonic() - start:.2f} s")
            for name, check in checks:
                try:
                    check(b, url)
                    print(f"ok    {name}")
                except (AssertionError, CdpError, TimeoutError) as e:
                    failed += 1
                    print(f"FAIL  {name}: {e}")
        try:
            check_killed_on_failure(out)
            print("ok    a failure inside `with` still kills chromium and removes its profile")
        except (AssertionError, CdpError, TimeoutError) as e:
            failed += 1
            print(f"FAIL  kill on failure: {e}")
        total = len(checks) + 1
        print(f"{total - failed} passed, {failed} failed")
        return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Watchdog as e:
        print(e, file=sys.stderr)
        sys.exit(1)
