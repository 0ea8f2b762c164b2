"""The exceptions of vramfit: bad input the caller can fix, or a bug."""

from __future__ import annotations


class VramfitError(Exception):
    """Base class: ``message`` is the CLI's message, ``exit_code`` the CLI's exit code."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InputError(VramfitError, ValueError):
    """Bad input (the CLI's exit code 2): an unknown model or GPU, a malformed file, a flag
    value out of range, contradictory flags.

    ``field`` is the keyword argument the error is about (``"batch"``, ``"lora_rank"``) when a
    typed error names one: clap's argument context for a value that does not parse, or the
    workload rule that was broken; None when no typed error names an argument (an unknown
    model names no flag) -- it is never guessed from the message text.
    """

    exit_code = 2

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field

    def __str__(self) -> str:
        return self.message if self.field is None else f"{self.message} [field: {self.field}]"


class InternalError(VramfitError, RuntimeError):
    """vramfit broke one of its own invariants (the CLI's exit code 3): a bug in vramfit,
    never the input. Please report it with the call that raised it."""

    exit_code = 3
