# syntax=docker/dockerfile:1
# The dispatcher's image: `docker build -t kueue-dispatcher:dev .`
#
# Two stages. The builder turns the project and every runtime dependency into wheels (no compilers or
# test tools reach the final image); the final stage installs those wheels only, offline, and runs as an
# unprivileged user. The configuration is mounted at /etc/dispatcher/clusters.yaml (deploy/ puts it there
# from a ConfigMap); /var/lib/dispatcher is the working directory, where the default SQLite database lives.

ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# What the wheel is built from (see .dockerignore, which lets nothing else into the build context).
COPY pyproject.toml README.md ./
COPY dispatcher/ ./dispatcher/
COPY kubesim/ ./kubesim/
COPY kubecommon/ ./kubecommon/
COPY migrations/ ./migrations/
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="kueue-dispatcher" \
      org.opencontainers.image.description="Multi-cluster dispatcher for Kubernetes batch and AI workloads" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# The wheels are bind-mounted from the builder, so they never become a layer of this image.
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links=/wheels /wheels/kueue_dispatcher-*.whl \
 && groupadd --system --gid 10001 dispatcher \
 && useradd --system --uid 10001 --gid dispatcher --no-create-home --home-dir /var/lib/dispatcher \
      --shell /usr/sbin/nologin dispatcher \
 && install -d -o 10001 -g 10001 -m 0750 /var/lib/dispatcher \
 && install -d -m 0755 /etc/dispatcher
WORKDIR /var/lib/dispatcher
# Numeric, so that Kubernetes' runAsNonRoot can verify it without reading /etc/passwd.
USER 10001:10001
EXPOSE 8080
# The dispatcher's own /healthz on its HTTP port (slim images have no curl: Python's urllib does it;
# urlopen raises on a refused connection, a timeout or any HTTP error status, which exits non-zero).
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=4)"]
ENTRYPOINT ["dispatcher"]
CMD ["run", "--config", "/etc/dispatcher/clusters.yaml"]
