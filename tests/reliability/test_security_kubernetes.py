"""The product touches only the Kubernetes objects it labelled. In a cluster shared with other teams (their
Deployments and Services beside ours, their node pools, another run in flight), provisioning, teardown and the
janitor list by our run label only, and change or delete nothing that does not carry it."""

from __future__ import annotations

import copy
import re
from typing import Any
from urllib.parse import unquote

import pytest
from fakes.kube import FakeKube
from pytest_httpserver import HTTPServer

from sizing.deploy import labels as L
from sizing.deploy.architecture import DeployTarget
from sizing.deploy.eks import EksProvisioner
from sizing.deploy.janitor import InMemoryRunStatus, sweep
from sizing.deploy.kube import KubeClient

pytestmark = pytest.mark.integration

ARCH = DeployTarget.from_id("eks:g6e.12xlarge:tp4:fp8:vllm:on-demand", "meta-llama/Llama-3.1-8B")
OURS, IN_FLIGHT = "run-finished", "run-in-flight"
NAMESPACE = "llm-sizing"
#: Other teams' objects: in our namespace, in theirs, cluster-scoped; one even says it is managed by us but
#: carries no run label (so no run owns it).
FOREIGN: list[dict[str, Any]] = [
    {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "team-chat", "namespace": NAMESPACE}},
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "team-chat", "namespace": NAMESPACE}},
    {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "coredns", "namespace": "kube-system"}},
    {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"}},
    {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"}},
    {"apiVersion": "apps/v1", "kind": "Deployment",
     "metadata": {"name": "sizing-lookalike", "namespace": NAMESPACE, "labels": {L.MANAGED_BY: L.MANAGER}}},
    {"apiVersion": "apps/v1", "kind": "Deployment",
     "metadata": {"name": "other-label", "namespace": NAMESPACE, "labels": {"sizing.llm/run": OURS}}},
]  # fmt: skip


@pytest.fixture
def cluster(httpserver: HTTPServer) -> tuple[FakeKube, KubeClient]:
    fake = FakeKube().with_hf_secret(NAMESPACE)
    for obj in FOREIGN:
        fake.put(obj)
    httpserver.expect_request(re.compile(".*")).respond_with_handler(fake.werkzeug_handler)
    return fake, KubeClient(httpserver.url_for("/"))


def test_provisioning_teardown_and_the_janitor_touch_only_what_carries_a_run_label(cluster, record_figures):
    fake, client = cluster
    foreign_before = {k: copy.deepcopy(v) for k, v in fake.objects.items()}
    # given two runs provisioned side by side with the other teams' objects
    provisioner = EksProvisioner(client, poll_s=0.0, endpoint_timeout_s=5.0, teardown_timeout_s=5.0)
    provisioner.apply(ARCH, OURS, "c1")
    provisioner.apply(ARCH, IN_FLIGHT, "c1")
    labelled_then = {k: (v["metadata"].get("labels") or {}) for k, v in fake.objects.items()}
    # when our run is torn down, and the janitor sweeps with one run finished and one in flight
    provisioner.teardown(OURS, "c1")
    report = sweep(InMemoryRunStatus({OURS: "SUCCEEDED", IN_FLIGHT: "RUNNING"}), kube=client)
    # then every other team's object is exactly as it was
    for key, obj in foreign_before.items():
        assert fake.objects.get(key) == obj, f"{key} was changed or deleted"
    # and the run in flight still has all its objects
    assert any((o["metadata"].get("labels") or {}).get(L.RUN_ID) == IN_FLIGHT for o in fake.objects.values())
    assert not report.errors
    # and every request named our labels: lists select by run label, applies carry it, deletes hit only
    # objects that carried it (the shared namespace is applied with our manager label and never deleted)
    for req in fake.requests:
        if req.method == "GET" and "labelSelector" in req.query:
            assert L.RUN_ID in unquote(req.query["labelSelector"]), req.path
        elif req.method == "GET" and _is_collection(req.path):
            pytest.fail(f"unselected list of {req.path}")
        if req.method == "PATCH":
            assert req.body is not None
            labels = req.body["metadata"].get("labels") or {}
            assert labels.get(L.RUN_ID) or req.body["kind"] == "Namespace", req.path
            assert labels.get(L.MANAGED_BY) == L.MANAGER
        if req.method == "DELETE":
            key = _key_of(req.path)
            assert labelled_then.get(key, {}).get(L.RUN_ID) in (OURS, None), req.path
            assert key not in foreign_before, f"deleted a foreign object: {req.path}"
    assert fake.calls("DELETE"), "teardown deleted something"
    record_figures("security.kubernetes", requests_checked=len(fake.requests), foreign_objects=len(FOREIGN),
                   foreign_changed=0, deletes=len(fake.calls("DELETE")))  # fmt: skip


#: The kinds the product lists (plural names in API paths).
_COLLECTIONS = {"deployments", "services", "nodepools", "ec2nodeclasses", "nodeclaims", "poddisruptionbudgets",
                "horizontalpodautoscalers", "secrets", "namespaces"}  # fmt: skip


def _is_collection(path: str) -> bool:
    return path.rstrip("/").rsplit("/", 1)[-1] in _COLLECTIONS


_PATH = re.compile(
    r"/(?:api/v1|apis/[^/]+/[^/]+)(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[^/]+)/(?P<name>[^/?]+)"
)
_KINDS = {"deployments": "Deployment", "services": "Service", "nodepools": "NodePool",
          "ec2nodeclasses": "EC2NodeClass", "nodeclaims": "NodeClaim", "poddisruptionbudgets": "PodDisruptionBudget",
          "horizontalpodautoscalers": "HorizontalPodAutoscaler"}  # fmt: skip


def _key_of(path: str) -> tuple[str, str, str]:
    m = _PATH.search(path)
    assert m, path
    return _KINDS.get(m["plural"], m["plural"]), m["ns"] or "", m["name"]
