"""One call of a vramfit command in-process (the Rust extension ``_native``):
keyword arguments -> the CLI's command line -> its ``--json`` document, handed
over as Python objects (no ``json`` round trip, nothing imported at ``import vramfit``)."""

from __future__ import annotations

import os

from . import _native
from ._errors import InputError, InternalError


def _value(name: str, v: object) -> object:
    """A flag value: str, int, float, bool, or a list of them."""
    if isinstance(v, (str, bool, int, float)):
        return v
    if isinstance(v, os.PathLike):
        return os.fspath(v)
    if isinstance(v, (list, tuple)):
        return [_value(name, i) for i in v]
    if hasattr(v, "__index__"):  # numpy integers
        return int(v.__index__())
    if hasattr(v, "__float__") and not isinstance(v, (bytes, dict)):  # numpy floats
        return float(v)
    raise InputError(f"{name}: cannot pass a {type(v).__name__} ({v!r}) as a flag value", name)


def _given(args: dict) -> dict:
    return {k: _value(k, v) for k, v in args.items() if v is not None and v is not False}


def call(tool: str, args: dict) -> dict:
    status, doc, field, code = _native.call(tool, _given(args))
    if status == 0:
        doc["exit_code"] = code
        if tool == "estimate":
            fit = doc.get("fit")
            doc["fits"] = fit.get("fits") if isinstance(fit, dict) else None
        elif tool == "plan":
            doc["fits"] = code == 0
        return doc
    if status == 2:
        raise InputError(doc, field)
    raise InternalError(doc)


def text(tool: str, args: dict) -> str:
    """The CLI's own text report (what ``vramfit <command>`` prints without ``--json``)."""
    status, out, field, _code = _native.call_text(tool, _given(args))
    if status == 0:
        return out
    if status == 2:
        raise InputError(out, field)
    raise InternalError(out)
