"""Raw counters as the agent read them; rates are differences of consecutive samples,
computed when shown. Kept for RETENTION seconds."""
from django.db import models

RETENTION = 3600


class Sample(models.Model):
    """One reading of the box's counters by the agent (dashboard/sampler.py)."""

    taken = models.DateTimeField(db_index=True)
    # {ifname: {rx_bytes, tx_bytes, rx_packets, tx_packets, rx_dropped, tx_dropped,
    #           rx_errors, tx_errors, operstate}}
    interfaces = models.JSONField(default=dict)
    conntrack_count = models.BigIntegerField(null=True)
    conntrack_max = models.BigIntegerField(null=True)
    # {cpu index: [jiffies in softirq, jiffies in all]} from /proc/stat
    softirqs = models.JSONField(default=dict)
    # /proc/net/nf_conntrack_seqadj (Tusk's kernel) or null when the kernel has none
    seqadj = models.JSONField(null=True)
    # the loss path's counters (loss.py): {"<stage>" or "<stage>@<interface>": count};
    # null in samples taken before it was read
    loss = models.JSONField(null=True)

    class Meta:
        ordering = ["-taken"]

    def __str__(self):
        return f"sample of {self.taken:%Y-%m-%d %H:%M:%S}"
