"""Reading TOML a person typed (network.toml, ha.toml, tusk.toml): tomllib, with every way
it can fail as one TomlError that says where - "line 3, column 9: Invalid value" - for
each reader to wrap in its own problem.

tomllib raises TOMLDecodeError for malformed TOML (its place in the message before
Python 3.14, as lineno and colno from 3.14 on), but a plain ValueError for a decimal
number longer than Python converts (int(): 4300 digits, sys.get_int_max_str_digits())
and RecursionError for arrays nested a thousand deep; a hexadecimal number has no such
limit, and the first message that prints it (f"{mtu} is above 9000") raises instead.
So a number of more than NUMBER_DIGITS_MAX digits is refused here, whatever its base:
no setting is anywhere near that long. And the bytes of a file may not be UTF-8.
No Django here (the cores import this module)."""
import re
import tomllib

NUMBER_DIGITS_MAX = 1000
_NUMBER_MAX = 10 ** NUMBER_DIGITS_MAX
# A number of more than 1000 decimal digits is written with at least 831 characters (as
# hexadecimal digits): the first run that long after "=", "[" or "," is the one refused.
_LONG_NUMBER = re.compile(r"(?:=|\[|,)\s*([-+]?(?:0[xob])?[0-9A-Fa-f_]{800,})")
_PLACE = re.compile(r"\A(?P<msg>.*) \(at (?:line (?P<line>\d+), column (?P<column>\d+)|"
                    r"end of document)\)\Z", re.S)


class TomlError(ValueError):
    """Why the text is not TOML this reader can read, and where (line and column from 1,
    or None when the place is not known)."""

    def __init__(self, reason, line=None, column=None):
        self.reason, self.line, self.column = reason, line, column
        super().__init__(str(self))

    def __str__(self):
        if self.line is None:
            return self.reason
        return f"line {self.line}, column {self.column}: {self.reason}"

    def described(self, what="TOML"):
        """"not valid TOML at line 3, column 9: Invalid value", as a problem says it."""
        where = f" at line {self.line}, column {self.column}" if self.line is not None else ""
        return f"not valid {what}{where}: {self.reason}"


def place(text, index):
    """(line, column), from 1, of the character at index of text (TOML's line break is
    \\n; a \\r before it is part of the line)."""
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1


def loads(text):
    """The document of a TOML text; TomlError otherwise."""
    try:
        document = tomllib.loads(text)
    except (ValueError, RecursionError) as error:   # TOMLDecodeError is a ValueError
        raise error_of(error, text) from None
    return checked(document, text)


def checked(document, text):
    """The document tomllib read from text, or TomlError at its first number of more than
    NUMBER_DIGITS_MAX digits."""
    stack = [document]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack += value.values()
        elif isinstance(value, list):
            stack += value
        elif isinstance(value, int) and not -_NUMBER_MAX < value < _NUMBER_MAX:
            raise _too_long(text)
    return document


def error_of(error, text):
    """What tomllib.loads(text) raised (TOMLDecodeError, ValueError, RecursionError) as a
    TomlError, for a reader that calls tomllib itself."""
    if isinstance(error, tomllib.TOMLDecodeError):
        return decode_error(error, text)
    if isinstance(error, RecursionError):
        return TomlError("nested too deeply")
    return _too_long(text)


def _too_long(text):
    found = _LONG_NUMBER.search(text)
    if found is None:
        return TomlError(f"a number of more than {NUMBER_DIGITS_MAX} digits")
    return TomlError(f"a number of {len(found.group(1))} characters is too long (at most "
                     f"{NUMBER_DIGITS_MAX} digits)", *place(text, found.start(1)))


def load_bytes(data):
    """The document of a TOML file's bytes: as loads(), and bytes that are not UTF-8 are
    a TomlError at the first of them."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        good = data[:error.start].decode("utf-8")
        raise TomlError(f"not UTF-8 text (byte {error.start})", *place(good, len(good))) \
            from None
    return loads(text)


def decode_error(error, text):
    """A TOMLDecodeError as a TomlError: the attributes of Python 3.14, the message's
    "(at line L, column C)" before."""
    line, column = getattr(error, "lineno", None), getattr(error, "colno", None)
    reason = getattr(error, "msg", None)
    if line is not None and column is not None and reason:
        return TomlError(reason, line, column)
    found = _PLACE.match(str(error))
    if found is None:
        return TomlError(str(error))
    if found["line"] is None:   # "at end of document"
        return TomlError(found["msg"], *place(text, len(text)))
    return TomlError(found["msg"], int(found["line"]), int(found["column"]))
