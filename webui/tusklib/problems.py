"""One shape for "what is wrong with this input", in every domain: a Problem is a stable
code, the path of the offending field and the reason; a Problems exception carries every
problem found, all at once. The policy engine, tusk-tune, network.toml, backups and
capture settings each subclass Problems and keep their own code enum (an IntEnum whose
numbers are their CLI's exit statuses). The same problems reach the operator three ways:
report() prints them for every CLI, ProblemsFormMixin puts them next to a web form's
fields, and str() of the exception is what a job's error shows.

No Django here (the cores import this module); the mixin uses only the form's own
add_error, so it needs none either.
"""
import sys
from dataclasses import dataclass
from enum import IntEnum

MAX_PRINTED = 50   # problems a CLI prints; the rest are counted


@dataclass(frozen=True)
class Problem:
    """One thing wrong, at one place (path "": the input as a whole)."""

    code: IntEnum
    path: str
    message: str

    def __str__(self):
        return f"{self.path}: {self.message}" if self.path else self.message


class Problems(Exception):
    """Raised with one or more problems; the first one's code is the CLI's exit status.

        raise PolicyError(Code.RANGE, "classes[3].mss.value", "70000 is above 65535")
        raise PolicyError([Problem(...), Problem(...)])

    A domain's subclass names its code enum in `codes`, which turns a plain number
    into its member."""

    codes = None

    def __init__(self, code_or_problems, path="", message=""):
        if isinstance(code_or_problems, (list, tuple)):
            problems = list(code_or_problems)
        else:
            code = self.codes(code_or_problems) if self.codes else code_or_problems
            problems = [Problem(code, path, message)]
        if not problems:
            raise ValueError(f"{type(self).__name__} needs at least one problem")
        self.problems = problems
        super().__init__(str(self))

    @property
    def code(self):
        return self.problems[0].code

    @property
    def path(self):
        return self.problems[0].path

    @property
    def message(self):
        return self.problems[0].message

    def __iter__(self):
        return iter(self.problems)

    def __len__(self):
        return len(self.problems)

    def __str__(self):
        return "\n".join(line(problem) for problem in self.problems)


def line(problem):
    """How an operator reads one problem: `error[RANGE]: classes[3].mss.value: 70000 is
    above 65535`."""
    return f"error[{problem.code.name}]: {problem}"


def report(error, stream=None, limit=MAX_PRINTED):
    """Prints a Problems exception the way every Tusk CLI does - one line a problem on
    stderr, at most limit of them - and returns the exit status: the first one's code."""
    stream = stream or sys.stderr
    for problem in error.problems[:limit]:
        print(line(problem), file=stream)
    if len(error.problems) > limit:
        print(f"... and {len(error.problems) - limit} more", file=stream)
    return int(error.code)


class ProblemsFormMixin:
    """For a Django form whose input a core checks: add_problems() puts each problem next
    to the field it is about, the others at the top of the form.

    problem_fields maps a problem path (or its start: "mss" covers "mss.value" and
    "entries" covers "entries[2]") to a form field; the longest match wins, and "" matches
    every path. A field covering several places shows which one: "entries[2]: ..."."""

    problem_fields = {}

    def field_for(self, path):
        """(form field, the part of path it names) or (None, "")."""
        best = None
        for prefix, field in self.problem_fields.items():
            if prefix == "" or path == prefix or path.startswith((prefix + ".", prefix + "[")):
                if best is None or len(prefix) > len(best[0]):
                    best = (prefix, field)
        return (best[1], best[0]) if best else (None, "")

    def add_problems(self, problems, within=""):
        """problems: a Problems exception (or any iterable of Problem). within: the path
        of what this form edits (e.g. "classes[3]"): the paths below it are matched
        without it; problems elsewhere go to the top of the form, whole."""
        start = within + "." if within else ""
        for problem in problems:
            if problem.path != within and not problem.path.startswith(start):
                self.add_error(None, str(problem))
                continue
            path = problem.path[len(start):] if problem.path != within else ""
            field, prefix = self.field_for(path)
            self.add_error(field, problem.message if path == prefix
                           else f"{path}: {problem.message}")


def type_name(value):
    """What a parsed TOML value is, as a problem says it: "a string", "a table"."""
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "a list", dict: "a table"}.get(type(value), type(value).__name__)


class Integers(list):
    """A schema type for table_values: a list of integers (VLAN ids), where list is one of
    strings."""


_EXPECTED = {str: "a string", bool: "true or false", int: "an integer", list: "a list",
             Integers: "a list of integers"}


def table_values(table, schema, where, problems, code):
    """The values of one TOML table by its schema {key: (type, default)} - default None:
    required; lists are of strings and come back as tuples - with the defaults filled in,
    or None when a key is unknown, missing or mistyped (each a Problem(code) appended to
    problems, at where.key)."""
    values, ok = {}, True
    for key in table:
        if key not in schema:
            problems.append(Problem(code, f"{where}.{key}",
                                    f"unknown key (known: {', '.join(schema)})"))
            ok = False
    for key, (kind, default) in schema.items():
        if key not in table:
            if default is None:
                problems.append(Problem(code, f"{where}.{key}", "missing (required)"))
                ok = False
            values[key] = tuple(default) if isinstance(default, list) else default
            continue
        value = table[key]
        if kind is Integers:
            if isinstance(value, list) and all(isinstance(item, int) and
                                               not isinstance(item, bool) for item in value):
                values[key] = tuple(value)
            else:
                problems.append(Problem(code, f"{where}.{key}", "expected a list of "
                                        f"integers, got {type_name(value)}" + (
                                            "" if not isinstance(value, list) else
                                            " with something else in it")))
                ok = False
            continue
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            problems.append(Problem(code, f"{where}.{key}",
                                    f"expected {_EXPECTED[kind]}, got {type_name(value)}"))
            ok = False
        elif kind is list:
            bad = next((item for item in value if not isinstance(item, str)), None)
            if bad is not None:
                problems.append(Problem(code, f"{where}.{key}",
                                        f"expected a list of strings, got {type_name(bad)} "
                                        "in it"))
                ok = False
            values[key] = tuple(value)
        else:
            values[key] = value
    return values if ok else None


class Refusal(IntEnum):
    """Why a service (an operation the views, the CLIs and the API share) refuses, beyond
    the domain's own problems: each front end turns these into its own answer (a form
    error, an exit status, an HTTP status: 404, 409, 403)."""

    NOT_FOUND = 1        # no such revision, item, capture
    STALE = 2            # the draft changed since the caller read it
    CONFLICT = 3         # the state forbids it now (problems to fix first, a pending change)
    FORBIDDEN = 4        # not for this role


class ServiceError(Problems):
    codes = Refusal
