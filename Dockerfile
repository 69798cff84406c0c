# syntax=docker/dockerfile:1
# poolguard: admission webhook, reconciler and tools in one image.
#   docker build -t poolguard:0.1.0 .        (or: make image)
# The builder installs the package and its dependencies into a virtualenv at /opt/venv;
# the final image is python:3.11-slim plus that virtualenv, run as uid 10001.

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
# No pip, setuptools or wheel inside the virtualenv: the builder's own pip installs into
# it (`pip --python`), so the final image carries only what poolguard needs to run.
RUN python -m venv --without-pip /opt/venv
WORKDIR /src
COPY pyproject.toml ./
COPY certs/ certs/
# webhook/data is a symlink to ../examples (the built-in policy and state): copy both so
# it resolves when the wheel is built. The check below (-I: not from /src) proves the
# installed package carries the data.
COPY webhook/ webhook/
COPY examples/ examples/
RUN pip --python /opt/venv/bin/python install --no-cache-dir . \
    && /opt/venv/bin/python -I -c "import webhook.cluster.state as s; assert s.EXAMPLE_POLICY.is_file()"

FROM ${PYTHON_IMAGE}
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="poolguard" \
      org.opencontainers.image.description="Kubernetes admission webhook that keeps GPU inference replicas on the inference pool when workloads scale down" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.base.name="python:3.11-slim"
RUN groupadd --system --gid 10001 poolguard \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin poolguard
COPY --from=builder /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# An empty working directory: `python -m webhook` imports the installed package, never
# stray files from the current directory.
WORKDIR /app
USER 10001:10001
EXPOSE 8443 9090
ENTRYPOINT ["python", "-m", "webhook"]
CMD ["serve", "--help"]
