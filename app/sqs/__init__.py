"""The SQS wire protocol's building blocks: request signatures (AWS Signature Version 4), SQS's
message checksums, and the sealing of the secrets that signatures are verified with.

Nothing here touches the database or the HTTP app: the endpoint that speaks SQS composes them.
"""
