"""HTTP layer: thin routes, wire schemas, and the single mapping of domain errors to status codes."""
