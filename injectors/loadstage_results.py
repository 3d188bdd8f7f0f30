"""loadstage's Locust extension, loaded with -f beside every scenario: its code is loadstage.locust.extension,
inside the package's import contracts; importing it registers its options and event listeners."""

from loadstage.locust.extension import *  # noqa: F403
