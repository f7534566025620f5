"""Reading JSON an operator hands in (a backup file): the standard library's json, with
every way it can fail as one JsonError that says where - "line 2, column 13: a number
of 5001 digits is too long" - for the reader to wrap in its own problem.

json.loads raises JSONDecodeError, with lineno and colno, for malformed JSON; but what
its hooks refuse - a key twice in one object, NaN - and a number of more than 4300
digits (int()'s limit, sys.get_int_max_str_digits()) are plain ValueErrors with no
place, and 1e999999 is quietly float("inf"), which nothing downstream can store. Here
every number is checked as it is read (at most NUMBER_DIGITS_MAX digits, finite), and
when one of these checks refuses, the text is read once more by the standard library's
pure-Python scanner, whose every value passes through a function that knows where it
starts: that is the place named. Malformed text costs nothing extra, and good text is
read once, by the C scanner. No Django here."""
import json
import json.decoder
import json.scanner
import math

from .tomlread import place

NUMBER_DIGITS_MAX = 1000


class JsonError(ValueError):
    """Why the text is not JSON this reader takes, and where (line and column from 1, or
    None when the place is not known)."""

    def __init__(self, reason, line=None, column=None):
        self.reason, self.line, self.column = reason, line, column
        super().__init__(str(self))

    def __str__(self):
        if self.line is None:
            return self.reason
        return f"line {self.line}, column {self.column}: {self.reason}"

    def described(self):
        """"not valid JSON at line 2, column 13: ...", as a problem says it."""
        where = f" at line {self.line}, column {self.column}" if self.line is not None else ""
        return f"not valid JSON{where}: {self.reason}"


class NotUtf8(JsonError):
    """Bytes that are not UTF-8, from the first of them (byte: its offset)."""

    def __init__(self, byte, line, column):
        self.byte = byte
        super().__init__(f"not UTF-8 text (byte {byte})", line, column)

    def described(self):
        return f"not UTF-8 text at line {self.line}, column {self.column} (byte {self.byte})"


class _Refused(ValueError):
    """A hook's refusal; pos: where the value refused starts, once known."""

    def __init__(self, reason):
        super().__init__(reason)
        self.reason, self.pos = reason, None


def _shown(text, limit=40):
    return repr(text if len(text) <= limit else text[:limit - 3] + "...")


def _pairs(pairs):
    seen = set()
    for key, _ in pairs:
        if key in seen:
            raise _Refused(f"the key {_shown(key)} appears twice in the object that starts "
                           "here")
        seen.add(key)
    return dict(pairs)


def _int(text):
    digits = len(text.lstrip("-"))
    if digits > NUMBER_DIGITS_MAX:
        raise _Refused(f"a number of {digits} digits is too long (at most {NUMBER_DIGITS_MAX})")
    return int(text)


def _float(text):
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"{_shown(text)} is too large a number")
    return value


def _constant(name):
    raise _Refused(f"{name} is not a JSON number")


HOOKS = {"object_pairs_hook": _pairs, "parse_int": _int, "parse_float": _float,
         "parse_constant": _constant}


def loads(text):
    """The document of a JSON text (str); JsonError otherwise."""
    try:
        return json.loads(text, **HOOKS)
    except json.JSONDecodeError as error:
        raise JsonError(error.msg, error.lineno, error.colno) from None
    except RecursionError:
        raise JsonError("nested too deeply") from None
    except _Refused as refused:
        pos = _where_refused(text)
        raise JsonError(refused.reason, *(place(text, pos) if pos is not None else ())) \
            from None


def load_bytes(data):
    """The document of a JSON file's bytes: as loads(), and bytes that are not UTF-8 are
    a JsonError at the first of them."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        good = data[:error.start].decode("utf-8")
        raise NotUtf8(error.start, *place(good, len(good))) from None
    return loads(text)


class _Locating(json.JSONDecoder):
    """The standard decoder on its pure-Python scanner, each object and array given a
    scan function that marks a refusal with where the value it was scanning starts."""

    def __init__(self):
        super().__init__(**HOOKS)
        self.parse_object = self._object
        self.parse_array = self._array
        self.scan_once = json.scanner.py_make_scanner(self)

    @staticmethod
    def _marking(scan_once):
        def scan(string, idx):
            try:
                return scan_once(string, idx)
            except _Refused as refused:
                if refused.pos is None:
                    refused.pos = idx
                raise
        return scan

    def _object(self, s_and_end, strict, scan_once, *rest):
        return json.decoder.JSONObject(s_and_end, strict, self._marking(scan_once), *rest)

    def _array(self, s_and_end, scan_once):
        return json.decoder.JSONArray(s_and_end, self._marking(scan_once))


def _where_refused(text):
    """Where the value a hook refused starts in text, or None."""
    decoder = _Locating()
    start = json.decoder.WHITESPACE.match(text, 0).end()
    try:
        decoder.raw_decode(text, start)
    except _Refused as refused:
        return start if refused.pos is None else refused.pos
    except (ValueError, RecursionError):
        return None
    return None
