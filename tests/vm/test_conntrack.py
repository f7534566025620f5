"""conntrack fixes of Tusk's kernel that are not about sequence numbers, judged from
what the guest scenarios recorded."""
import json


def test_udplite_passes_with_conntrack_verifying_checksums(scenario):
    folder = scenario("conntrack-udplite")
    assert (folder / "checksum.txt").read_text().strip() == "1"
    results = json.loads((folder / "results.json").read_text())
    assert {(r["family"], r["coverage"]) for r in results} == {
        (family, coverage) for family in ("v4", "v6") for coverage in ("full", "partial")}
    for record in results:
        assert record["received"] == record["sent"] == record["echoed"], record
    counters = json.loads((folder / "after-nft-counters.json").read_text())["nftables"]
    invalid = next(c["counter"]["packets"] for c in counters
                   if "counter" in c and c["counter"]["name"] == "invalid")
    assert invalid == 0
