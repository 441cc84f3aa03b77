"""A small Kubernetes API client for what provisioning needs: server-side apply, get, list by label, delete.

Plain HTTPS with urllib3 (already a botocore dependency) rather than the `kubernetes` package, whose newest
releases conflict with botocore's and aws-sam-translator's pins (docs/serving-facts.md s8). EKS authentication is the
`aws eks get-token` scheme: a bearer token made of an STS GetCallerIdentity URL presigned with the cluster name
in the `x-k8s-aws-id` header."""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import urllib3

from sizing.base.errors import SizingError
from sizing.base.strict import Strict

#: The field manager our server-side applies are recorded under.
FIELD_MANAGER = "llm-sizing"
#: EKS accepts a token for 15 minutes; mint a new one after 10 so none expires mid-request.
TOKEN_REFRESH_S = 10 * 60
#: What `aws eks get-token` presigns with (seconds); EKS checks the signature, not this expiry.
TOKEN_PRESIGN_S = 60
TOKEN_PREFIX = "k8s-aws-v1."
#: One HTTP request to the API server: connect and read timeouts (s).
HTTP_TIMEOUT_S = 30.0


class ProvisioningError(SizingError):
    """Provisioning or teardown could not be done (the cluster refused, timed out, or is unreachable)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message, code="provisioning_failed", details={"status": status} if status else {})
        self.status = status


@dataclass(frozen=True)
class Kind:
    api_version: str
    kind: str
    plural: str
    namespaced: bool

    def collection(self, namespace: str | None) -> str:
        group_version = self.api_version
        base = f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"
        if self.namespaced and namespace:
            return f"{base}/namespaces/{quote(namespace)}/{self.plural}"
        return f"{base}/{self.plural}"


KINDS: dict[str, Kind] = {
    k.kind: k
    for k in (
        Kind("v1", "Namespace", "namespaces", False),
        Kind("v1", "Service", "services", True),
        Kind("v1", "Pod", "pods", True),
        Kind("v1", "Secret", "secrets", True),
        Kind("apps/v1", "Deployment", "deployments", True),
        Kind("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets", True),
        Kind("autoscaling/v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", True),
        Kind("karpenter.sh/v1", "NodePool", "nodepools", False),
        Kind("karpenter.sh/v1", "NodeClaim", "nodeclaims", False),
        Kind("karpenter.k8s.aws/v1", "EC2NodeClass", "ec2nodeclasses", False),
    )
}


def kind_of(name: str) -> Kind:
    try:
        return KINDS[name]
    except KeyError:
        raise ProvisioningError(f"kind {name} is not one provisioning manages") from None


class KubeClient:
    """Talks to one cluster's API server. `token` is a string or a function returning a fresh one."""

    def __init__(
        self,
        server: str,
        token: str | Callable[[], str] | None = None,
        *,
        ca_data: str | None = None,
        timeout_s: float = HTTP_TIMEOUT_S,
        http: urllib3.PoolManager | None = None,
    ) -> None:
        self.server = server.rstrip("/")
        self._token = token
        timeout = urllib3.Timeout(connect=timeout_s, read=timeout_s)
        if http is not None:
            self._http = http
        elif ca_data:
            ctx = ssl.create_default_context(cadata=base64.b64decode(ca_data).decode())
            self._http = urllib3.PoolManager(ssl_context=ctx, timeout=timeout)
        else:
            self._http = urllib3.PoolManager(timeout=timeout)

    # --- plumbing -------------------------------------------------------------------------------------
    def _headers(self, content_type: str | None = None) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        token = self._token() if callable(self._token) else self._token
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    def request(
        self,
        method: str,
        path: str,
        query: dict[str, str] | None = None,
        body: dict[str, Any] | None = None,
        content_type: str = "application/json",
        allow_missing: bool = False,
    ) -> dict[str, Any] | None:
        url = self.server + path + (f"?{urlencode(query)}" if query else "")
        data = json.dumps(body).encode() if body is not None else None
        try:
            resp = self._http.request(
                method, url, body=data, headers=self._headers(content_type if data else None), retries=False
            )
        except urllib3.exceptions.HTTPError as exc:
            raise ProvisioningError(f"{method} {path}: cannot reach the Kubernetes API ({exc})") from None
        if resp.status == 404 and allow_missing:
            return None
        payload: dict[str, Any] = {}
        if resp.data:
            try:
                payload = json.loads(resp.data)
            except json.JSONDecodeError:
                payload = {"message": resp.data[:200].decode(errors="replace")}
        if resp.status >= 300:
            raise ProvisioningError(
                f"{method} {path}: {resp.status} {payload.get('message', payload.get('reason', ''))}".strip(),
                status=resp.status,
            )
        return payload

    # --- operations -----------------------------------------------------------------------------------
    def apply(self, obj: dict[str, Any], field_manager: str = FIELD_MANAGER) -> dict[str, Any]:
        """Server-side apply: the cluster merges our fields and owns the rest; applying twice is a no-op."""
        kind = kind_of(obj["kind"])
        meta = obj["metadata"]
        path = f"{kind.collection(meta.get('namespace'))}/{quote(meta['name'])}"
        out = self.request(
            "PATCH",
            path,
            {"fieldManager": field_manager, "force": "true"},
            obj,
            content_type="application/apply-patch+yaml",
        )
        assert out is not None
        return out

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        k = kind_of(kind)
        return self.request("GET", f"{k.collection(namespace)}/{quote(name)}", allow_missing=True)

    def list(
        self, kind: str, label_selector: str | None = None, namespace: str | None = None
    ) -> list[dict[str, Any]]:
        """Objects of a kind (every namespace when `namespace` is None) matching a label selector."""
        k = kind_of(kind)
        query = {"labelSelector": label_selector} if label_selector else None
        out = self.request("GET", k.collection(namespace), query, allow_missing=True)
        if out is None:  # the CRD is not installed: nothing of that kind exists
            return []
        items: list[dict[str, Any]] = out.get("items", [])
        for item in items:  # list items carry no kind
            item.setdefault("kind", kind)
            item.setdefault("apiVersion", k.api_version)
        return items

    def delete(self, kind: str, name: str, namespace: str | None = None) -> bool:
        """Delete one object (children in the background); False when it was already gone."""
        k = kind_of(kind)
        out = self.request(
            "DELETE",
            f"{k.collection(namespace)}/{quote(name)}",
            {"propagationPolicy": "Background"},
            allow_missing=True,
        )
        return out is not None


# --- EKS ----------------------------------------------------------------------------------------------------


class ClusterConfig(Strict):
    """Which EKS cluster to provision in. Endpoint and CA come from `eks:DescribeCluster` when not given."""

    name: str
    region: str = "us-east-1"
    endpoint: str | None = None
    #: Base64 PEM of the cluster CA, as DescribeCluster returns it.
    ca_data: str | None = None


def eks_token(cluster_name: str, region: str, session: Any | None = None) -> str:
    """A bearer token for an EKS cluster (what `aws eks get-token` prints in `status.token`)."""
    import boto3
    from botocore.signers import RequestSigner

    session = session or boto3.session.Session()
    sts = session.client("sts", region_name=region)
    credentials = session.get_credentials()
    if credentials is None:
        raise ProvisioningError("no AWS credentials to authenticate to EKS with")
    signer = RequestSigner(
        sts.meta.service_model.service_id,
        region,
        "sts",
        "v4",
        credentials,
        session.events if hasattr(session, "events") else sts.meta.events,
    )
    params = {
        "method": "GET",
        "url": f"https://sts.{region}.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15",
        "body": {},
        "headers": {"x-k8s-aws-id": cluster_name},
        "context": {},
    }
    url = signer.generate_presigned_url(
        params, region_name=region, expires_in=TOKEN_PRESIGN_S, operation_name=""
    )
    return TOKEN_PREFIX + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


class EksTokenSource:
    """Mints EKS tokens and reuses one until it is `TOKEN_REFRESH_S` old (thread-safe)."""

    def __init__(
        self,
        cluster_name: str,
        region: str,
        session: Any | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cluster_name, self.region, self.session, self.clock = cluster_name, region, session, clock
        self._token: str | None = None
        self._minted = 0.0
        self._lock = threading.Lock()

    def __call__(self) -> str:
        with self._lock:
            if self._token is None or self.clock() - self._minted > TOKEN_REFRESH_S:
                self._token = eks_token(self.cluster_name, self.region, self.session)
                self._minted = self.clock()
            return self._token


def describe_cluster(
    cfg: ClusterConfig, eks_client: Any | None = None, session: Any | None = None
) -> ClusterConfig:
    """`cfg` with endpoint and CA filled from `eks:DescribeCluster` when missing."""
    if cfg.endpoint and (cfg.ca_data or cfg.endpoint.startswith("http://")):
        return cfg
    if eks_client is None:
        import boto3

        eks_client = (session or boto3.session.Session()).client("eks", region_name=cfg.region)
    try:
        cluster = eks_client.describe_cluster(name=cfg.name)["cluster"]
    except eks_client.exceptions.ResourceNotFoundException:
        raise ProvisioningError(f"EKS cluster '{cfg.name}' not found in {cfg.region}", status=404) from None
    return cfg.model_copy(
        update={
            "endpoint": cfg.endpoint or cluster["endpoint"],
            "ca_data": cfg.ca_data or cluster.get("certificateAuthority", {}).get("data"),
        }
    )


def eks_client_for(
    cfg: ClusterConfig, session: Any | None = None, eks_client: Any | None = None
) -> KubeClient:
    """A KubeClient for an EKS cluster, authenticated with the caller's AWS credentials."""
    full = describe_cluster(cfg, eks_client, session)
    assert full.endpoint
    return KubeClient(full.endpoint, EksTokenSource(cfg.name, cfg.region, session), ca_data=full.ca_data)
