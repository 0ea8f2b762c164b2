"""vramfit: GPU memory -- where it goes, why it ran out, the cheapest fix.

The functions are the CLI's commands, run in-process by the Rust extension
(no subprocess, nothing downloaded): keyword arguments are the command's
flags, the answer is its ``--json`` document as a dict. See docs/python.md.

    >>> import vramfit
    >>> vramfit.estimate("llama-3.1-8b", gpu="rtx-4090")["fit"]["fits"]
    True

``vramfit.torch`` checks a live PyTorch job before step 1 and explains an
OOM inside it; ``vramfit.integrations`` has the transformers and Lightning
callbacks. Neither imports torch until used.
"""

from ._api import check, diagnose, estimate, mig_plan, plan
from ._errors import InputError, InternalError, VramfitError
from ._native import __version__

__all__ = [
    "estimate",
    "plan",
    "diagnose",
    "mig_plan",
    "check",
    "InputError",
    "InternalError",
    "VramfitError",
    "__version__",
]
