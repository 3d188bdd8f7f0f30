"""The built-in scenario `hello`: GET /hello, one request per task (the uWSGI-vs-gunicorn study's "hello")."""

from locust import FastHttpUser, task


class Hello(FastHttpUser):
    @task
    def hello(self):
        self.client.get("/hello", name="/hello")
