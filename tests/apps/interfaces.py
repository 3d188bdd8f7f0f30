"""Two apps of one's own, one per interface, for the test that a mismatch is refused before a local run."""


def wsgi_app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"wsgi"]


async def asgi_app(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"asgi"})


class OpaqueWsgiApp:
    """A WSGI app whose call's signature says neither interface (*args): left to the run, whose log tells."""

    def __call__(self, *args):
        return wsgi_app(*args)


opaque_wsgi_app = OpaqueWsgiApp()
