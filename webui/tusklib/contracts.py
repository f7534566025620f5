"""Typed contracts between the agent and the web process: what an agent task keeps in
jobs.PeriodicState, as a frozen dataclass or a type such as dict[str, bool] (issue 37).
The agent checks what it stores against it (jobs.registry: @periodic(name, interval,
contract=Type)), so a task that drifts from its contract fails visibly on the Jobs page
instead of breaking a page that reads it; the web process reads the row back with
read(Type, value): the typed value, or None when the row is not of that shape. The row
is the web user's to write, so a forged one must read as "nothing reported", never as a
traceback.

Field types: bool, int, float (an int is taken too; never NaN or infinite), str, None,
X | None, list[X], dict[str, X], typing.Any (kept as stored), and another contract's
dataclass. A field with a default may be missing; keys the type does not name are
ignored (an agent of the next release may report more). A field whose key is no Python
name (a flow's "class") says its key: field(metadata={"key": "class"}). No Django here.
"""
import dataclasses
import math
import types
import typing

__all__ = ["NOTHING", "ContractError", "check", "read", "stored", "table"]

# the contract of a task that keeps no result (it writes its own rows, or only acts)
NOTHING = type(None)


class ContractError(ValueError):
    """Where the value breaks its contract, and how."""

    def __init__(self, path, reason):
        self.path, self.reason = path, reason
        super().__init__(f"{path or 'the value'}: {reason}")


# the scalar types: (whether a value is one, what it must be)
_SCALARS = {
    bool: (lambda v: isinstance(v, bool), "must be true or false"),
    int: (lambda v: isinstance(v, int) and not isinstance(v, bool), "must be a whole number"),
    float: (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
            and math.isfinite(v), "must be a finite number"),
    str: (lambda v: isinstance(v, str), "must be text"),
    type(None): (lambda v: v is None, "must be empty (null)"),
}


def _conform(hint, value, path):
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is typing.Any:
        return value
    if hint in _SCALARS:
        accepts, must = _SCALARS[hint]
        if not accepts(value):
            raise ContractError(path, must)
        return float(value) if hint is float else value
    if origin in (typing.Union, types.UnionType):
        return _one_of(args, value, path)
    if origin is list:
        if not isinstance(value, list):
            raise ContractError(path, "must be a list")
        return [_conform(args[0], item, f"{path}[{i}]") for i, item in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise ContractError(path, "must be a table")
        return {k: _conform(args[1], v, f"{path}.{k}" if path else k) for k, v in value.items()}
    if dataclasses.is_dataclass(hint):
        return _from_table(hint, value, path)
    raise TypeError(f"{path}: {hint!r} is no type a contract may use")


def _one_of(options, value, path):
    """value as the first of options it conforms to (None first, when it is one); the
    last option's error when none."""
    if value is None and type(None) in options:
        return None
    options = [option for option in options if option is not type(None)]
    for option in options[:-1]:
        try:
            return _conform(option, value, path)
        except ContractError:
            continue
    return _conform(options[-1], value, path)


def _from_table(cls, value, path):
    if not isinstance(value, dict):
        raise ContractError(path, "must be a table")
    hints = typing.get_type_hints(cls)
    found = {}
    for field in dataclasses.fields(cls):
        key = _key(field)
        where = f"{path}.{key}" if path else key
        if key in value:
            found[field.name] = _conform(hints[field.name], value[key], where)
        elif field.default is dataclasses.MISSING and \
                field.default_factory is dataclasses.MISSING:
            raise ContractError(where, "is missing")
    return cls(**found)


def _key(field):
    return field.metadata.get("key", field.name)


def table(value):
    """A contract's value as JSON's types: a dataclass as its table, under each field's
    key (dataclasses.asdict, but with the keys the row has)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {_key(field): table(getattr(value, field.name))
                for field in dataclasses.fields(value)}
    if isinstance(value, list):
        return [table(item) for item in value]
    if isinstance(value, dict):
        return {key: table(item) for key, item in value.items()}
    return value


def check(contract, value):
    """value (what a task returns) as its contract - a dataclass, or a type such as
    dict[str, bool] -; ContractError when it breaks it. A dataclass instance is taken as
    its table (asdict)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = table(value)
    return _conform(contract, value, "")


def stored(contract, value):
    """check()'s value as a row keeps it: JSON's types (a dataclass as its table)."""
    return table(check(contract, value))


def read(contract, value):
    """A stored row's value as its contract, or None when there is none or it is not of
    that shape."""
    if value is None:
        return None
    try:
        return _conform(contract, value, "")
    except ContractError:
        return None
