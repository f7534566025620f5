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
    return json.dumps(value, ensure_ascii=False)   # a JSON string is a TOML basic string
