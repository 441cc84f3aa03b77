"""An in-memory Kubernetes API server for tests: enough of the REST API for provisioning (server-side apply,
get, list with label selectors, delete) and a caricature of the controllers behind it (a Deployment becomes
ready, a LoadBalancer Service gets a hostname, a NodePool launches a NodeClaim that goes away some polls after
the NodePool is deleted). Every request is recorded so tests can check what a client sent.

Serve it on loopback with pytest-httpserver: `httpserver.expect_request(re.compile(".*"))
.respond_with_handler(fake.werkzeug_handler)`."""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from sizing.deploy.kube import KINDS

_PLURALS = {k.plural: k for k in KINDS.values()}
_PATH = re.compile(
    r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
    r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?$"
)


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    content_type: str
    authorization: str
    body: dict[str, Any] | None


@dataclass
class FakeKube:
    """State and behaviour of the fake cluster. Knobs: polls before readiness / LB address / node removal."""

    token: str | None = None
    deployment_ready_after: int = 1
    lb_address_after: int = 1
    nodeclaims_linger: int = 1
    #: (method, kind) pairs that answer 500, to simulate a failing API server.
    fail: set[tuple[str, str]] = field(default_factory=set)
    #: Kinds whose CRD is "not installed": every request for them answers 404.
    missing_kinds: set[str] = field(default_factory=set)
    objects: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list)
    _gets: dict[tuple[str, str, str], int] = field(default_factory=dict)
    _dying: dict[str, int] = field(default_factory=dict)
    _version: int = 0

    # --- the API --------------------------------------------------------------------------------------
    def handle(
        self, method: str, path: str, query: dict[str, str], headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, Any]]:
        doc = json.loads(body) if body else None
        self.requests.append(
            Recorded(
                method, path, query, headers.get("Content-Type", ""), headers.get("Authorization", ""), doc
            )
        )
        if self.token and headers.get("Authorization") != f"Bearer {self.token}":
            return 401, {"kind": "Status", "message": "Unauthorized", "code": 401}
        m = _PATH.match(path)
        if not m or m["plural"] not in _PLURALS:
            return 404, {"kind": "Status", "message": f"no route {path}", "code": 404}
        kind = _PLURALS[m["plural"]]
        if kind.kind in self.missing_kinds:
            return 404, {
                "kind": "Status",
                "message": "the server could not find the requested resource",
                "code": 404,
            }
        if (method, kind.kind) in self.fail:
            return 500, {"kind": "Status", "message": "injected failure", "code": 500}
        ns = m["ns"] or ""
        name = m["name"]
        if method == "PATCH" and name:
            return self._apply(kind.kind, ns, name, query, headers, doc or {})
        if method == "GET" and name:
            return self._get(kind.kind, ns, name)
        if method == "GET":
            return self._list(kind.kind, ns, query.get("labelSelector", ""))
        if method == "DELETE" and name:
            return self._delete(kind.kind, ns, name)
        return 405, {"kind": "Status", "message": f"{method} not supported", "code": 405}

    def werkzeug_handler(self, request: Any) -> Any:
        from werkzeug import Response

        status, payload = self.handle(
            request.method,
            request.path,
            {k: v for k, v in request.args.items()},
            dict(request.headers),
            request.get_data(),
        )
        return Response(json.dumps(payload), status=status, content_type="application/json")

    # --- verbs ----------------------------------------------------------------------------------------
    def _apply(
        self,
        kind: str,
        ns: str,
        name: str,
        query: dict[str, str],
        headers: dict[str, str],
        doc: dict[str, Any],
    ) -> tuple[int, dict[str, Any]]:
        if headers.get("Content-Type") != "application/apply-patch+yaml":
            return 415, {"kind": "Status", "message": "expected application/apply-patch+yaml", "code": 415}
        if not query.get("fieldManager"):
            return 422, {"kind": "Status", "message": "fieldManager is required for apply patch", "code": 422}
        if doc.get("kind") != kind or doc.get("metadata", {}).get("name") != name:
            return 400, {"kind": "Status", "message": "body does not match the URL", "code": 400}
        key = (kind, ns, name)
        old = self.objects.get(key)
        new = copy.deepcopy(doc)
        meta = new.setdefault("metadata", {})
        if old is None:
            meta["generation"] = 1
            meta["uid"] = f"uid-{len(self.objects) + 1}"
            meta["creationTimestamp"] = "2026-01-01T00:00:00Z"
            new["status"] = {}
            self._bump(new)
            if kind == "NodePool":
                self._launch_node(new)
        else:
            for k in ("generation", "uid", "creationTimestamp", "resourceVersion"):
                meta[k] = old["metadata"][k]
            new["status"] = old.get("status", {})
            if _without_server_fields(old) != _without_server_fields(new):
                if old.get("spec") != new.get("spec"):
                    meta["generation"] += 1
                self._bump(new)
        self.objects[key] = new
        return 200, copy.deepcopy(new)

    def _get(self, kind: str, ns: str, name: str) -> tuple[int, dict[str, Any]]:
        key = (kind, ns, name)
        obj = self.objects.get(key)
        if obj is None:
            return 404, {"kind": "Status", "message": f'{kind} "{name}" not found', "code": 404}
        self._gets[key] = self._gets.get(key, 0) + 1
        self._progress(kind, obj, self._gets[key])
        return 200, copy.deepcopy(obj)

    def _list(self, kind: str, ns: str, selector: str) -> tuple[int, dict[str, Any]]:
        if kind == "NodeClaim":
            self._reap_nodes()
        items = [
            copy.deepcopy(o)
            for (k, n, _), o in sorted(self.objects.items())
            if k == kind and (not ns or n == ns) and matches(selector, o["metadata"].get("labels") or {})
        ]
        for item in items:  # a real list returns items without kind/apiVersion
            item.pop("kind", None)
            item.pop("apiVersion", None)
        return 200, {"kind": f"{kind}List", "items": items}

    def _delete(self, kind: str, ns: str, name: str) -> tuple[int, dict[str, Any]]:
        obj = self.objects.pop((kind, ns, name), None)
        if obj is None:
            return 404, {"kind": "Status", "message": f'{kind} "{name}" not found', "code": 404}
        if kind == "NodePool":
            self._dying[name] = self.nodeclaims_linger
        return 200, {"kind": "Status", "status": "Success"}

    # --- the controllers' caricature ------------------------------------------------------------------
    def _bump(self, obj: dict[str, Any]) -> None:
        self._version += 1
        obj["metadata"]["resourceVersion"] = str(self._version)

    def _progress(self, kind: str, obj: dict[str, Any], gets: int) -> None:
        if kind == "Deployment" and gets >= self.deployment_ready_after:
            n = obj["spec"].get("replicas", 1)
            obj["status"] = {
                "observedGeneration": obj["metadata"]["generation"],
                "replicas": n,
                "updatedReplicas": n,
                "readyReplicas": n,
                "availableReplicas": n,
            }
        if kind == "Service" and obj["spec"].get("type") == "LoadBalancer" and gets >= self.lb_address_after:
            host = f"{obj['metadata']['name']}.elb.us-east-1.amazonaws.com"
            obj["status"] = {"loadBalancer": {"ingress": [{"hostname": host}]}}

    def _launch_node(self, pool: dict[str, Any]) -> None:
        name = f"{pool['metadata']['name']}-node1"
        labels = dict(pool["spec"]["template"]["metadata"].get("labels", {}))
        labels["karpenter.sh/nodepool"] = pool["metadata"]["name"]
        self.objects[("NodeClaim", "", name)] = {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {"name": name, "labels": labels, "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {},
        }

    def _reap_nodes(self) -> None:
        for pool, polls in list(self._dying.items()):
            if polls <= 0:
                for key in [
                    k
                    for k, o in self.objects.items()
                    if k[0] == "NodeClaim" and o["metadata"]["labels"].get("karpenter.sh/nodepool") == pool
                ]:
                    del self.objects[key]
                del self._dying[pool]
            else:
                self._dying[pool] = polls - 1

    # --- helpers for tests ----------------------------------------------------------------------------
    def put(self, obj: dict[str, Any]) -> None:
        """Store an object as if someone else had created it (e.g. the Hugging Face token Secret)."""
        meta = obj["metadata"]
        self.objects[(obj["kind"], meta.get("namespace", ""), meta["name"])] = copy.deepcopy(obj)

    def with_hf_secret(self, namespace: str = "llm-sizing", name: str = "hf-token") -> FakeKube:
        self.put({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace}})
        return self

    def names(self, kind: str) -> list[str]:
        return sorted(n for (k, _, n) in self.objects if k == kind)

    def calls(self, method: str) -> list[Recorded]:
        return [r for r in self.requests if r.method == method]


def _without_server_fields(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out.pop("status", None)
    for k in ("generation", "uid", "creationTimestamp", "resourceVersion"):
        out["metadata"].pop(k, None)
    return out


def matches(selector: str, labels: dict[str, str]) -> bool:
    """Equality (`k=v`, `k==v`, `k!=v`) and existence (`k`, `!k`) terms, ANDed, as Kubernetes does."""
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k) == v:
                return False
        elif "=" in term:
            k, v = term.replace("==", "=").split("=", 1)
            if labels.get(k) != v:
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def parse_query(qs: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(qs).items()}
