"""The one error type of the policy engine.

Every problem an operator can cause - in the policy file, in the web form,
or against the target system - is a PolicyError with a stable code and the
path of the offending field (tusklib.problems: the shape every domain shares).
The code is the CLI's exit status; the path places the message next to its field
in the web UI.
"""
from contextlib import contextmanager
from enum import IntEnum

from tusklib.problems import Problem, Problems
from tusklib.target import TargetError

__all__ = ["Code", "PolicyError", "Problem", "on_target", "quoted", "shortened"]

QUOTE_MAX = 60  # characters of a value quoted in a message: one line, whatever was sent


class Code(IntEnum):
    """Stable error codes; the numbers are CLI exit statuses and never change."""

    SYNTAX = 10          # the file is not well-formed YAML
    SCHEMA = 11          # unknown key, missing key or wrong type
    REFERENCE = 12       # a name that is not defined
    DUPLICATE = 13       # a name or value defined twice
    RANGE = 14           # a number outside its limits
    ADDRESS = 15         # not a valid address, prefix or range
    CONTRADICTION = 16   # settings that cannot hold together
    INTERFACE = 17       # an interface the target does not have
    CAPABILITY = 20      # the running kernel lacks something the policy uses
    NFT_CHECK = 21       # nft -c refused the rendered ruleset
    APPLY = 22           # nft -f failed; nothing was changed
    LOCKED = 23          # another apply holds the lock
    NOT_PENDING = 24     # confirm/cancel with nothing awaiting confirmation
    REVISION = 25        # an unknown revision number
    TARGET = 26          # the target (network namespace) does not exist
    IO = 27              # a file could not be read or written


class PolicyError(Problems):
    """Raised with one or more problems; the first one names the code."""

    codes = Code


@contextmanager
def on_target():
    """What the target (tusklib.target) refuses, as the policy engine's own error: a
    TargetError inside becomes the PolicyError with the same code, TARGET."""
    try:
        yield
    except TargetError as error:
        raise PolicyError([Problem(Code(p.code), p.path, p.message) for p in error]) \
            from None


def shortened(text):
    """text cut to QUOTE_MAX characters, "..." marking the cut."""
    return text if len(text) <= QUOTE_MAX else text[:QUOTE_MAX - 3] + "..."


def quoted(value):
    """The repr of a value an operator sent, for a message: never more than one line of
    it, however large the value (an error must not be a copy of the input)."""
    return shortened(repr(value))
