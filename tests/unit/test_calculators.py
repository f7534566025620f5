"""The tools page's arithmetic."""
import pytest

from dashboard import calculators as calc


def test_bdp_of_a_10g_path_at_50_ms():
    assert calc.bdp_bytes(10e9, 0.050) == pytest.approx(62.5e6)


@pytest.mark.parametrize("window,shift", [(65535, 0), (65536, 1), (131070, 1), (131071, 2),
                                          (62.5e6, 10), (65535 * 2 ** 14, 14),
                                          (65535 * 2 ** 14 + 1, None)])
def test_window_scale_shift(window, shift):
    assert calc.window_shift(window) == shift


def test_an_unscaled_window_caps_a_flow_at_a_few_megabits_over_a_wan():
    # the FWSM story: strip window scaling and a 64 KiB window over 50 ms gives ~10 Mbit/s
    assert calc.window_cap_bps(65535, 0.050) == pytest.approx(10.49e6, rel=1e-3)


@pytest.mark.parametrize("generation,lanes,gbps", [(1, 1, 2.0), (2, 4, 16.0), (3, 8, 63.015),
                                                    (4, 16, 252.06)])
def test_pcie_slot_bandwidth(generation, lanes, gbps):
    # the BSD tuning notes: v3 x8 = 7.8 GB/s, v4 x16 = 31.5 GB/s per direction
    assert calc.pcie_bps(generation, lanes) / 1e9 == pytest.approx(gbps, rel=1e-3)
