"""datasette as an ASGI app, the way its documentation deploys it under an ASGI server: one SQLite file
(DATASETTE_DB), served read-only."""

import os

from datasette.app import Datasette

app = Datasette(immutables=[os.environ["DATASETTE_DB"]]).app()
