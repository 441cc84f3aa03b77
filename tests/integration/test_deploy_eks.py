"""EksProvisioner against a fake Kubernetes API on loopback: what it sends, and what it leaves behind."""

from __future__ import annotations

import base64
import re
from urllib.parse import parse_qs, urlparse

import boto3
import pytest
from fakes.kube import FakeKube
from moto import mock_aws
from pytest_httpserver import HTTPServer

from sizing.deploy import labels as L
from sizing.deploy.architecture import DeployTarget
from sizing.deploy.eks import EksProvisioner
from sizing.deploy.kube import ClusterConfig, KubeClient, ProvisioningError, describe_cluster, eks_token

pytestmark = pytest.mark.integration

TOKEN = "k8s-aws-v1.test-token"
RUN = "run-eks-1"
ARCH = DeployTarget.from_id(
    "eks:g6e.12xlarge:tp2:fp8:vllm:on-demand", "meta-llama/Llama-3.1-8B", replicas={"peak": 4, "min": 2}
)
MANAGED = [
    "EC2NodeClass",
    "NodePool",
    "Service",
    "PodDisruptionBudget",
    "Deployment",
    "HorizontalPodAutoscaler",
]


@pytest.fixture
def fake(httpserver: HTTPServer) -> FakeKube:
    kube = FakeKube(token=TOKEN).with_hf_secret()
    httpserver.expect_request(re.compile(".*")).respond_with_handler(kube.werkzeug_handler)
    return kube


def provisioner(httpserver: HTTPServer, **kwargs: float) -> EksProvisioner:
    client = KubeClient(httpserver.url_for("/"), lambda: TOKEN)
    opts = {"poll_s": 0.0, "endpoint_timeout_s": 5.0, "teardown_timeout_s": 5.0, **kwargs}
    return EksProvisioner(client, **opts)  # type: ignore[arg-type]


def run_objects(fake: FakeKube, run_id: str = RUN) -> list[str]:
    return sorted(
        f"{k}/{n}"
        for (k, _, n), o in fake.objects.items()
        if o["metadata"].get("labels", {}).get(L.RUN_ID) == run_id
    )


def test_apply_server_side_applies_every_object_and_returns_the_load_balancer_address(
    httpserver: HTTPServer, fake: FakeKube
) -> None:
    # given a cluster that has nothing of this run
    prov = provisioner(httpserver)
    # when the candidate is applied
    endpoint = prov.apply(ARCH, RUN, ARCH.id)
    # then every object went through server-side apply as our field manager, with the EKS bearer token
    patches = fake.calls("PATCH")
    assert [p.body["kind"] for p in patches if p.body] == ["Namespace", *MANAGED]
    for p in patches:
        assert p.content_type == "application/apply-patch+yaml"
        assert p.query == {"fieldManager": "llm-sizing", "force": "true"}
        assert p.authorization == f"Bearer {TOKEN}"
    # and the endpoint is the internal NLB of the Service
    assert endpoint.url.startswith("http://sizing-g6e-12xlarge-") and endpoint.url.endswith(
        ".elb.us-east-1.amazonaws.com:80"
    )
    assert endpoint.openai_base_url == endpoint.url + "/v1"
    assert endpoint.model == "meta-llama/Llama-3.1-8B"
    assert len(run_objects(fake)) == len(MANAGED) + 1  # + the NodeClaim Karpenter launched


def test_reapply_is_idempotent(httpserver: HTTPServer, fake: FakeKube) -> None:
    # given a candidate already applied
    prov = provisioner(httpserver)
    first = prov.apply(ARCH, RUN, ARCH.id)
    before = {
        k: (o["metadata"].get("generation"), o["metadata"].get("resourceVersion"))
        for k, o in fake.objects.items()
    }
    # when it is applied again (a retried state-machine task), later
    prov.clock = lambda: 2_000_000_000.0
    second = prov.apply(ARCH, RUN, ARCH.id)
    # then nothing changed in the cluster (same deadline, same specs) and the endpoint is the same
    after = {
        k: (o["metadata"].get("generation"), o["metadata"].get("resourceVersion"))
        for k, o in fake.objects.items()
    }
    assert after == before
    assert second == first


def test_ready_follows_the_deployment_rollout(httpserver: HTTPServer, fake: FakeKube) -> None:
    fake.deployment_ready_after = 3
    prov = provisioner(httpserver)
    endpoint = prov.apply(ARCH, RUN, ARCH.id)
    assert prov.ready(endpoint) is False
    assert prov.wait_ready(endpoint, timeout_s=5, poll_s=0) is True


def test_apply_can_wait_for_the_rollout(httpserver: HTTPServer, fake: FakeKube) -> None:
    fake.deployment_ready_after = 2
    endpoint = provisioner(httpserver, rollout_timeout_s=5).apply(ARCH, RUN, ARCH.id)
    assert endpoint.details["deployment"] in fake.names("Deployment")


def test_teardown_deletes_exactly_the_labelled_objects_and_waits_for_the_nodes(
    httpserver: HTTPServer, fake: FakeKube
) -> None:
    # given two candidates of our run and one of another run
    prov = provisioner(httpserver)
    other_arch = DeployTarget.from_id("eks:g6e.12xlarge:tp4:bf16:vllm:spot", "meta-llama/Llama-3.1-8B")
    prov.apply(ARCH, RUN, ARCH.id)
    prov.apply(other_arch, RUN, other_arch.id)
    prov.apply(ARCH, "another-run", ARCH.id)
    fake.nodeclaims_linger = 2
    # when one candidate of our run is torn down
    report = prov.teardown(RUN, ARCH.id)
    # then its six objects are deleted and its node is gone; the rest is untouched
    assert len(report.deleted) == len(MANAGED)
    assert report.complete
    left = run_objects(fake)
    assert len(left) == len(MANAGED) + 1
    assert all(
        fake.objects[(k, ns, n)]["metadata"]["labels"][L.CANDIDATE_ID] == L.label_value(other_arch.id)
        for (k, ns, n), o in fake.objects.items()
        if o["metadata"].get("labels", {}).get(L.RUN_ID) == RUN
    )
    assert len(run_objects(fake, "another-run")) == len(MANAGED) + 1
    assert "llm-sizing" in fake.names("Namespace")
    # and every DELETE named one of the torn-down objects
    assert len(fake.calls("DELETE")) == len(MANAGED)


def test_teardown_of_a_whole_run_then_again_is_harmless(httpserver: HTTPServer, fake: FakeKube) -> None:
    prov = provisioner(httpserver)
    prov.apply(ARCH, RUN, ARCH.id)
    assert len(prov.teardown(RUN).deleted) == len(MANAGED)
    again = prov.teardown(RUN)
    assert again.deleted == [] and again.complete
    assert run_objects(fake) == []


def test_teardown_reports_nodes_that_outlive_its_wait(httpserver: HTTPServer, fake: FakeKube) -> None:
    fake.nodeclaims_linger = 10**6
    prov = provisioner(httpserver, teardown_timeout_s=0.05)
    prov.apply(ARCH, RUN, ARCH.id)
    report = prov.teardown(RUN)
    assert not report.complete
    assert report.remaining[0].startswith("NodeClaim/")


def test_a_failed_apply_leaves_nothing_behind(httpserver: HTTPServer, fake: FakeKube) -> None:
    # given an API server that refuses Deployments (after the node pool was created)
    fake.fail.add(("PATCH", "Deployment"))
    prov = provisioner(httpserver)
    # when the candidate is applied
    with pytest.raises(ProvisioningError, match="500"):
        prov.apply(ARCH, RUN, ARCH.id)
    # then what had been applied is gone, node included
    assert run_objects(fake) == []
    assert fake.names("NodePool") == [] and fake.names("NodeClaim") == []


def test_a_cluster_without_karpenter_is_named_as_such(httpserver: HTTPServer, fake: FakeKube) -> None:
    fake.missing_kinds = {"EC2NodeClass", "NodePool", "NodeClaim"}
    with pytest.raises(ProvisioningError, match="install Karpenter v1"):
        provisioner(httpserver).apply(ARCH, RUN, ARCH.id)
    assert run_objects(fake) == []


def test_no_load_balancer_address_in_time_fails_and_cleans_up(httpserver: HTTPServer, fake: FakeKube) -> None:
    fake.lb_address_after = 10**6
    prov = provisioner(httpserver, endpoint_timeout_s=0.05)
    with pytest.raises(ProvisioningError, match="load-balancer address"):
        prov.apply(ARCH, RUN, ARCH.id)
    assert run_objects(fake) == []


def test_a_missing_token_secret_stops_apply_before_any_node_is_launched(
    httpserver: HTTPServer, fake: FakeKube
) -> None:
    # given a cluster without the Hugging Face token Secret
    del fake.objects[("Secret", "llm-sizing", "hf-token")]
    # when
    with pytest.raises(ProvisioningError, match="create secret generic hf-token"):
        provisioner(httpserver).apply(ARCH, RUN, ARCH.id)
    # then nothing was applied
    assert fake.calls("PATCH") == []


def test_a_wrong_token_is_a_clear_error(httpserver: HTTPServer, fake: FakeKube) -> None:
    client = KubeClient(httpserver.url_for("/"), "k8s-aws-v1.wrong")
    with pytest.raises(ProvisioningError, match="401"):
        client.list("NodePool", L.selector(RUN))


def test_the_eks_token_is_a_presigned_sts_url_naming_the_cluster() -> None:
    # given static credentials
    session = boto3.session.Session(
        aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret", region_name="us-east-1"
    )
    # when
    token = eks_token("sizing-cluster", "us-east-1", session)
    # then it is the base64url of a presigned GetCallerIdentity URL that signs the x-k8s-aws-id header
    assert token.startswith("k8s-aws-v1.")
    raw = token.removeprefix("k8s-aws-v1.")
    url = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).decode()
    parsed = urlparse(url)
    query = {k: v[0] for k, v in parse_qs(parsed.query).items()}
    assert parsed.netloc == "sts.us-east-1.amazonaws.com"
    assert query["Action"] == "GetCallerIdentity"
    assert "x-k8s-aws-id" in query["X-Amz-SignedHeaders"].split(";")
    assert query["X-Amz-Credential"].startswith("AKIDEXAMPLE/")
    assert "X-Amz-Signature" in query


@mock_aws
def test_cluster_endpoint_and_ca_come_from_describe_cluster() -> None:
    # given an EKS cluster (moto)
    eks = boto3.client("eks", region_name="us-east-1")
    eks.create_cluster(
        name="sizing",
        roleArn="arn:aws:iam::123456789012:role/eks",
        resourcesVpcConfig={"subnetIds": ["subnet-1"]},
    )
    # when only its name is configured
    full = describe_cluster(ClusterConfig(name="sizing"), eks)
    # then the endpoint and CA are filled in
    assert full.endpoint and full.endpoint.startswith("https://")
    assert full.ca_data
    with pytest.raises(ProvisioningError, match="not found"):
        describe_cluster(ClusterConfig(name="missing"), eks)


def test_the_rbac_we_publish_allows_every_request_provisioning_and_teardown_make(
    httpserver: HTTPServer, fake: FakeKube
) -> None:
    from sizing.deploy import validate as checks
    from sizing.deploy.rbac import rbac

    # given the RBAC objects `sizing manifests --rbac` prints (valid for Kubernetes 1.31-1.34)
    objs = rbac()
    assert checks.problems(objs) == []
    allowed = {
        (group, resource, verb)
        for o in objs
        if o["kind"] in {"ClusterRole", "Role"}
        for rule in o["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    # when a candidate is applied, re-applied and torn down
    prov = provisioner(httpserver)
    prov.apply(ARCH, RUN, ARCH.id)
    prov.apply(ARCH, RUN, ARCH.id)
    prov.teardown(RUN)
    # then each request maps to an allowed (group, resource, verb); a server-side apply may also create
    for r in fake.requests:
        parts = r.path.strip("/").split("/")
        group = "" if parts[0] == "api" else parts[1]
        rest = parts[2:] if parts[0] == "api" else parts[3:]
        if rest[0] == "namespaces" and len(rest) > 2:
            rest = rest[2:]
        resource, named = rest[0], len(rest) > 1
        verb = {"PATCH": "patch", "DELETE": "delete", "GET": "get" if named else "list"}[r.method]
        assert (group, resource, verb) in allowed, r.path
        if r.method == "PATCH":
            assert (group, resource, "create") in allowed, r.path
