# PQS service image. The base is an argument: any Debian-like image with Python >= 3.11 and venv
# (the image test builds it on a debootstrapped Debian bookworm, no registry needed).
# Run with -e PQS_DATABASE_URL=postgresql://... (else the embedded server, in the data volume).
ARG BASE=python:3.11-slim
FROM ${BASE}
WORKDIR /srv/pqs
COPY pyproject.toml README.md alembic.ini ./
COPY alembic ./alembic
COPY app ./app
# A virtual environment: Debian's own python3 refuses installs into the system (PEP 668).
# Editable install: the migrations (alembic/) are found next to the app package.
# The embedded PostgreSQL refuses to run as root, and the service needs no root anyway.
RUN python3 -m venv /opt/pqs \
 && /opt/pqs/bin/pip install --no-cache-dir -e . \
 && useradd --no-log-init --system --uid 10001 --home-dir /var/lib/pqs --create-home pqs
# PQS_DATA_DIR holds the admin and SQS server keys (and the embedded database, if used).
# Migrating is a step of its own (`pqs migrate`), not every replica's start.
ENV PATH=/opt/pqs/bin:$PATH \
    PQS_HOST=0.0.0.0 \
    PQS_PORT=8000 \
    PQS_DATA_DIR=/var/lib/pqs \
    PQS_MIGRATE_ON_START=false
USER 10001
VOLUME /var/lib/pqs
EXPOSE 8000
# No curl in a slim image: Python's urllib, which fails on anything but a 2xx.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python3", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/readyz' % os.environ.get('PQS_PORT', '8000'), timeout=4)"]
CMD ["pqs", "serve"]
