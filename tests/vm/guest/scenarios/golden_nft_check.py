"""golden-nft-check: every tests/golden/*/expected.nft through `nft -c -f` with the
guest's nft on Tusk's kernel, each in a fresh network namespace.

The namespace has the interfaces the case's flowtables name (veth pairs under those
names): Linux 6.12 refuses a flowtable over a device that does not exist, as a real
firewall would never have one. The hardware flowtable's interfaces are netdevsim
ports (Tusk's test kernel lets them take flowtable offload; a veth's driver refuses
"flags offload"). Saves results.json: case -> exit status, nft's stderr. The scenario
passes when every case was checked; whether nft accepted each is what
tests/vm/test_vm_golden.py asserts.
"""
from pathlib import Path

from lab.namespaces import Topology
from policy.core.fastpath import fastpath_devices
from policy.core.normalise import load_policy_file

TIME_LIMIT = 300
GOLDEN = Path(__file__).resolve().parents[3] / "golden"
NAMESPACE = "golden"


def run(ctx):
    results = {}
    for case in sorted(d.name for d in GOLDEN.iterdir() if (d / "expected.nft").is_file()):
        ctx.run("ip", "netns", "add", NAMESPACE)
        ports = Topology(links="netdevsim")
        try:
            policy = load_policy_file(GOLDEN / case / "policy.yaml")
            hardware = fastpath_devices(policy, hardware=True)
            devices = sorted(set(fastpath_devices(policy)) - set(hardware))
            for index, device in enumerate(devices):
                ctx.run("ip", "link", "add", device, "type", "veth", "peer", "name",
                        f"peer{index}", ns=NAMESPACE)
            for device in hardware:
                ports.netdevsim_port(NAMESPACE, device)
            checked = ctx.run("nft", "-c", "-f", str(GOLDEN / case / "expected.nft"),
                              ns=NAMESPACE, check=False)
            results[case] = {"returncode": checked.returncode, "stderr": checked.stderr,
                             "devices": devices, "hardware": hardware}
        finally:
            ports.down()
            ctx.run("ip", "netns", "delete", NAMESPACE)
    ctx.save_json("results.json", results)
