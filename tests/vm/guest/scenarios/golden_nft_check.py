"""golden-nft-check: every tests/golden/*/expected.nft through `nft -c -f` with the
guest's nft on Tusk's kernel, each in a fresh network namespace.

The namespace has the interfaces the case's flowtable names (veth pairs under those
names): Linux 6.12 refuses a flowtable over a device that does not exist, as a real
firewall would never have one. Saves results.json: case -> exit status, nft's
stderr. The scenario passes when every case was checked; whether nft accepted each
is what tests/vm/test_vm_golden.py asserts.
"""
from pathlib import Path

from policy.core.normalise import load_policy_file
from policy.core.render import fastpath_devices

TIME_LIMIT = 300
GOLDEN = Path(__file__).resolve().parents[3] / "golden"
NAMESPACE = "golden"


def run(ctx):
    results = {}
    for case in sorted(d.name for d in GOLDEN.iterdir() if (d / "expected.nft").is_file()):
        ctx.run("ip", "netns", "add", NAMESPACE)
        try:
            devices = fastpath_devices(load_policy_file(GOLDEN / case / "policy.yaml"))
            for index, device in enumerate(devices):
                ctx.run("ip", "link", "add", device, "type", "veth", "peer", "name",
                        f"peer{index}", ns=NAMESPACE)
            checked = ctx.run("nft", "-c", "-f", str(GOLDEN / case / "expected.nft"),
                              ns=NAMESPACE, check=False)
            results[case] = {"returncode": checked.returncode, "stderr": checked.stderr,
                             "devices": devices}
        finally:
            ctx.run("ip", "netns", "delete", NAMESPACE)
    ctx.save_json("results.json", results)
