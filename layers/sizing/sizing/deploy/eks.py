"""Provision a candidate on EKS: server-side apply of the rendered manifests, wait for the Service's endpoint
(and optionally the rollout), and tear down exactly what carries the run's labels, waiting for Karpenter to
remove the nodes.

A failed apply tears down before raising, so a half-applied candidate never keeps a GPU node."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from sizing.deploy import labels as L
from sizing.deploy.architecture import DeployTarget
from sizing.deploy.base import Endpoint, EndpointKind, Provisioner, TeardownReport, as_target
from sizing.deploy.kube import ClusterConfig, KubeClient, ProvisioningError, eks_client_for
from sizing.deploy.labels import DEFAULT_MAX_DURATION_S, TEARDOWN_ORDER
from sizing.deploy.manifests import render
from sizing.deploy.pods import SERVICE_PORT
from sizing.deploy.rendering import RenderOptions

log = logging.getLogger(__name__)

#: The AWS Load Balancer Controller writes the NLB's DNS name into the Service status as soon as it has created
#: it (seconds to a minute); 90 s keeps `apply` inside the provisioning Lambda's 120 s timeout (template.yaml).
ENDPOINT_TIMEOUT_S = 90
#: Karpenter drains and terminates a GPU node in minutes (NodePool terminationGracePeriod is 10 min); 12 min
#: keeps teardown inside Lambda's 15-minute limit with time to report. What is left, the janitor removes.
TEARDOWN_TIMEOUT_S = 12 * 60
POLL_S = 10.0


class EksProvisioner(Provisioner):
    """Runs candidates on an EKS cluster with Karpenter. Give a `KubeClient` or use `from_config`."""

    kind: EndpointKind = "eks"

    def __init__(
        self,
        client: KubeClient,
        options: RenderOptions | None = None,
        *,
        max_duration_s: float = DEFAULT_MAX_DURATION_S,
        endpoint_timeout_s: float = ENDPOINT_TIMEOUT_S,
        rollout_timeout_s: float = 0,
        teardown_timeout_s: float = TEARDOWN_TIMEOUT_S,
        poll_s: float = POLL_S,
        check_secret: bool = True,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`rollout_timeout_s` > 0 makes `apply` also wait for every replica to be ready (else poll `ready`).
        `check_secret` refuses to launch GPU nodes when the Hugging Face token Secret the pods need is missing."""
        self.client = client
        self.options = options or RenderOptions()
        self.max_duration_s = max_duration_s
        self.endpoint_timeout_s = endpoint_timeout_s
        self.rollout_timeout_s = rollout_timeout_s
        self.teardown_timeout_s = teardown_timeout_s
        self.poll_s = poll_s
        self.check_secret = check_secret
        self.sleep = sleep
        self.clock = clock

    @classmethod
    def from_config(
        cls, cluster: ClusterConfig, session: Any | None = None, eks_client: Any | None = None, **kwargs: Any
    ) -> EksProvisioner:
        """For a named cluster. Without explicit `options`, nodes find subnets and security groups by the
        `karpenter.sh/discovery: <cluster>` tag and use the `KarpenterNodeRole-<cluster>` role (the names
        Karpenter's getting-started guide creates)."""
        if "options" not in kwargs and cluster.name:
            kwargs["options"] = RenderOptions(
                cluster_name=cluster.name, node_role=f"KarpenterNodeRole-{cluster.name}"
            )
        return cls(eks_client_for(cluster, session, eks_client), **kwargs)

    # --- apply ----------------------------------------------------------------------------------------
    def _deadline(self, name: str) -> float:
        """The run's deadline: kept from an earlier apply of the same candidate, so re-apply changes nothing."""
        existing = self.client.get("NodePool", name)
        label = ((existing or {}).get("metadata", {}).get("labels") or {}).get(L.EXPIRES_AT)
        if label and label.isdigit():
            return float(label)
        return L.deadline(self.max_duration_s, self.clock())

    def render(self, arch: DeployTarget, run_id: str, candidate_id: str) -> list[dict[str, Any]]:
        name = L.object_name(run_id, candidate_id, arch.instance_type or "")
        opts = self.options.model_copy(update={"expires_at": self._deadline(name)})
        return render(arch, run_id, candidate_id, opts)

    def apply(
        self, architecture: DeployTarget | dict[str, Any], run_id: str, candidate_id: str | None = None
    ) -> Endpoint:
        arch = as_target(architecture)
        cand = candidate_id or arch.id
        self._preflight()
        try:
            objs = self.render(arch, run_id, cand)
            self._ensure_namespace()
            for obj in objs:
                self._apply_one(obj)
            service = next(o for o in objs if o["kind"] == "Service")
            endpoint = Endpoint(
                url=self._wait_for_address(service),
                kind=self.kind,
                run_id=run_id,
                candidate_id=cand,
                model=arch.model,
                details={
                    "namespace": self.options.namespace,
                    "deployment": service["metadata"]["name"],
                    "nodepool": service["metadata"]["name"],
                },
            )
            if self.rollout_timeout_s and not self.wait_ready(
                endpoint, self.rollout_timeout_s, self.poll_s, self.sleep, self.clock
            ):
                raise ProvisioningError(
                    f"{cand}: not every replica was ready within {self.rollout_timeout_s:.0f} s"
                )
            return endpoint
        except BaseException:
            log.warning("apply of %s failed: tearing down what was applied", cand)
            self._teardown_quietly(run_id, cand)
            raise

    def _apply_one(self, obj: dict[str, Any]) -> None:
        try:
            self.client.apply(obj)
        except ProvisioningError as exc:
            if exc.status == 404 and obj["apiVersion"].startswith("karpenter"):
                raise ProvisioningError(
                    f"the cluster does not serve {obj['apiVersion']} {obj['kind']}: install Karpenter v1 "
                    "(its NodePool and EC2NodeClass CRDs) first",
                    status=404,
                ) from None
            raise

    def _preflight(self) -> None:
        """Fail before any node is launched when the pods could never start."""
        opts = self.options
        if self.check_secret and self.client.get("Secret", opts.hf_token_secret, opts.namespace) is None:
            raise ProvisioningError(
                f"Secret {opts.namespace}/{opts.hf_token_secret} (key '{opts.hf_token_key}', a Hugging Face token) "
                f"is missing: create it with `kubectl -n {opts.namespace} create secret generic "
                f"{opts.hf_token_secret} --from-literal={opts.hf_token_key}=hf_...`"
            )

    def _ensure_namespace(self) -> None:
        ns = self.options.namespace
        if self.client.get("Namespace", ns) is None:
            # Shared by every run: no run label, so teardown and the janitor never delete it.
            self.client.apply(
                {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {"name": ns, "labels": {L.MANAGED_BY: L.MANAGER}},
                }
            )

    def _wait_for_address(self, service: dict[str, Any]) -> str:
        meta = service["metadata"]
        if service["spec"]["type"] != "LoadBalancer":
            return f"http://{meta['name']}.{meta['namespace']}.svc.cluster.local:{SERVICE_PORT}"
        deadline = self.clock() + self.endpoint_timeout_s
        while True:
            live = self.client.get("Service", meta["name"], meta["namespace"]) or {}
            ingress = (live.get("status", {}).get("loadBalancer", {}) or {}).get("ingress") or []
            if ingress:
                host = ingress[0].get("hostname") or ingress[0].get("ip")
                return f"http://{host}:{SERVICE_PORT}"
            if self.clock() >= deadline:
                raise ProvisioningError(
                    f"Service {meta['name']} got no load-balancer address within {self.endpoint_timeout_s:.0f} s"
                )
            self.sleep(self.poll_s)

    # --- ready ----------------------------------------------------------------------------------------
    def ready(self, endpoint: Endpoint) -> bool:
        """Every replica of the Deployment is updated and ready (its readiness probe is vLLM's /health)."""
        dep = self.client.get("Deployment", endpoint.details["deployment"], endpoint.details["namespace"])
        if dep is None:
            return False
        want = dep.get("spec", {}).get("replicas", 1)
        status = dep.get("status", {})
        current = status.get("observedGeneration", 0) >= dep.get("metadata", {}).get("generation", 0)
        return bool(
            current and status.get("updatedReplicas", 0) >= want and status.get("readyReplicas", 0) >= want
        )

    # --- teardown -------------------------------------------------------------------------------------
    def teardown(self, run_id: str, candidate_id: str | None = None) -> TeardownReport:
        """Delete every object labelled with the run (and candidate), then wait (bounded) until the
        NodeClaims of its node pools are gone, i.e. the GPU instances are terminated."""
        sel = L.selector(run_id, candidate_id)
        report = TeardownReport()
        for kind in TEARDOWN_ORDER:
            for item in self.client.list(kind, sel):
                meta = item["metadata"]
                if self.client.delete(kind, meta["name"], meta.get("namespace")):
                    report.deleted.append(
                        f"{kind}/{meta.get('namespace') + '/' if meta.get('namespace') else ''}{meta['name']}"
                    )
        report.remaining = self._wait_for_nodes(sel)
        return report

    def _wait_for_nodes(self, sel: str) -> list[str]:
        deadline = self.clock() + self.teardown_timeout_s
        while True:
            claims = [f"NodeClaim/{c['metadata']['name']}" for c in self.client.list("NodeClaim", sel)]
            if not claims or self.clock() >= deadline:
                if claims:
                    log.warning(
                        "nodes still terminating after %.0f s: %s (the janitor will retry)",
                        self.teardown_timeout_s,
                        claims,
                    )
                return claims
            self.sleep(self.poll_s)

    def _teardown_quietly(self, run_id: str, candidate_id: str) -> None:
        try:
            self.teardown(run_id, candidate_id)
        except Exception:  # the original error matters more; the janitor removes what is left
            log.exception("teardown after a failed apply of %s did not finish", candidate_id)
