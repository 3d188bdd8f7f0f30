# One image build, three targets, all running the command lines the local engine runs:
#   docker build --target runner-app -t loadstage/runner-app:0.1.0 .
#   docker build --target injector   -t loadstage/injector:0.1.0 .
#   docker build --target operator   -t loadstage/operator:0.1.0 .
# and a fourth for the tests: example-app, a team's own image of an app this project did not write.
# PYTHON_IMAGE is any Debian-based image with Python 3.11 and its venv module: the official
# python:3.11-slim-bookworm by default; the real-node tests use one built from Debian's packages.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm
FROM ${PYTHON_IMAGE} AS base
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/loadstage/venv PATH=/opt/loadstage/venv/bin:$PATH
RUN groupadd --gid 10001 loadstage \
 && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin loadstage
WORKDIR /opt/loadstage
# The pinned dependencies first, in a layer of their own that code changes do not invalidate.
COPY pyproject.toml ./
RUN python3 -m venv "$VIRTUAL_ENV" \
 && python3 -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' \
      > /tmp/requirements.txt \
 && pip install --no-cache-dir -r /tmp/requirements.txt \
 && rm /tmp/requirements.txt
COPY README.md ./
COPY operator ./operator
COPY runner-app ./runner-app
RUN pip install --no-cache-dir --no-deps . && rm -rf operator runner-app build
COPY injectors ./injectors
USER 10001:10001

# The system under test. The operator passes the server's whole command line as args
# (loadstage.engine.argv: gunicorn, uwsgi, waitress-serve, cheroot or granian); this CMD is gunicorn's default.
FROM base AS runner-app
ENV PROMETHEUS_MULTIPROC_DIR=/tmp/metrics
EXPOSE 8000
CMD ["gunicorn", "--config", "python:runner_app.gunicorn_conf", "runner_app.app:app"]

# Locust master or worker; the operator passes the arguments (loadstage.engine.argv).
FROM base AS injector
EXPOSE 5557
ENTRYPOINT []
CMD ["locust", "--help"]

FROM base AS operator
CMD ["loadstage", "operator", "--all-namespaces"]

# A team's own image, for the real-node tests of an existing Deployment as the target: httpbin, an app this
# project did not write, from PyPI (tests/apps/httpbin.txt; Flask and gunicorn come from the base), served
# by gunicorn on 8080 with flags of its own.
FROM base AS example-app
USER root
COPY tests/apps/httpbin.txt /tmp/httpbin.txt
RUN pip install --no-cache-dir --no-deps -r /tmp/httpbin.txt && rm /tmp/httpbin.txt
USER 10001:10001
EXPOSE 8080
CMD ["gunicorn", "--bind", "0.0.0.0:8080", "--workers", "2", "httpbin:app"]
