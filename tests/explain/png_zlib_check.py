#!/usr/bin/env python3
"""qkv's PNG encoder (src/explain/image/png.cpp) read by Python's zlib.

An independent reader: the chunks' CRCs by zlib.crc32, the IDAT stream inflated by zlib.decompress
(which checks the Adler-32), the five PNG filters undone as the spec writes them (W3C PNG §9).
It shares no code with the C++ encoder or with the test reader of tests/explain/png_test.cpp.

  --qkv-tests BUILD/tests/qkv_tests   run the test PngSamples.EveryFilterRoundTripsAndIsWrittenForPython, which
        writes sample images (NAME.png, and NAME.rgb: the pixels the encoder was given) into a
        temporary folder; every PNG must decode to exactly its .rgb. Then the checker must
        reject copies of each PNG with one bit flipped: in the data with the chunk CRC made right
        again (zlib or the pixel comparison must notice), and anywhere without (the CRC must).
  --same-pixels A.png B.png           decode both and require the same size and pixels (e.g. a
        `qkv explain --png` before and after an encoder change).

Needs only the standard library (Debian's /usr/bin/python3). Prints one line per check and
'N passed, M failed'; exits 1 on any failure.
"""

import argparse
import os
import struct
import subprocess
import sys
import tempfile
import zlib

SIGNATURE = b"\x89PNG\r\n\x1a\n"


class BadPng(Exception):
    pass


def chunks(png):
    if png[:8] != SIGNATURE:
        raise BadPng("bad signature")
    at = 8
    while at < len(png):
        if at + 12 > len(png):
            raise BadPng(f"truncated chunk at byte {at}")
        (length,) = struct.unpack(">I", png[at:at + 4])
        body = png[at + 4:at + 8 + length]
        if len(body) != 4 + length or at + 12 + length > len(png):
            raise BadPng("chunk past the end")
        (crc,) = struct.unpack(">I", png[at + 8 + length:at + 12 + length])
        if zlib.crc32(body) != crc:
            raise BadPng(f"CRC mismatch in {body[:4]!r}")
        yield body[:4].decode("latin-1"), body[4:]
        at += 12 + length


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def decode(png):
    """(width, height, rgb bytes, filter types per row) of an 8-bit RGB PNG."""
    kinds, ihdr, idat = [], None, b""
    for kind, data in chunks(png):
        kinds.append(kind)
        if kind == "IHDR":
            ihdr = data
        elif kind == "IDAT":
            idat += data
    if not kinds or kinds[0] != "IHDR" or kinds[-1] != "IEND" or ihdr is None:
        raise BadPng(f"chunk order {kinds}")
    width, height, depth, colour, method, filt, interlace = struct.unpack(">IIBBBBB", ihdr)
    if (depth, colour, method, filt, interlace) != (8, 2, 0, 0, 0):
        raise BadPng(f"not 8-bit RGB without interlace: {ihdr.hex()}")
    try:
        raw = zlib.decompress(idat)  # checks the zlib header and the Adler-32
    except zlib.error as e:
        raise BadPng(f"zlib: {e}") from e
    stride = 3 * width
    if len(raw) != height * (stride + 1):
        raise BadPng(f"{len(raw)} bytes of scanlines, expected {height * (stride + 1)}")
    out, above, types = bytearray(), bytearray(stride), []
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        types.append(kind)
        for i in range(stride):
            a = line[i - 3] if i >= 3 else 0
            b = above[i]
            c = above[i - 3] if i >= 3 else 0
            if kind == 0:
                pred = 0
            elif kind == 1:
                pred = a
            elif kind == 2:
                pred = b
            elif kind == 3:
                pred = (a + b) // 2
            elif kind == 4:
                pred = paeth(a, b, c)
            else:
                raise BadPng(f"row {y}: filter type {kind}")
            line[i] = (line[i] + pred) & 0xFF
        out += line
        above = line
    return width, height, bytes(out), types


class Tally:
    def __init__(self):
        self.passed = self.failed = 0

    def check(self, ok, what):
        print(("ok    " if ok else "FAIL  ") + what)
        if ok:
            self.passed += 1
        else:
            self.failed += 1


def with_fixed_crc(png, at):
    """png with the CRC of the chunk that holds byte `at` recomputed."""
    pos = 8
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos:pos + 4])
        if pos + 8 <= at < pos + 8 + length:
            body = png[pos + 4:pos + 8 + length]
            return png[:pos + 8 + length] + struct.pack(">I", zlib.crc32(body)) + \
                png[pos + 12 + length:]
        pos += 12 + length
    raise ValueError(f"byte {at} is in no chunk's data")


def rejects(png, expected_rgb):
    """True when the checker notices: a BadPng, or pixels other than expected."""
    try:
        _, _, rgb, _ = decode(png)
    except BadPng:
        return True
    return rgb != expected_rgb


def check_samples(qkv_tests, tally):
    with tempfile.TemporaryDirectory() as folder:
        env = dict(os.environ, QKV_PNG_SAMPLES=folder)
        run = subprocess.run([qkv_tests, "--gtest_filter=PngSamples.EveryFilterRoundTripsAndIsWrittenForPython"],
                             env=env, capture_output=True, text=True)
        tally.check(run.returncode == 0, f"qkv_tests wrote the samples (exit {run.returncode})")
        if run.returncode != 0:
            print(run.stdout[-4000:], run.stderr[-4000:])
        names = sorted(f[:-4] for f in os.listdir(folder) if f.endswith(".png"))
        seen_filters = set()
        tally.check(len(names) >= 5, f"{len(names)} samples: {', '.join(names)}")
        for name in names:
            png = open(os.path.join(folder, name + ".png"), "rb").read()
            rgb_file = os.path.join(folder, name + ".rgb")
            if not os.path.exists(rgb_file):  # qkv_tests could not read its own PNG back
                try:
                    width, height, _, _ = decode(png)
                    tally.check(False, f"{name}: {width} x {height}, decodes here, not in qkv_tests")
                except BadPng as e:
                    tally.check(False, f"{name}: {e}")
                continue
            expected = open(rgb_file, "rb").read()
            try:
                width, height, rgb, types = decode(png)
            except BadPng as e:
                tally.check(False, f"{name}: {e}")
                continue
            seen_filters.update(types)
            tally.check(rgb == expected and len(rgb) == 3 * width * height,
                        f"{name}: {width} x {height}, {len(png)} bytes for {len(expected)} of "
                        f"pixels, filters {sorted(set(types))}, pixels as the encoder had them")

            # One bit flipped in the zlib stream, the CRC made right: zlib or the pixels notice.
            idat = png.index(b"IDAT") + 4
            length = struct.unpack(">I", png[idat - 8:idat - 4])[0]
            missed = []
            for at in sorted({idat + 2, idat + length // 3, idat + length // 2, idat + length - 1}):
                bad = bytearray(png)
                bad[at] ^= 0x04
                if not rejects(with_fixed_crc(bytes(bad), at), expected):
                    missed.append(at)
            tally.check(not missed, f"{name}: flipped bits in the zlib data are rejected"
                        + (f" (missed at bytes {missed})" if missed else ""))
            bad = bytearray(png)
            bad[idat + length // 2] ^= 0x01  # CRC left as it was
            try:
                decode(bytes(bad))
                tally.check(False, f"{name}: a flipped bit without a new CRC was accepted")
            except BadPng as e:
                tally.check("CRC" in str(e), f"{name}: a flipped bit without a new CRC: {e}")
        # Otherwise some branch of decode() above would have gone unchecked.
        tally.check(seen_filters == {0, 1, 2, 3, 4},
                    f"the samples use filter types {sorted(seen_filters)}, expected all five")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--qkv-tests", help="the qkv_tests program")
    parser.add_argument("--same-pixels", nargs=2, metavar="PNG")
    args = parser.parse_args()
    if not args.qkv_tests and not args.same_pixels:
        parser.error("give --qkv-tests or --same-pixels")
    tally = Tally()
    if args.qkv_tests:
        check_samples(args.qkv_tests, tally)
    if args.same_pixels:
        a, b = (decode(open(f, "rb").read()) for f in args.same_pixels)
        tally.check(a[:3] == b[:3], f"{args.same_pixels[0]} ({a[0]} x {a[1]}, filters "
                    f"{sorted(set(a[3]))}) and {args.same_pixels[1]} ({b[0]} x {b[1]}, filters "
                    f"{sorted(set(b[3]))}) hold the same pixels")
    print(f"{tally.passed} passed, {tally.failed} failed")
    return 1 if tally.failed or not tally.passed else 0


if __name__ == "__main__":
    sys.exit(main())
