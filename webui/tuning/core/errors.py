"""The one error type of tusk-tune. Every problem an operator can cause - in a
profile, in the arguments, against the machine - is a TuneError with a stable code
(the CLI's exit status) and the place it was found (file, section and key, or the
interface): tusklib.problems' shape. Nothing is written when one is raised before
apply starts writing."""
from enum import IntEnum

from tusklib.problems import Problems


class Code(IntEnum):
    """Stable error codes; the numbers are CLI exit statuses and never change."""

    PROFILE = 30      # a profile file cannot be read or parsed, or has an unknown key
    VALUE = 31        # a value of the wrong form or outside its limits
    INTERFACE = 32    # an interface the machine does not have
    STATE = 33        # nothing to verify or roll back, or a broken state file
    WRITE = 34        # a write failed during apply; what was written is restored
    IO = 35           # a file could not be read or written
    TARGET = 36       # no such network namespace


class TuneError(Problems):
    """Raised with one or more problems; the first names the code."""

    codes = Code
