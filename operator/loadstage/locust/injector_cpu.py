"""An injector's own CPU, sampled often enough for a stage of a few seconds."""

import time

import gevent
import psutil

CPU_SAMPLE_SECONDS = 2.0
CPU_LAST_SAMPLE_SECONDS = 0.25   # the shortest tail of a stage worth a reading of its own


class CpuSampler:
    """This injector's CPU, over windows of CPU_SAMPLE_SECONDS, and once more over the stage's tail when it
    ends. (Locust's own reading comes every 10 s, and the first is always 0: a stage under 20 s would have
    none; a stage of a few hundred requests may end before the first window.)"""

    def __init__(self, recorder):
        self.recorder, self.process = recorder, psutil.Process()
        self.process.cpu_percent()
        self.since = time.monotonic()

    def sample(self, shortest: float = 0.0):
        if time.monotonic() - self.since >= shortest:
            self.recorder.note_cpu(self.process.cpu_percent())
            self.since = time.monotonic()

    def run(self):
        while True:
            gevent.sleep(CPU_SAMPLE_SECONDS)
            self.sample()
