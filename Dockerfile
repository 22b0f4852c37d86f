# PQS service image. Needs an external PostgreSQL: run with -e PQS_DATABASE_URL=postgresql://...
FROM python:3.11-slim
WORKDIR /srv/pqs
COPY pyproject.toml README.md alembic.ini ./
COPY alembic ./alembic
COPY app ./app
# Editable install: the migrations (alembic/) are found next to the app package.
RUN pip install --no-cache-dir -e .
ENV PQS_HOST=0.0.0.0 PQS_PORT=8000
EXPOSE 8000
CMD ["pqs", "serve"]
