"""python -m selftest.core: the self-test from the command line (the agent runs this in
the lab's client namespace, tests/bench/bench_middlebox.py as a library).

    measure --path through=10.10.2.2:8009 [--path direct=10.10.9.2:8009] [counts]
    control --client HOST:PORT --path through=HOST:PORT [--path direct=...] [counts]
    serve --port 8009 [--allow ADDR ...]          (responder.py's own command line)

measure and control print the table, or with --json-lines one JSON object per line:
{"progress": percent, "message": text} while it runs, then {"result": summary}.
Exit status 2: bad arguments (the message names the field); 1: the control request failed.
"""
import argparse
import json
import sys

from . import control, responder, stats, table


def _emit(obj):
    print(json.dumps(obj), flush=True)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["serve"]:
        return responder.main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m selftest.core",
                                     description="Tusk self-test (Allman, IMC 2003)")
    parser.add_argument("command", choices=("measure", "control"))
    parser.add_argument("--path", action="append", default=[], metavar="NAME=HOST:PORT")
    parser.add_argument("--client", metavar="HOST:PORT", help="control: the client host")
    for field, (_, _, default) in responder.LIMITS.items():
        parser.add_argument(f"--{field.replace('_', '-')}", dest=field,
                            type=type(default), default=default)
    parser.add_argument("--json-lines", action="store_true")
    args = parser.parse_args(argv)
    params = {field: getattr(args, field) for field in responder.LIMITS}

    def progress(percent, text):
        if args.json_lines:
            _emit({"progress": percent, "message": text})
    try:
        paths = []
        for spec in args.path:
            name, sep, where = spec.partition("=")
            if not sep:
                raise responder.ParamError([(f"--path {spec}", "expected NAME=HOST:PORT")])
            host, port = control.split_host_port(where, f"--path {spec}")
            paths.append({"name": name, "host": host, "port": port})
        checked = responder.check_params(params)
        path_list = responder.check_paths(paths)
        if args.command == "measure":
            raw = responder.Measurer(path_list, checked, progress=progress).run()
        else:
            if not args.client:
                raise responder.ParamError([("--client", "required for control")])
            raw = control.request(control.split_host_port(args.client, "--client"), paths,
                                  checked, progress=progress)
    except responder.ParamError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except control.ControlError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    summary = stats.summarise(raw)
    if args.json_lines:
        _emit({"result": summary})
    else:
        print(table.format_table(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
