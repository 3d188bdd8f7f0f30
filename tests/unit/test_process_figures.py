"""The machine's CPU per core between two readings (the EC2 study's "CPU usage of each core")."""

from collections import namedtuple

from loadstage.samplers.processes import cpu_per_core

Times = namedtuple("Times", "user nice system idle iowait irq softirq steal")


def test_each_cores_busy_share_between_two_readings_leaves_out_idle_and_iowait():
    before = [Times(100, 0, 50, 800, 50, 0, 0, 0), Times(10, 0, 10, 980, 0, 0, 0, 0)]
    after = [Times(160, 0, 70, 810, 60, 0, 0, 0), Times(10, 0, 10, 1080, 0, 0, 0, 0)]
    # core 0: 100 ticks, 20 of them idle or waiting: 80% busy; core 1: all 100 idle
    assert cpu_per_core(before, after) == (80.0, 0.0)
    assert cpu_per_core(before, before) == (0.0, 0.0)
