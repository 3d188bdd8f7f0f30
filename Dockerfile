# One image build, three targets, all running the command lines the local engine runs:
#   docker build --target runner-app -t loadstage/runner-app:0.1.0 .
#   docker build --target injector   -t loadstage/injector:0.1.0 .
#   docker build --target operator   -t loadstage/operator:0.1.0 .
# and a fourth for the tests: example-app, a team's own image of an app this project did not write.
# PYTHON_IMAGE is any Debian-based image with Python 3.11 and its venv module: the official
# python:3.11-slim-bookworm by default; the real-node tests use one built from Debian's packages.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm
# The C extensions PyPI has no wheel of (bjoern, mod_wsgi, meinheld), built here: their compilers and headers
# stay in this stage.
FROM ${PYTHON_IMAGE} AS wheels
RUN apt-get update -qq \
 && include=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])') \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gcc libc6-dev libev-dev apache2-dev \
      $([ -f "$include/Python.h" ] || echo python3-dev) >/dev/null \
 && rm -rf /var/lib/apt/lists/*
COPY pyproject.toml requirements-nodeps.txt /tmp/
# meinheld builds against greenlet's headers (Locust's greenlet, the one it runs with), not its own old pin
RUN python3 -m venv /tmp/build \
 && pin() { grep -oE "\"$1==[^\"]*\"" /tmp/pyproject.toml | tr -d '"'; } \
 && /tmp/build/bin/pip install -q --no-cache-dir "$(pin greenlet)" setuptools wheel \
 && /tmp/build/bin/pip wheel -q --no-cache-dir --no-deps -w /wheels "$(pin bjoern)" "$(pin mod_wsgi)" \
 && /tmp/build/bin/pip wheel -q --no-cache-dir --no-deps --no-build-isolation -w /wheels -r /tmp/requirements-nodeps.txt

FROM ${PYTHON_IMAGE} AS base
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/loadstage/venv PATH=/opt/loadstage/venv/bin:$PATH
RUN groupadd --gid 10001 loadstage \
 && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin loadstage
WORKDIR /opt/loadstage
# The pinned dependencies first, in a layer of their own that code changes do not invalidate.
COPY pyproject.toml requirements-nodeps.txt ./
COPY --from=wheels /wheels /tmp/wheels
RUN python3 -m venv "$VIRTUAL_ENV" \
 && python3 -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' \
      > /tmp/requirements.txt \
 && pip install --no-cache-dir --find-links /tmp/wheels --prefer-binary -r /tmp/requirements.txt \
 && pip install --no-cache-dir --no-deps --no-index --find-links /tmp/wheels -r requirements-nodeps.txt \
 && rm -rf /tmp/requirements.txt /tmp/wheels
# pyproject's readme: a stand-in, so that an edit of the README rebuilds no image
RUN echo "loadstage: see the project's README.md" > README.md
COPY operator ./operator
COPY runner-app ./runner-app
RUN pip install --no-cache-dir --no-deps . && rm -rf operator runner-app build
COPY injectors ./injectors
USER 10001:10001

# The system under test. The operator passes the server's whole command line as args
# (loadstage.launch.argv: gunicorn, uwsgi, waitress-serve, cheroot, granian, loadstage-prefork for bjoern,
# meinheld and flup, mod_wsgi-express); this CMD is gunicorn's default. bjoern needs libev at run time, mod_wsgi
# Apache. The front proxy's sidecar runs this image too (loadstage-proxy): nginx, or Apache's mod_proxy.
FROM base AS runner-app
USER root
# mod_wsgi's module links libpython: Debian's Python ships it apart (the official image has it in /usr/local/lib)
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libev4 apache2-bin nginx \
      $(ldconfig -p | grep -q "libpython3.11.so.1.0" || echo libpython3.11) >/dev/null \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt /var/log/dpkg.log
USER 10001:10001
ENV PROMETHEUS_MULTIPROC_DIR=/tmp/metrics
EXPOSE 8000
CMD ["gunicorn", "--config", "python:runner_app.gunicorn_conf", "runner_app.app:app"]

# Locust master or worker; the operator passes the arguments (loadstage.launch.argv).
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
