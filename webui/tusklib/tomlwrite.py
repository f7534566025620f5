"""Writing TOML that Tusk's own files need (network.toml, ha.toml): tomllib only reads,
and the values are few - booleans, integers, strings and lists of them."""
import json


def toml_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    # A JSON string is a TOML basic string, but for DEL (U+007F), which TOML forbids raw
    # and JSON leaves so: the one character escaped here (the property test
    # tests/property/test_daemon_files_property.py reads every string back).
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
