"""The appliance's side of a hardware self-test: a control request to the responder on
the client host, which measures the paths to the server host and answers with its raw
samples (responder.py, CTRL)."""
import json
import socket

from .responder import HEADER_MAX, ParamError, Reader, check_params, check_paths

CONNECT_TIMEOUT = 10
SLACK = 60   # seconds beyond max_seconds that the answer may take


class ControlError(Exception):
    pass


def _digits(text):
    """A short run of ASCII digits: "²".isdigit() is true too, and int() refuses it."""
    return text.isascii() and text.isdigit() and len(text) <= 18


def split_host_port(text, field="path"):
    """"host:port" or "[v6]:port" -> (host, port)."""
    host, sep, port = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not _digits(port) or not 0 < int(port) < 65536:
        raise ParamError([(field, f"{text!r} is not HOST:PORT")])
    return host, int(port)


def request(client, paths, params, progress=None):
    """client (host, port): the raw result its responder measured over paths."""
    params = check_params(params)
    check_paths(paths)
    body = json.dumps({"paths": paths, "params": params}).encode()
    try:
        sock = socket.create_connection(client, timeout=CONNECT_TIMEOUT)
    except OSError as exc:
        raise ControlError(f"cannot reach the client host's responder at {client[0]} port "
                           f"{client[1]}: {exc.strerror or exc}") from None
    with sock:
        sock.settimeout(params["max_seconds"] + SLACK)
        try:
            sock.sendall(f"CTRL {len(body)}\n".encode() + body)
            reader = Reader(sock)
            while True:
                line = reader.line(HEADER_MAX)
                kind, _, rest = line.partition(" ")
                if kind == "PROGRESS" and progress:
                    percent, _, text = rest.partition(" ")
                    progress(int(percent) if _digits(percent) else 0, text)
                elif kind == "OK" and _digits(rest):
                    return json.loads(reader.exactly(int(rest)))
                elif kind == "ERR":
                    raise ControlError(f"the client host's responder refused: {rest}")
                elif kind != "PROGRESS":
                    raise ControlError(f"the client host's responder answered {line[:80]!r}")
        except EOFError:
            raise ControlError("the client host's responder closed the connection") from None
        except OSError as exc:
            raise ControlError(f"control connection to {client[0]} port {client[1]}: "
                               f"{exc.strerror or exc}") from None
