"""``python -m vramfit`` and the ``vramfit`` console script: the CLI itself
(the same parser and commands, in-process), with its stdout, stderr and exit
codes (docs/exit-codes.md)."""

import signal
import sys
from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    from . import _native

    args = ["vramfit", *(sys.argv[1:] if argv is None else argv)]
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    # The CLI stops on Ctrl-C at once; Python's own handler would only raise once the
    # command returned. `vramfit serve` installs its own handler and shuts down cleanly.
    if hasattr(signal, "SIGINT"):
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    return _native.main(args)


if __name__ == "__main__":
    sys.exit(main())
