"""The dashboard sampler's parsing of what the kernel prints."""
from dashboard import sampler

# /proc/net/nf_conntrack_seqadj as kernel-patches/ print it ("%s %llu\n" per counter)
SEQADJ = """sack_blocks_translated 1200
tcp_options_malformed 3
icmp_quotes_translated 7
icmp_quotes_dropped 1
flowtable_packets_translated 90
seqrand_initiator_randomised 42
seqrand_responder_randomised 40
seqrand_skipped_midstream 1
seqrand_skipped_synproxy 0
seqrand_skipped_signed 2
seqrand_dropped_nomem 0
"""


def test_seqadj_counters():
    counters = sampler.seqadj(SEQADJ)
    assert counters["sack_blocks_translated"] == 1200
    assert counters["seqrand_initiator_randomised"] == 42 and len(counters) == 11
    assert counters["seqrand_skipped_signed"] == 2


def test_no_seqadj_file_means_no_counters():
    assert sampler.seqadj(None) is None


def test_softirq_time_per_cpu(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text("cpu  10 0 20 300 4 5 60 0 0 0\n"
                    "cpu0 5 0 10 150 2 2 30 0 0 0\n"
                    "cpu1 5 0 10 150 2 3 30 0 0 0\n"
                    "intr 12345\n")
    assert sampler.softirqs(str(stat)) == {"0": [30, 199], "1": [30, 200]}
