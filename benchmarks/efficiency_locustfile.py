"""Benchmark users: the same trivial GET with Locust's two HTTP clients, no wait."""

from locust import FastHttpUser, HttpUser, constant, task


class FastProbe(FastHttpUser):
    wait_time = constant(0)

    @task
    def get(self):
        self.client.get("/")


class StockProbe(HttpUser):
    wait_time = constant(0)

    @task
    def get(self):
        self.client.get("/")
