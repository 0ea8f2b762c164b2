"""Write vramfit/_api.py and vramfit/__init__.pyi from the CLI's own flag
definitions (``_native.params``), so that every keyword argument is a flag of
the command, with its help text, and nothing is kept in step by hand.

    python -m vramfit._stubgen --out python/vramfit   # rewrite the two files in the checkout
    python -m vramfit._stubgen --check                # exit 1 when the installed ones are stale (CI)
"""

import json
import sys
from pathlib import Path
from typing import Dict, List, Tuple

from . import _native

HERE = Path(__file__).resolve().parent

EXAMPLES = {
    "estimate": """    Example::

        >>> import vramfit
        >>> r = vramfit.estimate("llama-3.1-8b", gpu="rtx-4090")
        >>> r["fit"]["fits"], r["per_gpu"]["total_bytes"] > 0
        (True, True)
        >>> vramfit.estimate("llama-2-7b", task="qlora", lora_rank=16, gpu="rtx-3090")["fits"]
        True
""",
    "plan": """    Example::

        >>> import vramfit
        >>> p = vramfit.plan("llama-2-7b", task="train", have="rtx-3090", allow=["lora", "qlora"])
        >>> p["command"]
        'plan'
""",
    "diagnose": """    Example::

        >>> import vramfit
        >>> d = vramfit.diagnose("oom.log")          # or a _dump_snapshot pickle, memory_summary(), a script
        >>> d["kind"]                               # doctest: +SKIP
        'oom'
""",
    "mig_plan": """    Example::

        >>> import vramfit
        >>> m = vramfit.mig_plan(gpu="a100-80gb", service=["chat=llama-3.1-8b", "embed=8GiB"])
        >>> m["fits"]
        True
""",
    "check": """    Example::

        >>> import vramfit
        >>> c = vramfit.check(xml="nvidia-smi-q-x.xml", expect="8xH100-80GB")   # doctest: +SKIP
        >>> c["ok"]                                                          # doctest: +SKIP
        True
""",
}

RETURNS = {
    "estimate": "the ``vramfit estimate --json`` document (docs/schema.md) plus ``exit_code`` and ``fits`` (``fit.fits``; None without ``gpu``/``gpu_mem``)",
    "plan": "the ``vramfit plan --json`` document (docs/plan.md) plus ``exit_code`` and ``fits`` (False when nothing fits: exit code 1)",
    "diagnose": "the ``vramfit diagnose --json`` document (docs/diagnose.md) plus ``exit_code``",
    "mig_plan": "the ``vramfit mig plan --json`` document (docs/mig.md; ``fits`` is its own) plus ``exit_code``",
    "check": "the ``vramfit check --json`` document (docs/check.md; ``ok`` is False when the machine differs from ``expect``) plus ``exit_code``",
}


def _type(p: dict) -> str:
    base = {"bool": "bool", "int": "int", "tokens": "Union[int, str]", "float": "float", "choice": "str", "str": "str"}[
        p["kind"]
    ]
    if p["kind"] == "float":
        base = "float"
    if p["many"]:
        base = f"Union[{base}, Sequence[{base}]]"
    if p["kind"] == "bool":
        return "bool"
    if p["kind"] in ("str", "choice") and not p["many"]:
        base = "Union[str, os.PathLike]" if _is_path(p) else "str"
    return f"Optional[{base}]"


def _is_path(p: dict) -> bool:
    h = p["help"].lower()
    return p["name"] in ("model", "file") or "file" in h.split(":")[0] or p["name"] in (
        "xml", "text", "list", "topo", "lgi", "lgip", "lgipp", "bandwidth", "p2p", "nccl",
        "deepspeed", "adapter_config", "catalog", "cases",
    )


def _default(p: dict) -> str:
    return "False" if p["kind"] == "bool" else "None"


def _wrap(text: str, indent: str, width: int = 100) -> List[str]:
    words = text.split()
    lines, cur = [], ""
    for w in words:
        if cur and len(indent) + len(cur) + 1 + len(w) > width:
            lines.append(indent + cur)
            cur = w
        else:
            cur = f"{cur} {w}" if cur else w
    if cur:
        lines.append(indent + cur)
    return lines


def _signature(spec: dict) -> Tuple[List[str], List[str]]:
    """(positional parameters, keyword-only parameters) as source text."""
    pos, kw = [], []
    for p in spec["params"]:
        text = f"{p['name']}: {_type(p)} = {_default(p)}"
        if p["flag"] is None:
            if p["required"]:
                text = f"{p['name']}: Union[str, os.PathLike]"
            pos.append(text)
        else:
            if p["required"]:
                text = f"{p['name']}: {_type(p).removeprefix('Optional[')[:-1]}"
            kw.append(text)
            for a in p["aliases"]:
                kw.append(f"{a}: {_type(p)} = {_default(p)}")
    return pos, kw


def _doc(spec: dict) -> str:
    name = spec["name"]
    lines = [f'    """{spec["about"]}', ""]
    lines.append(f"    The keyword arguments are the flags of ``vramfit {spec['command']}`` (``lora_rank`` is")
    lines.append("    ``--lora-rank``); an argument left at None (or False) is not given, so the CLI's default")
    lines.append("    applies. Lists are given to flags that take several values.")
    lines.append("")
    lines.append("    Arguments:")
    for p in spec["params"]:
        flag = p["flag"] or "positional"
        alias = "".join(f", alias {a}" for a in p["aliases"])
        head = f"        {p['name']} ({flag}{alias})"
        help_ = p["help"]
        if p["choices"]:
            help_ += f" One of: {', '.join(p['choices'])}."
        if p["default"] and "[default" not in help_:
            help_ += f" [default: {p['default']}]"
        lines.append(head + ":")
        lines.extend(_wrap(help_, "            "))
    lines.append("")
    lines.append("    Returns:")
    lines.extend(_wrap(RETURNS[name] + ".", "        "))
    lines.append("")
    lines.append("    Raises:")
    lines.append("        InputError: bad input (exit code 2): ``.field`` names the argument when a typed error")
    lines.append("            names one, ``.message`` is the CLI's message.")
    lines.append("        InternalError: vramfit broke one of its own invariants (exit code 3): a bug to report.")
    lines.append("")
    lines.append(EXAMPLES[name].rstrip("\n"))
    lines.append('    """')
    return "\n".join(lines)


def _specs() -> List[dict]:
    return [json.loads(_native.params(t)) for t in _native.tools()]


HEADER = '''"""The functions of vramfit, one per command. GENERATED by
``python -m vramfit._stubgen`` from the CLI's flag definitions: do not edit
(``python -m vramfit._stubgen --check`` fails in CI when it is stale)."""

# Annotations stay strings (never evaluated), so neither os nor typing is imported here:
# `import vramfit` stays fast; the types are in __init__.pyi.
from __future__ import annotations

from ._call import call as _call

'''


def render_api() -> str:
    out = [HEADER]
    for spec in _specs():
        pos, kw = _signature(spec)
        params = ",\n    ".join(pos + (["*"] + kw if kw else []))
        out.append(f"\ndef {spec['name']}(\n    {params},\n) -> Dict[str, Any]:\n")
        out.append(_doc(spec) + "\n")
        out.append(f"    return _call({spec['name']!r}, locals())\n\n")
    return "".join(out).rstrip("\n") + "\n"


def render_stub() -> str:
    out = [
        '"""Type stubs of vramfit. GENERATED by ``python -m vramfit._stubgen``: do not edit."""\n\n',
        "import os\nfrom typing import Any, Dict, Optional, Sequence, Union\n\n",
        "__version__: str\n\n",
        "class VramfitError(Exception):\n    message: str\n    exit_code: int\n\n",
        "class InputError(VramfitError, ValueError):\n    field: Optional[str]\n"
        "    def __init__(self, message: str, field: Optional[str] = ...) -> None: ...\n\n",
        "class InternalError(VramfitError, RuntimeError):\n    def __init__(self, message: str) -> None: ...\n\n",
    ]
    for spec in _specs():
        pos, kw = _signature(spec)
        params = ", ".join(pos + (["*"] + kw if kw else []))
        out.append(f"def {spec['name']}({params}) -> Dict[str, Any]: ...\n")
    return "".join(out)


def main(argv: List[str]) -> int:
    out = Path(argv[argv.index("--out") + 1]) if "--out" in argv else HERE
    targets: Dict[Path, str] = {out / "_api.py": render_api(), out / "__init__.pyi": render_stub()}
    if "--check" in argv:
        stale = [p.name for p, text in targets.items() if not p.exists() or p.read_text() != text]
        if stale:
            print(f"stale: {', '.join(stale)}: run python -m vramfit._stubgen", file=sys.stderr)
            return 1
        print("vramfit/_api.py and vramfit/__init__.pyi match the CLI's flags")
        return 0
    for p, text in targets.items():
        p.write_text(text)
        print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
