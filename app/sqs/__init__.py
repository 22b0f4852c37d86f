"""The SQS front: AWS's SQS wire protocol served on the same engine and rules as the REST API.

The wire, which touches neither the database nor the HTTP app: signatures (AWS Signature
Version 4), message checksums, the two protocols' requests, answers and errors (JSON 1.0 and the
query protocol's XML), and the shapes of the actions. The actions themselves call the service
layer only; app/api/routes_sqs.py serves them on `/` through the operation table. The secrets
that signatures are verified with are sealed by app/sealing.py (keys live below this package).
"""
