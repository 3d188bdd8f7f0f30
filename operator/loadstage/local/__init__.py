"""The local engine's backend: the target and the Locust injectors as real processes on this machine,
each in its own process group."""
