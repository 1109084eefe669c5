"""`python -m qkv ...` (and the `qkv` script pip installs) runs the qkv command shipped inside
the package (qkv/bin/qkv), with the same arguments, exit code and output."""

import os
import sys


def main():
    binary = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "qkv")
    if not os.access(binary, os.X_OK):
        sys.exit(f"qkv: error: the command is not in the package ({binary}); reinstall qkv")
    os.execv(binary, [binary] + sys.argv[1:])


if __name__ == "__main__":
    main()
