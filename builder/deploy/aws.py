"""`python -m builder deploy <workflow> --target aws`: a CloudFormation (SAM) template.

What it declares, per workflow:
- the DynamoDB table (key `k`, on-demand, TTL on `ttl`): the store every function coordinates in;
- one `AWS::Serverless::Function` per unum function: `PackageType: Image` (the image `builder
  build` made, pushed under `--image-prefix`), named `${AWS::StackName}-<function>` so invokers
  and policies can name each other without creating dependency cycles (loops invoke themselves);
- least privilege per function: the table's item operations on the table only, and
  `lambda:InvokeFunction` on exactly its successors (from its IR) plus itself (handler retries);
- asynchronous invoke configuration: Lambda's retries (`--aws-retries`, default 2), the maximum
  event age, and an on-failure destination (the function itself: the unum adapter turns the
  destination record into the workflow's failure record). That configuration is `$LATEST`'s:
  `deploy --publish` copies it onto each build alias with the destination `FUNCTION:<build>`
  (builder.deploy.aws_versions.pin_failure_destination), as pinned workflows invoke the alias;
- durable timers (`Invoker.invoke_at`, `unum_entry.invokers.eventbridge_scheduler`): a schedule
  group named like the stack (deleting the stack deletes its pending timers), a scheduler role
  trusted by `scheduler.amazonaws.com` from this account only, allowed `lambda:InvokeFunction` on
  exactly the workflow's functions; each function may `scheduler:CreateSchedule` in that group
  and `iam:PassRole` that role (to Scheduler) only. The invoker URL names role and group.
"""

from __future__ import annotations

import argparse
from typing import Any

from builder.deploy.output import emit
from builder.image.build import image_repository
from unum_entry.asl.integrations.grants import function_statements, started_functions
from unum_entry.errors import BuildError
from unum_entry.workflow import Workflow, load_workflow

TABLE = "UnumTable"
SCHEDULER_ROLE = "UnumSchedulerRole"
TIMER_GROUP = "UnumTimerGroup"
ITEM_ACTIONS = ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem",
                "dynamodb:BatchGetItem", "dynamodb:BatchWriteItem", "dynamodb:ConditionCheckItem"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    aws = parser.add_argument_group("--target aws")
    aws.add_argument("--aws-tag-prefix", default="unum/", help="repository prefix the images were built with (default: unum/)")
    aws.add_argument("--aws-memory", type=int, default=512, help="MemorySize in MB (default: 512)")
    aws.add_argument("--aws-timeout", type=int, default=60, help="function Timeout in seconds (default: 60)")
    aws.add_argument("--aws-retries", type=int, default=2, choices=(0, 1, 2),
                     help="Lambda's asynchronous retries after a function error (default: 2)")
    aws.add_argument("--aws-max-event-age", type=int, default=21600,
                     help="seconds an event may wait in Lambda's async queue (60-21600, default: 21600)")


def deploy_aws(args: argparse.Namespace) -> int:
    workflow = load_workflow(args.workflow)
    if not args.image_prefix:
        raise BuildError("deploy --target aws: --image-prefix is required (the ECR registry the images were pushed to, "
                         "e.g. 123456789012.dkr.ecr.us-east-1.amazonaws.com)")
    template = sam_template(workflow, image_prefix=args.image_prefix, tag=args.tag, tag_prefix=args.aws_tag_prefix,
                            memory=args.aws_memory, timeout=args.aws_timeout, retries=args.aws_retries,
                            max_event_age=args.aws_max_event_age)
    pin_build(template, workflow, _build_id(workflow), alias=getattr(args, "alias", "live"))
    if getattr(args, "api", False):
        add_api(template, workflow, image_prefix=args.image_prefix, tag=args.tag, tag_prefix=args.aws_tag_prefix,
                memory=args.aws_memory, timeout=args.aws_timeout)
    emit(render(template), args.out,
         next_step=f"{len(workflow.functions)} functions; deploy with `sam deploy --template-file {{out}} "
                   "--stack-name <name> --capabilities CAPABILITY_IAM --image-repositories ...` or "
                   "`aws cloudformation deploy`")
    return 0


def logical_id(function: str) -> str:
    """A CloudFormation logical id (alphanumeric) for a function."""
    cleaned = "".join(c for c in function.title() if c.isalnum())
    return f"Fn{cleaned}"


def sam_template(workflow: Workflow, *, image_prefix: str, tag: str = "latest", tag_prefix: str = "unum/",
                 memory: int = 512, timeout: int = 60, retries: int = 2, max_event_age: int = 21600) -> dict[str, Any]:
    """The template as a dict (render with `render`)."""
    if not 60 <= max_event_age <= 21600:
        raise BuildError(f"--aws-max-event-age: expected 60..21600 seconds, found {max_event_age}")
    ids = {name: logical_id(name) for name in workflow.functions}
    if len(set(ids.values())) != len(ids):
        raise BuildError(f"{workflow.folder}: function names {sorted(ids)} map to clashing CloudFormation ids")
    resources: dict[str, Any] = {TABLE: {
        "Type": "AWS::DynamoDB::Table",
        # Workflow state and results only (every item carries a TTL): goes with the stack.
        "DeletionPolicy": "Delete",
        "UpdateReplacePolicy": "Delete",
        "Properties": {
            "BillingMode": "PAY_PER_REQUEST",
            "AttributeDefinitions": [{"AttributeName": "k", "AttributeType": "S"}],
            "KeySchema": [{"AttributeName": "k", "KeyType": "HASH"}],
            "TimeToLiveSpecification": {"AttributeName": "ttl", "Enabled": True},
        },
    }}
    resources.update(_timer_resources(sorted(workflow.functions)))
    for name, spec in sorted(workflow.functions.items()):
        invokes = sorted(spec.ir.targets() | {name} | started_functions(spec.folder))  # + a started child's entry
        repository = image_repository(tag_prefix, workflow.name, name)
        function = _image_function(
            name, f"unum workflow {workflow.name}: function {name}",
            f"{image_prefix.rstrip('/')}/{repository}:{tag}", memory=memory, timeout=timeout,
            variables={"UNUM_INVOKER": {"Fn::Sub": "lambda://?prefix=${AWS::StackName}-&region=${AWS::Region}"
                                                   f"&schedule_role=${{{SCHEDULER_ROLE}.Arn}}"
                                                   f"&schedule_group=${{{TIMER_GROUP}}}"}},
            policies=[{"Statement": [
                {"Effect": "Allow", "Action": list(ITEM_ACTIONS), "Resource": {"Fn::GetAtt": [TABLE, "Arn"]}},
                {"Effect": "Allow", "Action": ["lambda:InvokeFunction"],
                 "Resource": [_function_arn(target) for target in invokes]},
                *function_statements(spec.folder),  # its Step Functions integrations, if any
            ]}, {"Statement": _timer_statements()}])
        function["Properties"]["EventInvokeConfig"] = {
            "MaximumRetryAttempts": retries,
            "MaximumEventAgeInSeconds": max_event_age,
            "DestinationConfig": {"OnFailure": {"Type": "Lambda", "Destination": _function_arn(name)}},
        }
        resources[ids[name]] = function
    return {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Transform": "AWS::Serverless-2016-10-31",
        "Description": f"unum workflow {workflow.name} (entry: {workflow.entry}), generated by python -m builder deploy",
        "Resources": resources,
        "Outputs": {
            "EntryFunction": {"Description": "invoke this function with the workflow input",
                              "Value": {"Ref": ids[workflow.entry]}},
            "StoreTable": {"Description": "the DynamoDB table (use with builder inspect --store dynamodb://TABLE)",
                           "Value": {"Ref": TABLE}},
        },
    }


API = "UnumApi"
API_URL = "UnumApiUrl"
API_FUNCTION = "unum-api"  # the API function's name after the stack's, and its image's
# What the API does to the table: point reads and batch reads (the registry, outcomes), creates
# (registry revisions, start records, stops), the transactions and deletes of a stop or redrive,
# and the Scan of a list (ListStateMachines, ListExecutions); never a table-level action.
API_ITEM_ACTIONS = [*ITEM_ACTIONS, "dynamodb:Scan"]


def add_api(template: dict[str, Any], workflow: Workflow, *, image_prefix: str, tag: str = "latest",
            tag_prefix: str = "unum/", memory: int = 512, timeout: int = 60) -> None:
    """`deploy --api`: add the Step Functions API (builder.serve.cloud_entry) as one more Lambda
    function over the workflow's table, behind a function URL with `AWS_IAM` auth (callers need
    `lambda:InvokeFunctionUrl` on it). Its role may use the table's item actions and Scan on the
    table only, and invoke exactly the workflow's functions. The workflow must be a compiled
    state machine (its folder holds the `statemachine.json` the API serves)."""
    if not (workflow.folder / "statemachine.json").is_file():
        raise BuildError(f"deploy --api: {workflow.folder} is not a compiled state machine (no statemachine.json); "
                         "compile one with `python -m builder compile statemachine.json --out FOLDER`")
    if API_FUNCTION in workflow.functions:
        raise BuildError(f"deploy --api: the workflow has a function named {API_FUNCTION!r}, the API function's name")
    repository = image_repository(tag_prefix, workflow.name, API_FUNCTION)
    template["Resources"][API] = _image_function(
        API_FUNCTION, f"unum workflow {workflow.name}: the Step Functions API (function URL, AWS_IAM)",
        f"{image_prefix.rstrip('/')}/{repository}:{tag}", memory=memory, timeout=timeout,
        variables={"UNUM_INVOKER": {"Fn::Sub": "lambda://?prefix=${AWS::StackName}-&region=${AWS::Region}"},
                   "UNUM_API_ACCOUNT": {"Ref": "AWS::AccountId"}},
        policies=[{"Statement": [
            {"Effect": "Allow", "Action": list(API_ITEM_ACTIONS), "Resource": {"Fn::GetAtt": [TABLE, "Arn"]}},
            {"Effect": "Allow", "Action": ["lambda:InvokeFunction"],
             "Resource": [_function_arn(name) for name in sorted(workflow.functions)]},
        ]}])
    template["Resources"][API_URL] = {
        "Type": "AWS::Lambda::Url",
        "Properties": {"AuthType": "AWS_IAM", "TargetFunctionArn": {"Fn::GetAtt": [API, "Arn"]}},
    }
    template["Outputs"]["ApiUrl"] = {
        "Description": "the Step Functions API: boto3.client('stepfunctions', endpoint_url=...) (docs/api.md)",
        "Value": {"Fn::GetAtt": [API_URL, "FunctionUrl"]}}


def _image_function(name: str, description: str, image: str, *, memory: int, timeout: int,
                    variables: dict[str, Any], policies: list[Any]) -> dict[str, Any]:
    """One container-image Lambda function of the stack, `${AWS::StackName}-NAME`, over the
    workflow's table (UNUM_STORE, then `variables`), with the inline `policies` of its role."""
    return {
        "Type": "AWS::Serverless::Function",
        "Properties": {
            "FunctionName": {"Fn::Sub": f"${{AWS::StackName}}-{name}"},
            "Description": description,
            "PackageType": "Image",
            "ImageUri": image,
            "MemorySize": memory,
            "Timeout": timeout,
            "Environment": {"Variables": {
                "UNUM_STORE": {"Fn::Sub": f"dynamodb://${{{TABLE}}}?region=${{AWS::Region}}"}, **variables}},
            "Policies": policies,
        },
    }


def _timer_resources(functions: list[str]) -> dict[str, Any]:
    """The schedule group and the role EventBridge Scheduler invokes the functions with."""
    return {
        TIMER_GROUP: {"Type": "AWS::Scheduler::ScheduleGroup", "Properties": {"Name": {"Ref": "AWS::StackName"}}},
        SCHEDULER_ROLE: {"Type": "AWS::IAM::Role", "Properties": {
            "AssumeRolePolicyDocument": {"Version": "2012-10-17", "Statement": [{
                "Effect": "Allow", "Principal": {"Service": "scheduler.amazonaws.com"}, "Action": "sts:AssumeRole",
                "Condition": {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}}]},
            "Policies": [{"PolicyName": "invoke-workflow-functions", "PolicyDocument": {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": ["lambda:InvokeFunction"],
                               "Resource": [_function_arn(f) for f in functions]}]}}],
        }},
    }


def _timer_statements() -> list[dict[str, Any]]:
    """What a function needs to arm timers: create schedules in the stack's group, pass the
    scheduler role to Scheduler (and to nothing else)."""
    return [
        {"Effect": "Allow", "Action": ["scheduler:CreateSchedule"],
         "Resource": {"Fn::Sub": f"arn:${{AWS::Partition}}:scheduler:${{AWS::Region}}:${{AWS::AccountId}}"
                                 f":schedule/${{{TIMER_GROUP}}}/*"}},
        {"Effect": "Allow", "Action": ["iam:PassRole"], "Resource": {"Fn::GetAtt": [SCHEDULER_ROLE, "Arn"]},
         "Condition": {"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}}},
    ]


def _function_arn(function: str) -> dict[str, str]:
    return {"Fn::Sub": f"arn:${{AWS::Partition}}:lambda:${{AWS::Region}}:${{AWS::AccountId}}:function:${{AWS::StackName}}-{function}"}


def render(template: dict[str, Any]) -> str:
    """YAML when PyYAML is installed (the template's intrinsics are in long form), else JSON;
    CloudFormation accepts both."""
    try:
        import yaml
    except ImportError:
        import json

        return json.dumps(template, indent=2) + "\n"
    return yaml.safe_dump(template, sort_keys=False, default_flow_style=False, width=120)


# ---- versions (issue 44): every build a Lambda version, pinned by qualified invokes ------------

WORKFLOW_ALIAS_ENV = "UNUM_WORKFLOW_ALIAS"
SCHEDULER_QUALIFIED = "UnumSchedulerBuilds"  # the scheduler role's grant on the builds' qualified ARNs


def pin_build(template: dict[str, Any], workflow: Workflow, build: str, alias: str = "live") -> None:
    """Configure the template's workflow functions for build `build` (builder.versions.content_id):
    `UNUM_WORKFLOW_VERSION=build`, an invoker qualified with it (every invoke and timer of a
    workflow names `FUNCTION:build`, the build's alias), invoke grants on the qualified ARNs too,
    and on the entry `UNUM_WORKFLOW_ALIAS` (the alias new workflows start through, its ramp read by
    the entry: `lambda:GetAlias` on itself). `deploy --publish` then publishes the versions and
    aliases (builder.deploy.aws_versions)."""
    for name in workflow.functions:
        properties = template["Resources"][logical_id(name)]["Properties"]
        variables = properties["Environment"]["Variables"]
        variables["UNUM_WORKFLOW_VERSION"] = build
        variables["UNUM_INVOKER"] = {"Fn::Sub": variables["UNUM_INVOKER"]["Fn::Sub"] + f"&qualifier={build}"}
        # Qualified invokes need grants on the qualified ARNs: a policy of their own, beside the
        # unqualified grants (the same functions, any version or alias: ARN:*).
        invoked = [arn for policy in properties["Policies"] for statement in policy["Statement"]
                   if statement.get("Action") == ["lambda:InvokeFunction"] for arn in statement["Resource"]]
        qualified: list[dict[str, Any]] = [{"Effect": "Allow", "Action": ["lambda:InvokeFunction"],
                                            "Resource": [_qualified_arn(arn) for arn in invoked]}]
        if name == workflow.entry:
            variables[WORKFLOW_ALIAS_ENV] = alias
            qualified.append({"Effect": "Allow", "Action": ["lambda:GetAlias"],
                              "Resource": _qualified_arn(_function_arn(name))})
        properties["Policies"].append({"Statement": qualified})
    role = template["Resources"][SCHEDULER_ROLE]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"][0]
    template["Resources"][SCHEDULER_QUALIFIED] = {"Type": "AWS::IAM::Policy", "Properties": {
        "PolicyName": "invoke-workflow-builds", "Roles": [{"Ref": SCHEDULER_ROLE}],
        "PolicyDocument": {"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Action": ["lambda:InvokeFunction"],
            "Resource": [_qualified_arn(arn) for arn in role["Resource"]]}]}}}
    template["Description"] += f"; build {build}: after `sam deploy`, publish it with `python -m builder deploy " \
                               f"FOLDER --target aws --publish --aws-prefix STACK-` (docs/versions.md, On AWS Lambda)"


def _build_id(workflow: Workflow) -> str:
    from builder.versions import content_id

    return content_id(workflow.folder)


def _qualified_arn(arn: dict[str, str]) -> dict[str, str]:
    return {"Fn::Sub": arn["Fn::Sub"] + ":*"}


def add_publish_arguments(parser: argparse.ArgumentParser) -> None:
    """`deploy --target aws --publish` and its options (builder.deploy.aws_versions)."""
    aws = parser.add_argument_group("--target aws --publish (Lambda versions and the workflow alias)")
    aws.add_argument("--publish", action="store_true",
                     help="aws: publish a Lambda version of every function as deployed now, an alias named after "
                          "the build, and move the workflow alias to it (instead of printing a template)")
    aws.add_argument("--ramp", type=float, default=None, metavar="PERCENT",
                     help="with --publish: give the new build PERCENT (0-100) of new workflows; promote or rollback later")
    add_lambda_arguments(aws)


def add_lambda_arguments(group: Any) -> None:
    """The Lambda API options of publish, promote and rollback."""
    group.add_argument("--aws-prefix", default="", help="Lambda function name prefix (the stack's name and '-'; "
                                                        "none on the local stack)")
    group.add_argument("--aws-endpoint", default=None, help="another Lambda endpoint (the local stack's)")
    group.add_argument("--aws-region", default=None, help="AWS region (default: AWS_REGION, else us-east-1)")
    group.add_argument("--alias", default="live", help="the workflow alias (default: live)")


def publish_aws(args: argparse.Namespace) -> int:
    """`deploy --publish`: publish this folder's build (builder.deploy.aws_versions.publish_build)
    and print what was published as JSON. Raises BuildError (one line, nothing changed for bad input)."""
    import json

    from builder.deploy.aws_versions import publish_build, ramp_weight
    from builder.versions import content_id
    from unum_entry.invokers.aws_lambda import build_client

    if args.ramp is not None:
        ramp_weight(args.ramp)  # before anything else
    workflow = load_workflow(args.workflow)
    build = content_id(workflow.folder)
    client = build_client(endpoint=args.aws_endpoint, region=args.aws_region)
    published = publish_build(client, functions=sorted(workflow.functions), entry=workflow.entry, build=build,
                              prefix=args.aws_prefix, ramp=args.ramp, alias=args.alias)
    print(json.dumps({"build": build, "versions": published.versions, "alias": args.alias,
                      "stable": published.state.stable, "ramped": published.state.ramped,
                      "weight": published.state.weight, "previous": published.state.previous}))
    return 0
