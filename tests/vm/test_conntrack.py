"""conntrack fixes of Tusk's kernel that are not about sequence numbers, judged from
what the guest scenarios recorded."""
from saved import invalid_drops, load


def test_udplite_passes_with_conntrack_verifying_checksums(scenario):
    folder = scenario("conntrack-udplite")
    assert (folder / "checksum.txt").read_text().strip() == "1"
    results = load(folder, "results.json")
    assert {(r["family"], r["coverage"]) for r in results} == {
        (family, coverage) for family in ("v4", "v6") for coverage in ("full", "partial")}
    for record in results:
        assert record["received"] == record["sent"] == record["echoed"], record
    assert invalid_drops(folder) == 0
