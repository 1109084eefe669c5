"""The tally the browser tests keep: each check prints ok or FAIL, each part whose model is not
installed prints "skipped: ...", and finish() ends the script as ctest reads it: 1 if any check
failed (whatever was skipped), 77 (SKIP_RETURN_CODE in tests/CMakeLists.txt) if a part was skipped,
so a skipped part is never reported as passed, else 0."""
import sys

failures = []
skipped = []
SKIPPED_EXIT = 77


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


def skip(what):
    print("skipped: " + what)
    skipped.append(what)


def finish():
    if failures:
        sys.exit(f"{len(failures)} check(s) failed" +
                 (f"; {len(skipped)} part(s) skipped" if skipped else ""))
    if skipped:
        print(f"{len(skipped)} part(s) skipped, so the test is reported as skipped, not passed")
        sys.exit(SKIPPED_EXIT)
