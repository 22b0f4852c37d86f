"""PQS: the Postgres Queue Service."""
