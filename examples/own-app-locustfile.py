"""Users of httpbin: three reads for every write."""

from locust import HttpUser, task


class HttpbinUser(HttpUser):
    @task(3)
    def read(self):
        self.client.get("/get")

    @task
    def write(self):
        self.client.post("/post", json={"answer": 42})
