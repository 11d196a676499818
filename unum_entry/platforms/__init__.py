"""Platform adapters: the glue between a FaaS platform's event loop and `Runtime.handle`.

`common.load_function` builds a function's Runtime once per process from the environment;
`aws_lambda` runs it under the Lambda runtime API; `cloud_run` under functions-framework.
"""
