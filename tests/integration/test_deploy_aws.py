"""`python -m builder deploy --target aws` for every example: the SAM template passes cfn-lint,
and its IAM is least privilege (each function may invoke exactly its IR successors and itself,
and touch only the workflow's table)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from cfnlint.api import lint_all

from unum_entry.workflow import load_workflow

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p for p in (REPO / "images").iterdir() if (p / "unum-workflow.json").is_file())
PREFIX = "123456789012.dkr.ecr.us-east-1.amazonaws.com"


def deploy(folder: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "builder", "deploy", str(folder), "--target", "aws",
                           "--image-prefix", PREFIX, "--out", str(out), *extra],
                          cwd=REPO, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("folder", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_template_is_valid_and_least_privilege(folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "template.yaml"
    proc = deploy(folder, out)
    assert proc.returncode == 0, proc.stderr
    # cfn-lint, SAM transform included. Errors (E) and warnings (W) fail; informational rules
    # (I…) are advice that new cfn-lint releases add freely, so they must not break the build.
    problems = [m for m in lint_all(out.read_text()) if not m.rule.id.startswith("I")]
    assert problems == [], "\n".join(str(m) for m in problems)

    template = yaml.safe_load(out.read_text())
    workflow = load_workflow(folder)
    table = template["Resources"]["UnumTable"]["Properties"]
    assert table["TimeToLiveSpecification"] == {"AttributeName": "ttl", "Enabled": True}
    functions = {r["Properties"]["FunctionName"]["Fn::Sub"].split("-", 1)[1]: r["Properties"]
                 for r in template["Resources"].values() if r["Type"] == "AWS::Serverless::Function"}
    assert set(functions) == set(workflow.functions)
    for name, props in functions.items():
        assert props["PackageType"] == "Image" and props["ImageUri"].startswith(PREFIX + "/unum/")
        statements = props["Policies"][0]["Statement"]
        data, invoke = statements
        create_schedule, pass_role = props["Policies"][1]["Statement"]
        assert data["Resource"] == {"Fn::GetAtt": ["UnumTable", "Arn"]}
        assert all(action.startswith("dynamodb:") and "Table" not in action for action in data["Action"])
        invoked = {arn["Fn::Sub"].rsplit("}-", 1)[1] for arn in invoke["Resource"]}
        assert invoked == workflow.functions[name].ir.targets() | {name}
        # Timers: schedules only in the stack's group, the scheduler role passed to Scheduler only.
        assert create_schedule["Action"] == ["scheduler:CreateSchedule"]
        assert create_schedule["Resource"]["Fn::Sub"].endswith(":schedule/${UnumTimerGroup}/*")
        assert pass_role["Action"] == ["iam:PassRole"]
        assert pass_role["Resource"] == {"Fn::GetAtt": ["UnumSchedulerRole", "Arn"]}
        assert pass_role["Condition"] == {"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}}
        invoker = props["Environment"]["Variables"]["UNUM_INVOKER"]["Fn::Sub"]
        assert "schedule_role=${UnumSchedulerRole.Arn}" in invoker and "schedule_group=${UnumTimerGroup}" in invoker
        config = props["EventInvokeConfig"]
        assert config["MaximumRetryAttempts"] == 2
        assert config["DestinationConfig"]["OnFailure"]["Destination"]["Fn::Sub"].endswith(f"}}-{name}")

    # The scheduler role: assumed by EventBridge Scheduler of this account only, and it may
    # invoke exactly the workflow's functions.
    role = template["Resources"]["UnumSchedulerRole"]["Properties"]
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "scheduler.amazonaws.com"} and trust["Action"] == "sts:AssumeRole"
    assert trust["Condition"] == {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}
    (policy,) = role["Policies"]
    (allow,) = policy["PolicyDocument"]["Statement"]
    assert allow["Action"] == ["lambda:InvokeFunction"]
    assert {arn["Fn::Sub"].rsplit("}-", 1)[1] for arn in allow["Resource"]} == set(workflow.functions)
    assert template["Resources"]["UnumTimerGroup"]["Type"] == "AWS::Scheduler::ScheduleGroup"


def test_missing_image_prefix_is_one_clear_line(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "builder", "deploy", str(REPO / "images" / "chain"), "--target", "aws"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "--image-prefix is required" in proc.stderr and "Traceback" not in proc.stderr
