"""The network's problems: tusklib.problems' shape with the network's stable codes."""
from enum import IntEnum

from tusklib.problems import Problem, Problems

__all__ = ["Code", "NetworkError", "Problem"]


class Code(IntEnum):
    """Stable error codes; the numbers are tusk-net's exit statuses and never change."""

    SYNTAX = 40      # not valid TOML
    SCHEMA = 41      # an unknown, missing or mistyped section or key
    VALUE = 42       # a value of the wrong form, or values that cannot hold together
    INTERFACE = 43   # an interface the machine does not have, or none at all
    IO = 44          # the file is missing or cannot be read
    LOCKED = 45      # another apply, confirm or rollback is running
    NOT_PENDING = 46  # nothing awaits confirmation
    REVISION = 47    # no such revision
    APPLY = 48       # the backend refused or failed; what was changed is put back
    CONFIRM = 49     # a confirm that did not arrive over the new management address
    POLICY = 50      # the policy's zones need an interface this configuration drops
    HA = 51          # the HA pair needs a link this configuration drops


class NetworkError(Problems):
    """One or more problems, each naming the field (interfaces[2].addresses[0]) and why."""

    codes = Code
