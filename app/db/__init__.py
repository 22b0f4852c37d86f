"""Database layer: schema metadata, named SQL blocks, repository functions, pool."""
