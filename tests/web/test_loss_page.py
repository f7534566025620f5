"""The Loss page and the dashboard's loss panel (dashboard/loss.py, metrics/views.py), from
statistics samples as the agent stores them - and as the web user's role could forge
them: what is no stage, no interface or no number is left out, names are escaped."""
from datetime import timedelta

from django.utils import timezone

from dashboard.models import Sample
from policy.models import CounterReading

EVIL = "<script>x</script>"


def sample(seconds_ago, counted):
    return Sample.objects.create(taken=timezone.now() - timedelta(seconds=seconds_ago),
                                 interfaces={}, softirqs={}, loss=counted)


def test_no_samples_yet(viewer_client):
    page = viewer_client.get("/loss/").content.decode()
    assert 'id="loss-unsampled"' in page
    assert "No samples of the loss path yet" in viewer_client.get(
        "/dashboard/live/").content.decode()


def test_a_stage_losing_now_is_marked_with_what_to_do(viewer_client):
    sample(3700, {"nic.rx_missed@eth1": 0})                # older than the page's hour
    sample(20, {"nic.rx_missed@eth1": 100, "softnet.dropped": 4, "conntrack.invalid": 7,
                f"nic.rx_crc@{EVIL}": 1, "qdisc.drops@eth2": 9})
    sample(10, {"nic.rx_missed@eth1": 150, "softnet.dropped": 4, "conntrack.invalid": 9,
                f"nic.rx_crc@{EVIL}": 1, "qdisc.drops@eth2": 9, "bogus@eth1": 5,
                "conntrack.drop": "99", "softnet.flow_limit": 1e300})
    CounterReading.objects.create(pk=1, read_at=timezone.now(), observed_since=timezone.now(),
                                  table_loaded=True, counters={
                                      "default_deny": [12, 900, timezone.now().timestamp()],
                                      "invalid": ["<b>", 1, None]})
    response = viewer_client.get("/loss/")
    assert response.status_code == 200
    page = response.content.decode()
    assert 'id="loss-alarms"' in page and "NIC: missed, no receive buffer on eth1</strong>" in page
    row = page.split('data-stage="nic.rx_missed@eth1" class="bad">')[1].split("</tr>")[0]
    assert "losing" in row and ">150<" in row and "5" in row   # 50 in 10 s
    assert "larger rings" in row and 'href="/tuning/"' in row
    # invalid grew but is no alarm; softnet did not grow within the samples
    invalid = page.split('data-stage="conntrack.invalid">')[1].split("</tr>")[0]
    assert "losing" not in invalid
    dropped = page.split('data-stage="softnet.dropped">')[1].split("</tr>")[0]
    assert "not within the hour" in dropped
    # forged: escaped, or left out
    assert EVIL not in page and "&lt;script&gt;" in page
    for key in ("bogus@eth1", "conntrack.drop", "softnet.flow_limit"):
        assert f'data-stage="{key}"' not in page, key
    assert 'data-reason="default_deny"' in page and 'data-reason="invalid"' not in page
    # in the stage order: the NIC first, the transmit queue last
    assert page.index('data-stage="nic.rx_crc') < page.index('data-stage="softnet.dropped"') \
        < page.index('data-stage="qdisc.drops@eth2"')
    live = viewer_client.get("/dashboard/live/").content.decode()
    panel = live.split('id="loss-panel"')[1].split("</div>")[0]
    assert "Losing packets" in panel and "NIC: missed, no receive buffer" in panel
    assert 'href="/loss/"' in panel


def test_nothing_lost_says_so(viewer_client):
    sample(20, {"nic.rx_missed@eth1": 3})
    sample(10, {"nic.rx_missed@eth1": 3})
    live = viewer_client.get("/dashboard/live/").content.decode()
    assert "No loss at any stage that should stay at zero" in live
    assert 'id="loss-alarms"' not in viewer_client.get("/loss/").content.decode()


def test_the_health_panel_says_when_packets_are_lost(viewer_client):
    def check():
        page = viewer_client.get("/dashboard/health/").content.decode()
        return page.split('data-check="packet loss"')[1].split("</tr>")[0]
    assert "no samples of the loss path yet" in check()
    sample(20, {"softnet.dropped": 3, f"nic.rx_crc@{EVIL}": 0})
    sample(10, {"softnet.dropped": 3, f"nic.rx_crc@{EVIL}": 0})
    assert "no stage that should stay at zero grew" in check()
    sample(5, {"softnet.dropped": 9, f"nic.rx_crc@{EVIL}": 2})
    row = check()
    assert '<span class="badge bad">failing</span>' in row, row
    assert "Softnet: backlog full (9): see the Loss page" in row, row
    assert "losing at NIC: frames with a bad CRC on &lt;script&gt;" in row and EVIL not in row
