"""The built-in scenario: a respondent walks the questionnaire, one request per task.

POST /surveys starts a session and is redirected (303) to page 1; each page is a
GET, then a POST of the answer that redirects to the next page, until done.
Redirects are not followed automatically, so every GET and POST is measured alone.
The wait between tasks comes from the experiment's waitTime."""

import random

from locust import FastHttpUser, task

ANSWERS = ["yes", "no", "sometimes", "a friend told me", "the search page", "faster pages"]


class Respondent(FastHttpUser):
    location = None
    answering = False

    def _follow(self, response):
        location = response.headers.get("Location") if response.status_code == 303 else None
        if location and location.startswith("http"):
            location = "/" + location.split("/", 3)[3]
        self.location, self.answering = location, False

    @task
    def step(self):
        if self.location is None:
            with self.client.post("/surveys", name="/surveys", allow_redirects=False,
                                  catch_response=True) as response:
                self._check_redirect(response)
        elif self.location.endswith("/done"):
            self.client.get(self.location, name="/surveys/[sid]/done")
            self.location = None
        elif not self.answering:
            response = self.client.get(self.location, name="/surveys/[sid]/pages/[n]")
            self.answering = response.status_code == 200
            if not self.answering:
                self.location = None
        else:
            with self.client.post(self.location, name="/surveys/[sid]/pages/[n]",
                                  data={"answer": random.choice(ANSWERS)}, allow_redirects=False,
                                  catch_response=True) as response:
                self._check_redirect(response)

    def _check_redirect(self, response):
        if response.status_code == 303:
            response.success()
            self._follow(response)
        else:
            response.failure(f"expected a 303 redirect, got {response.status_code}")
            self.location, self.answering = None, False
