"""The checks of the public functions' arguments, shared by _attention.py, _models.py and
_train.py. Each failure is one line that names the argument, what it was and what was expected.
Every argument is checked here before it reaches the extension, whose own conversions fail with
a multi-line dump of its signatures ("incompatible function arguments")."""

import numbers
import operator
import os
import stat
import sys
from typing import Optional, Sequence

import numpy as np

from . import _qkv


def text(x, name: str) -> str:
    """x, a str that UTF-8 can encode: the extension's strings are UTF-8. A lone surrogate
    (U+D800–U+DFFF, what errors="surrogateescape" makes of undecodable bytes) is not text."""
    if not isinstance(x, str):
        raise TypeError(f"{name}: {type(x).__name__}; expected str")
    try:
        x.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"{name}: a lone surrogate U+{ord(x[e.start]):04X} at character "
                         f"{e.start}; expected text that UTF-8 can encode (decode bytes with "
                         "errors='replace', not 'surrogateescape')") from None
    return x


def choice(x, name: str, choices: Sequence[str], expected: Optional[str] = None) -> str:
    """x, one of `choices`; `expected` ends the message (else the choices, listed)."""
    listed = expected or ", ".join(choices)
    if not isinstance(x, str):
        raise TypeError(f"{name}: {type(x).__name__}; expected str, one of {listed}")
    if x not in choices:
        raise ValueError(f"{name} {x!r}; expected one of {listed}")
    return x


def flag(x, name: str) -> bool:
    """x, True or False (NumPy's bool too): a truth value PyTorch's flags take, never a str or
    an array whose truth Python would guess."""
    if not isinstance(x, (bool, np.bool_)):
        raise TypeError(f"{name}: {type(x).__name__}; expected True or False")
    return bool(x)


def integer(x, name: str, low: int, high: int, expected: str) -> int:
    """x, an int (NumPy's too, never a bool) in [low, high]."""
    if isinstance(x, (bool, np.bool_)):  # an int to Python, never meant as a count
        raise TypeError(f"{name}: bool; expected an int")
    try:
        n = operator.index(x)
    except TypeError:
        raise TypeError(f"{name}: {type(x).__name__}; expected an int") from None
    if not low <= n <= high:
        raise ValueError(f"{name} {n} is out of range; expected {expected}")
    return n


def number(x, name: str) -> float:
    """x, a real number (NumPy's too, never a bool or a str), as a float."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Real):
        raise TypeError(f"{name}: {type(x).__name__}; expected a number")
    try:
        return float(x)
    except OverflowError:  # an int (or Fraction) beyond float64's 1.8e308
        raise ValueError(f"{name}: {type(x).__name__} beyond a float's range (±1.8e308); "
                         "expected a finite number") from None


def memory_limit(x) -> int:
    """memory_limit as the extension takes it: bytes (an int, 1 to 2^62), or 0 for None, half
    the machine's memory. Work estimated past it raises MemoryError naming both sizes before it
    starts."""
    return 0 if x is None else integer(x, "memory_limit", 1, 2**62, "1 to 2^62 bytes")


def path(x, name: str) -> str:
    """x, a str, bytes or os.PathLike path, as a str (undecodable bytes as surrogates, which
    os.fsencode turns back into the same bytes for the extension). A str os.fsencode cannot
    encode (a lone surrogate outside U+DC80–U+DCFF) is a ValueError naming the argument."""
    if not isinstance(x, (str, bytes, os.PathLike)):
        raise TypeError(f"{name}: {type(x).__name__}; expected a path (str, bytes or "
                        "os.PathLike)")
    p = os.fsdecode(os.fspath(x))
    if not isinstance(p, str):  # an os.PathLike whose __fspath__ returned something else
        raise TypeError(f"{name}: {type(x).__name__} gives {type(p).__name__}; expected a path")
    if not p:
        raise ValueError(f"{name}: an empty path; expected a file or folder name")
    if "\0" in p:
        raise ValueError(f"{name}: {p!r} holds a NUL character; expected a path")
    try:
        os.fsencode(p)  # what every use of the path does: os.stat, the extension's bytes
    except UnicodeEncodeError as e:
        c = p[e.start]
        what = (f"a lone surrogate U+{ord(c):04X}" if 0xD800 <= ord(c) <= 0xDFFF else
                f"{c!r}, which the file system's encoding ({sys.getfilesystemencoding()}) "
                "cannot write,")
        raise ValueError(f"{name}: {what} at character {e.start}; expected a path the file "
                         "system can name (bytes that are not UTF-8 come from os.fsdecode as "
                         "U+DC80–U+DCFF, which it can)") from None
    return p


def what_it_is(p: str) -> Optional[str]:
    """What the path names, as qkv's C++ says it ("is a directory", "is a character device");
    None where nothing is there, "" for a regular file. A path that cannot be looked at (no
    permission, a file where a folder should be on the way, a loop) raises the OSError that
    says so, in one line."""
    try:
        mode = os.stat(p).st_mode
    except FileNotFoundError:
        return None
    except OSError as e:
        raise type(e)(f"{p}: cannot be read: {e.strerror}") from None
    for test, kind in ((stat.S_ISREG, ""), (stat.S_ISDIR, "is a directory"),
                       (stat.S_ISCHR, "is a character device"),
                       (stat.S_ISBLK, "is a block device"),
                       (stat.S_ISFIFO, "is a FIFO (named pipe)"), (stat.S_ISSOCK, "is a socket")):
        if test(mode):
            return kind
    return "is not a regular file"


def output_path(x, name: str, prefix: str) -> str:
    """x, a path a file can be written to, checked before any (possibly long) work: not a
    directory, in a folder that exists and can be written. `prefix` starts each message."""
    p = path(x, name)
    if os.path.isdir(p):
        raise IsADirectoryError(f"{prefix}{p}: is a directory; expected a file path")
    folder = os.path.dirname(os.path.abspath(p))
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"{prefix}{p}: the folder {folder} does not exist; expected a "
                                "path in an existing folder")
    _qkv.check_output(prefix, os.fsencode(p))  # OSError: a folder it cannot write in
    return p


def write_file(p: str, data: bytes, prefix: str) -> None:
    """data to p, all or nothing, as qkv's command writes its files (include/qkv/files.h): a
    temporary beside it renamed into place; a device or a FIFO is written in place, never
    replaced. A failed write is an OSError that names the path."""
    _qkv.write_file(prefix, os.fsencode(p), data)
