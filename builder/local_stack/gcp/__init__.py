"""The GCP half of the local stack, by concern:

- `emulators`: Google's Firestore and Pub/Sub emulators as managed processes (topics, push and
  pull subscriptions, publishing over REST);
- `functions`: a workflow's functions served as Cloud Run serves them (host processes or
  containers), with the environment a deploy would set;
- `push_proxy`: a push endpoint that loses acks and duplicates deliveries (fault tests);
- `workflow`: starting a workflow at the entry function and waiting for its outcome.

    with FirestoreEmulator() as firestore, PubSubEmulator() as pubsub:
        env = {**firestore.env(), **pubsub.env()}
        with HostFunctions(workflow, store_url=..., invoker_url=..., emulators=env) as fns:
            pubsub.wire_push(fns.urls, prefix="unum-chain-")
            start_workflow(fns.urls[workflow.entry], {"name": "x"}, workflow_id="wf-1")
"""

from builder.local_stack.gcp.emulators import DEFAULT_PROJECT, FirestoreEmulator, GcloudEmulator, PubSubEmulator
from builder.local_stack.gcp.functions import ContainerFunctions, FunctionServer, HostFunctions, function_env
from builder.local_stack.gcp.push_proxy import FaultyPushProxy
from builder.local_stack.gcp.workflow import start_workflow, wait_for_outcome

__all__ = ["DEFAULT_PROJECT", "ContainerFunctions", "FaultyPushProxy", "FirestoreEmulator", "FunctionServer",
           "GcloudEmulator", "HostFunctions", "PubSubEmulator", "function_env", "start_workflow", "wait_for_outcome"]
