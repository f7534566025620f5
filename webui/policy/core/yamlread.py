"""A policy's YAML read strictly into plain data: only the tags a policy holds (text,
whole numbers, true/false, empty, lists, mappings), a key twice refused, numbers of
bounded length, and every way PyYAML can fail as one SYNTAX PolicyError naming the line
and column. normalise.py turns the data into the model."""
import re

import yaml

from .errors import Code, PolicyError, quoted, shortened

# A policy holds text, whole numbers, true/false, empty values, lists and mappings (and a
# number with a point reads as one, for its error to say "not a whole number"). YAML 1.1
# also resolves plain scalars to dates (2026-05-04), merge keys (<<) and "=": none is a
# policy's, so a date is the text typed (a comment may be one; a date a person can type,
# 2026-13-45, once stopped the loader with a traceback) and "<<" is a key like any other.
_RESOLVED = frozenset(f"tag:yaml.org,2002:{kind}" for kind in ("bool", "float", "int", "null"))
_CORE_TAGS = {f"tag:yaml.org,2002:{kind}": what for kind, what in (
    ("str", "text"), ("int", "a whole number"), ("float", "a number"),
    ("bool", "true or false"), ("null", "empty"), ("seq", "a list"), ("map", "a mapping"))}
# No policy number is longer; the longest that PyYAML reads is cut here, before Python's
# int() refuses it (4300 digits) or quoting it in an error would, and a base-60 one
# (1:2:3...) costs time to add up.
NUMBER_TEXT_MAX = 1000
_YAML_BREAK = re.compile("\r\n|[\r\n\x85\u2028\u2029]")   # the line breaks of a YAML mark
_HALF_PAIR = re.compile("[\ud800-\udfff]")   # "\ud800": no file, database or nft holds it


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys instead of keeping the last one, and
    anchors and aliases: a policy has no use for them, and nine lines of aliases
    expand to 387 million values (a "billion laughs"). They are refused as each node
    is composed, before anything is expanded. Scalars resolve to what a policy holds
    (_RESOLVED); a tag of anything else is refused, and a scalar that does not convert
    (!!int x, a number of 5000 digits) is a YAMLError at its place, never a Python
    exception out of PyYAML's constructors."""

    yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag in _RESOLVED]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise yaml.composer.ComposerError(
                None, None, "anchors and aliases (&name, *name) are not accepted: write the "
                "value out", event.start_mark)
        return super().compose_node(parent, index)

    def construct_object(self, node, deep=False):
        """Each node whole before its parent (deep), so that whatever fails, fails here,
        where the node's place is known."""
        try:
            return super().construct_object(node, deep=True)
        except (ValueError, TypeError, LookupError, AttributeError, ArithmeticError):
            what = _CORE_TAGS.get(node.tag, "a value")
            value = quoted(node.value) if isinstance(node, yaml.ScalarNode) else f"a {node.id}"
            raise yaml.constructor.ConstructorError(
                None, None, f"{value} is not {what}", node.start_mark) from None

    def construct_yaml_int(self, node):
        if isinstance(node, yaml.ScalarNode) and len(node.value) > NUMBER_TEXT_MAX:
            raise yaml.constructor.ConstructorError(
                None, None, f"{quoted(node.value)} is too long for a number: "
                f"{len(node.value)} characters, at most {NUMBER_TEXT_MAX}", node.start_mark)
        return super().construct_yaml_int(node)

    def construct_yaml_str(self, node):
        value = super().construct_yaml_str(node)
        half = _HALF_PAIR.search(value)
        if half is not None:
            raise yaml.constructor.ConstructorError(
                None, None, f"{quoted(value)} holds half of a UTF-16 surrogate pair "
                f"(\\u{ord(half.group()):04x}), which is no character", node.start_mark)
        return value

    def refuse_tag(self, node):
        tag = node.tag.replace("tag:yaml.org,2002:", "!!", 1)
        raise yaml.constructor.ConstructorError(
            None, None, f"the tag {shortened(tag)} is not accepted: a policy holds text, "
            "numbers, true/false, lists and mappings", node.start_mark)


def _construct_mapping(loader, node, deep=False):
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if not isinstance(key, (str, int, float, bool)) and key is not None:
            raise yaml.constructor.ConstructorError(
                None, None, "a key must be a plain word, not a list or mapping",
                key_node.start_mark)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {quoted(key)}", key_node.start_mark)
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep)


_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_StrictLoader.add_constructor("tag:yaml.org,2002:int", _StrictLoader.construct_yaml_int)
_StrictLoader.add_constructor("tag:yaml.org,2002:str", _StrictLoader.construct_yaml_str)
for _tag in ("binary", "timestamp", "omap", "pairs", "set"):
    _StrictLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _StrictLoader.refuse_tag)
_StrictLoader.add_constructor(None, _StrictLoader.refuse_tag)


def _place(text, index):
    """"line L, column C" of a character of text, as a YAML mark counts them."""
    breaks = list(_YAML_BREAK.finditer(text, 0, index))
    start = breaks[-1].end() if breaks else 0
    return f"line {len(breaks) + 1}, column {index - start + 1}"


def parse_yaml(text):
    """YAML text -> plain data. Malformed YAML is a SYNTAX error with line and column."""
    loader = None
    try:
        loader = _StrictLoader(text)
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown place"
        raise PolicyError(Code.SYNTAX, "", f"not valid YAML at {where}: {exc.problem}") from None
    except yaml.reader.ReaderError as exc:
        where = _place(text, exc.position) if isinstance(text, str) else f"byte {exc.position}"
        raise PolicyError(Code.SYNTAX, "", f"not valid YAML at {where}: the character "
                          f"#x{exc.character:04x} is not allowed") from None
    except yaml.YAMLError as exc:
        raise PolicyError(Code.SYNTAX, "", f"not valid YAML: {exc}") from None
    except RecursionError:
        raise PolicyError(Code.SYNTAX, "", "not valid YAML: nested too deeply") from None
    except (ValueError, TypeError, LookupError, AttributeError, ArithmeticError):
        # PyYAML's scanner failing on its own ("\U00110000"): where it stopped reading
        mark = loader.get_mark() if loader is not None else None
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise PolicyError(Code.SYNTAX, "", f"not valid YAML{where}: cannot be read here") \
            from None
    finally:
        if loader is not None:
            loader.dispose()
