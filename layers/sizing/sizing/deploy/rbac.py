"""Kubernetes RBAC for the identity that provisions and sweeps (the step and janitor functions' IAM role, mapped
to a Kubernetes group by an EKS access entry): exactly the verbs `EksProvisioner` and the janitor use.

Cluster-wide because node pools and node classes are cluster-scoped and the janitor lists every namespace;
Secrets only by name, only read, only in the serving namespace."""

from __future__ import annotations

from typing import Any

from sizing.deploy import labels as L
from sizing.deploy.rendering import RenderOptions

#: The Kubernetes group an EKS access entry maps the functions' IAM role to.
DEFAULT_GROUP = "llm-sizing"
_MANAGE = ["get", "list", "create", "patch", "delete"]


def rbac(options: RenderOptions | None = None, group: str = DEFAULT_GROUP) -> list[dict[str, Any]]:
    """ClusterRole + binding for provisioning and the janitor, Role + binding to read the token Secret."""
    opts = options or RenderOptions()
    name = f"{L.NAME_PREFIX}-provisioner"
    labels = {L.MANAGED_BY: L.MANAGER}
    subject = [{"kind": "Group", "name": group, "apiGroup": "rbac.authorization.k8s.io"}]
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name, "labels": labels},
            "rules": [
                {"apiGroups": ["karpenter.sh"], "resources": ["nodepools"], "verbs": _MANAGE},
                {
                    "apiGroups": ["karpenter.sh"],
                    "resources": ["nodeclaims"],
                    "verbs": ["get", "list", "delete"],
                },
                {"apiGroups": ["karpenter.k8s.aws"], "resources": ["ec2nodeclasses"], "verbs": _MANAGE},
                {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": _MANAGE},
                {"apiGroups": [""], "resources": ["services"], "verbs": _MANAGE},
                {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": _MANAGE},
                {"apiGroups": ["autoscaling"], "resources": ["horizontalpodautoscalers"], "verbs": _MANAGE},
                {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "create", "patch"]},
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": subject,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": f"{name}-secret", "namespace": opts.namespace, "labels": labels},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["secrets"],
                    "resourceNames": [opts.hf_token_secret],
                    "verbs": ["get"],
                }
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": f"{name}-secret", "namespace": opts.namespace, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": f"{name}-secret"},
            "subjects": subject,
        },
    ]
