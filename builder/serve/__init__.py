"""`python -m builder serve`: unum behind AWS's own APIs.

One HTTP server on 127.0.0.1 that answers the Step Functions API (AWS JSON 1.0,
`X-Amz-Target: AWSStepFunctions.<Op>`: `states_api`) over the store and the embedded engine
(`engine`), so boto3, the AWS CLI and Step Functions Local test suites work unchanged.

Modules, each with one job:
- `wire`: AWS's wire protocols: parse a request against botocore's service model, render an
  answer (timestamps as AWS encodes them), every error in AWS's shape (`ApiError`);
- `arns`: ARNs in AWS's format (account and region configurable) and their parsing;
- `registry`: what the API creates that is not a workflow (state machines, their versions and
  aliases, activities) and the index of executions, in one SQLite file;
- `engine`: the embedded engine's platforms, one per compiled state machine, with their
  durable queues; resumes what a killed server left running;
- `states_api`: the Step Functions operations;
- `http`: the server: routing, limits, the Host check, a clean stop.
"""
