"""Update bundles on their way from the System page into the other system slot (plain
Python: the web view, the agent job and the tests use it; docs/UPGRADES.md).

    upgrade_dir/incoming-<16 hex>.raucb   the web process receives an upload here
    upgrade_dir/bundle-<job id>.raucb     ... and renames it for its job
    upgrade_spool_dir/bundle-<job id>.raucb   the agent's own copy (root only), which
                                          RAUC checks and installs

The web user can write upgrade_dir (its group, 2770), so the agent takes nothing from
there but through diag.files.Directory (no link followed, a regular file linked
nowhere else), copies it into its spool and works on the copy only. Which file belongs
to a job comes from the job's id, never from the row's arguments.
"""
import configparser
import json
import os
import re
import subprocess

SUFFIX = ".raucb"
INCOMING = re.compile(r"incoming-[0-9a-f]{16}\.raucb")
NAME_LIMIT = 100
# `rauc install`'s progress lines: "  40% Copying image to rootfs.1"
PROGRESS = re.compile(r"^\s*(\d{1,3})%\s+(.*\S)\s*$")


class BundleRefused(Exception):
    """What RAUC or Tusk refused, in words for the System page."""


def upload_name(pk):
    return f"bundle-{int(pk)}{SUFFIX}"


def display_name(name):
    """The uploaded file's name as shown and audited: one component, safe characters."""
    cleaned = re.sub(r"[^A-Za-z0-9._+~-]", "_", os.path.basename(str(name)))[:NAME_LIMIT]
    return cleaned or "bundle"


def name_problem(value):
    """Why a job's name argument is not what display_name() makes (None: it is)."""
    if not isinstance(value, str) or not value or display_name(value) != value:
        return "not a file name the upload form makes"
    return None


def rauc_settings(path):
    """(compatible, keyring path) of RAUC's system.conf at path."""
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        with open(path, encoding="utf-8") as handle:
            parser.read_file(handle)
        compatible = parser.get("system", "compatible")
        keyring = parser.get("keyring", "path", fallback="")
    except (OSError, configparser.Error) as error:
        raise BundleRefused(f"RAUC's configuration {path} cannot be read ({error}): this "
                            "system cannot be upgraded") from None
    if keyring and not os.path.isabs(keyring):
        keyring = os.path.join(os.path.dirname(path), keyring)
    return compatible.strip(), keyring


# what RAUC says on its way, not why it stopped
CHATTER = re.compile(r"^(Reading bundle|Verifying bundle|Verified |Using |Checking |Config option |"
                     r"Mounting |Unmounting |Determining |\s*\d{1,3}%)")


def rauc_error(output):
    """RAUC's reason, without its log prefixes and progress chatter."""
    lines = [re.sub(r"^rauc-(Message|Warning|Critical|Error|Debug|Info)?:?\s*[\d:.]*:?\s*",
                    "", line).strip() for line in output.splitlines()]
    lines = [line for line in lines if line and not CHATTER.match(line)]
    return " ".join(lines[-2:])[:500] or "no reason given"


def check(path, rauc_conf, run=subprocess.run):
    """RAUC's own check of the bundle at path - its signature against this box's keyring,
    its format - and its compatible against this box's -> {"version", "compatible"}.
    BundleRefused says why not; nothing is written either way."""
    compatible, keyring = rauc_settings(rauc_conf)
    argv = ["rauc", "info", f"--conf={rauc_conf}", "--output-format=json", str(path)]
    if keyring:
        argv.insert(2, f"--keyring={keyring}")
    result = run(argv, capture_output=True, text=True)
    if result.returncode != 0:
        raise BundleRefused(f"RAUC refused the bundle: {rauc_error(result.stderr)}")
    try:
        info = json.loads(result.stdout)
    except ValueError:
        raise BundleRefused("RAUC's description of the bundle is not JSON") from None
    theirs = str(info.get("compatible", ""))
    if theirs != compatible:
        raise BundleRefused(f"the bundle is for compatible '{theirs}', this box is "
                            f"'{compatible}'")
    return {"version": str(info.get("version", "")), "compatible": theirs}


def install(path, progress, popen=subprocess.Popen):
    """rauc install path (into the slot that did not boot: RAUC's service does it, with
    the box's system.conf); progress(percent, line) for each of RAUC's progress lines.
    BundleRefused with RAUC's reason if it fails."""
    process = popen(["rauc", "install", str(path)],
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    said = []
    for line in process.stdout:
        said.append(line)
        match = PROGRESS.match(line)
        if match:
            progress(min(int(match.group(1)), 100), match.group(2))
    if process.wait() != 0:
        raise BundleRefused(f"RAUC did not install the bundle: {rauc_error(''.join(said))}")
