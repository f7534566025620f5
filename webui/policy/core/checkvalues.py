"""The checks of one value of a policy document (normalise.py's checker walks the whole
document with them): shapes (mapping, sequence), names, choices, numbers, sizes,
comments, references to other items - each records a problem with its code and path
instead of stopping at the first."""
import re
import unicodedata

from tusklib.names import NAME_PATTERN

from .constants import COMMENT_MAX
from .errors import Code, Problem, quoted, shortened

_NAME = re.compile(NAME_PATTERN)
# fastpath_after as text: a whole number and a unit, decimal (kB, MB, GB, TB) or binary
# (KiB, MiB, GiB, TiB); B or none for bytes
# (spaces only: no line break or other white space gets through)
_SIZE = re.compile(r" *([0-9]{1,13}) *([kMGT]i?B|KiB|KB|B)? *\Z")
_UNITS = {None: 1, "B": 1, "kB": 10 ** 3, "KB": 10 ** 3, "MB": 10 ** 6, "GB": 10 ** 9,
          "TB": 10 ** 12, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


class ValueChecks:
    """Collects problems (self.problems) for the checks below."""

    def __init__(self):
        self.problems = []

    def fail(self, code, path, message):
        self.problems.append(Problem(code, path, message))

    # -- shape helpers -----------------------------------------------------------------

    def mapping(self, value, path, required=(), optional=()):
        if not isinstance(value, dict):
            self.fail(Code.SCHEMA, path, f"must be a mapping, not {kind(value)}")
            return None
        for key in value:
            if key not in required and key not in optional:
                allowed = ", ".join(sorted(set(required) | set(optional)))
                self.fail(Code.SCHEMA, join(path, key), f"unknown key (allowed: {allowed})")
        ok = True
        for key in required:
            if key not in value:
                self.fail(Code.SCHEMA, join(path, key), "is required")
                ok = False
        return value if ok else None

    def sequence(self, value, path):
        if value is None:
            return []
        if not isinstance(value, list):
            self.fail(Code.SCHEMA, path, f"must be a list, not {kind(value)}")
            return []
        return value

    def name(self, value, path):
        if not isinstance(value, str) or not _NAME.fullmatch(value):
            self.fail(Code.SCHEMA, path, f"{quoted(value)} is not a valid name: use 1-32 "
                      "lower-case letters, digits, '-' or '_', starting with a letter")
            return None
        return value

    def choice(self, value, path, allowed, default):
        if value is None:
            return default
        if value not in allowed:
            self.fail(Code.SCHEMA, path, f"{quoted(value)} is not one of: {', '.join(allowed)}")
            return default
        return value

    def boolean(self, value, path):
        if value is None:
            return False
        if not isinstance(value, bool):
            self.fail(Code.SCHEMA, path, f"must be true or false, not {quoted(value)}")
            return False
        return value

    def integer(self, value, path, low, high):
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(Code.SCHEMA, path, f"must be a whole number, not {quoted(value)}")
            return None
        if value < low:
            self.fail(Code.RANGE, path, f"{value} is below {low}")
            return None
        if value > high:
            self.fail(Code.RANGE, path, f"{value} is above {high}")
            return None
        return value

    def comment(self, value, path):
        if value is None:
            return ""
        if not isinstance(value, str):
            self.fail(Code.SCHEMA, path, "must be text")
            return ""
        if len(value) > COMMENT_MAX:
            self.fail(Code.RANGE, path, f"is {len(value)} characters long, above {COMMENT_MAX}")
            return ""
        if '"' in value or "\n" in value:
            self.fail(Code.SCHEMA, path, "must not contain double quotes or line breaks")
            return ""
        # "\0" in YAML: PostgreSQL stores no NUL, and a comment is one line of text
        control = next((c for c in value if c != "\t" and unicodedata.category(c) == "Cc"),
                       None)
        if control is not None:
            self.fail(Code.SCHEMA, path, f"must not contain control characters "
                      f"({repr(control)[1:-1]})")
            return ""
        return value

    def unique_names(self, items, path, seen_names):
        """Validates each item's name; reports duplicates with both positions."""
        names = []
        for index, item in enumerate(items):
            here = f"{path}[{index}]"
            # a missing name is reported once, as a required key, by mapping()
            has_name = isinstance(item, dict) and "name" in item
            name = self.name(item["name"], f"{here}.name") if has_name else None
            if name is not None:
                if name in seen_names:
                    self.fail(Code.DUPLICATE, f"{here}.name",
                              f"{name!r} is already defined at {seen_names[name]}")
                    name = None
                else:
                    seen_names[name] = here
            names.append(name)
        return names

    # -- the document ------------------------------------------------------------------

    def size(self, value, path, default, high):
        """A number of bytes: a whole number, or text such as "1 MB" or "512 KiB"."""
        if value is None:
            return default
        if isinstance(value, str):
            found = _SIZE.fullmatch(value)
            if found is None:
                self.fail(Code.SCHEMA, path, f"{quoted(value)} is not a size: a whole number "
                          "of bytes, or one with a unit (kB, MB, GB, TB, KiB, MiB, GiB, TiB)")
                return default
            value = int(found[1]) * _UNITS[found[2]]
        number = self.integer(value, path, 0, high)
        return default if number is None else number

    def reference(self, value, path, table, kind):
        if value is None:
            return None
        if not isinstance(value, str):
            self.fail(Code.SCHEMA, path, f"must be the name of a {kind}")
            return None
        if value not in table:
            self.fail(Code.REFERENCE, path, f"no {kind} is named {quoted(value)}")
            return None
        return value

    def references(self, value, path, table, kind):
        if value is None:
            return ()
        if isinstance(value, str):
            self.fail(Code.SCHEMA, path, f"must be a list of {kind} names, e.g. "
                      f"[{shortened(value)}]")
            return ()
        names = []
        for position, item in enumerate(self.sequence(value, path)):
            name = self.reference(item, f"{path}[{position}]", table, kind)
            if name is not None:
                if name in names:
                    self.fail(Code.DUPLICATE, f"{path}[{position}]", f"{name!r} is listed twice")
                else:
                    names.append(name)
        return tuple(names)


def join(path, key):
    """A key of the document in a path: shortened, as any value an error quotes."""
    key = shortened(str(key))
    return f"{path}.{key}" if path else key


def kind(value):
    return {dict: "a mapping", list: "a list", str: "text", int: "a number",
            float: "a number", bool: "true/false", type(None): "empty"}.get(type(value), "a value")
