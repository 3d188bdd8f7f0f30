"""The built-in scenario `readbody`: POST /readbody with a 70 KB body, which the app echoes (the
uWSGI-vs-gunicorn study's "readbody"). A response that is not the body sent fails."""

from locust import FastHttpUser, task

BODY = bytes(range(256)) * (70 * 1024 // 256)   # 70 KiB


class ReadBody(FastHttpUser):
    @task
    def readbody(self):
        with self.client.post("/readbody", name="/readbody", data=BODY, catch_response=True,
                              headers={"Content-Type": "application/octet-stream"}) as response:
            if response.content != BODY:
                response.failure(f"echoed {len(response.content or b'')} bytes of {len(BODY)}")
