"""Every golden ruleset (tests/golden/*/expected.nft) is accepted by `nft -c` in the
VM: the guest's nft 1.1.3 on Tusk's kernel, which has the seqrand helpers and
flowtables that the host kernel refuses (tests/golden checks those refusals)."""
import json
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent.parent / "golden"


def test_every_golden_ruleset_passes_nft_check_on_tusks_kernel(scenario):
    results = json.loads((scenario("golden-nft-check") / "results.json").read_text())
    cases = sorted(d.name for d in GOLDEN.iterdir() if (d / "expected.nft").is_file())
    assert sorted(results) == cases
    refused = {case: r["stderr"] for case, r in results.items() if r["returncode"] != 0}
    assert not refused, refused
