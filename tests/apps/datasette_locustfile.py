"""Readers of a datasette table: a page of rows, and one row, as JSON."""

import random

from locust import HttpUser, task

ROWS = 200


class Reader(HttpUser):
    @task(3)
    def page(self):
        self.client.get("/items/items.json?_size=20", name="/items/items.json")

    @task(1)
    def row(self):
        self.client.get(f"/items/items/{random.randint(1, ROWS)}.json", name="/items/items/[id].json")
