"""The labels and tags that mark what a sizing run provisioned.

One prefix (`sizing.llm/`) is used everywhere: on Kubernetes objects and Karpenter node templates, on EC2
instances (through the EC2NodeClass tags), on SageMaker resources, and in the selectors of teardown and the
janitor. Anything carrying `RUN_ID` belongs to exactly one run and may be deleted once that run is over."""

from __future__ import annotations

import hashlib
import re
import time

PREFIX = "sizing.llm"
RUN_ID = f"{PREFIX}/run-id"
CANDIDATE_ID = f"{PREFIX}/candidate-id"
#: Unix time (seconds) after which the janitor removes the object whatever the run's status.
EXPIRES_AT = f"{PREFIX}/expires-at"
#: The full, unsanitised ids (annotations and tags accept any characters).
RUN_ID_FULL = f"{PREFIX}/run-id-full"
CANDIDATE_ID_FULL = f"{PREFIX}/candidate-id-full"
MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "llm-sizing"

#: A sizing run's resources live at most this long unless told otherwise (the janitor's deadline).
DEFAULT_MAX_DURATION_S = 4 * 3600
#: Kubernetes kinds of one candidate, in apply order (teardown deletes these, in reverse).
ORDER = [
    "EC2NodeClass",
    "NodePool",
    "Service",
    "PodDisruptionBudget",
    "Deployment",
    "HorizontalPodAutoscaler",
]
#: Kinds removed by teardown, in order: the autoscaler and pods first, the node pools and classes last.
TEARDOWN_ORDER = list(reversed(ORDER))

#: Kubernetes label values: at most 63 characters of [A-Za-z0-9-_.], starting and ending alphanumeric.
_LABEL_MAX = 63
_LABEL_BAD = re.compile(r"[^A-Za-z0-9_.-]+")
#: Object names (DNS-1035 labels, what a Service needs): lowercase, digits and '-', start with a letter.
_NAME_MAX = 63
_NAME_BAD = re.compile(r"[^a-z0-9-]+")
#: Every object name starts with this; the stack's IAM policies scope SageMaker permissions to `sizing-*`.
NAME_PREFIX = "sizing"
#: Hex digits of the sha256 used to keep names unique when they are shortened; 10 hex = 40 bits.
_HASH_CHARS = 10


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:_HASH_CHARS]


def label_value(raw: str) -> str:
    """A valid label value for an id: invalid characters become '-'; ids too long keep a hash suffix.

    `eks:p5.48xlarge:tp4:fp8:vllm:on-demand` → `eks-p5.48xlarge-tp4-fp8-vllm-on-demand`."""
    value = _LABEL_BAD.sub("-", raw).strip("-_.")
    if len(value) > _LABEL_MAX:
        value = value[: _LABEL_MAX - _HASH_CHARS - 1].rstrip("-_.") + "-" + _digest(raw)
    return value


def object_name(run_id: str, candidate_id: str, hint: str = "") -> str:
    """A short, unique, DNS-safe name for one candidate of one run (used for every object of it)."""
    stem = _NAME_BAD.sub("-", hint.lower()).strip("-") if hint else ""
    suffix = _digest(run_id, candidate_id)
    room = _NAME_MAX - len(NAME_PREFIX) - 2 - len(suffix)
    stem = stem[:room].strip("-")
    return f"{NAME_PREFIX}-{stem}-{suffix}" if stem else f"{NAME_PREFIX}-{suffix}"


def run_labels(run_id: str, candidate_id: str, expires_at: float | None = None) -> dict[str, str]:
    labels = {
        MANAGED_BY: MANAGER,
        RUN_ID: label_value(run_id),
        CANDIDATE_ID: label_value(candidate_id),
    }
    if expires_at is not None:
        labels[EXPIRES_AT] = str(int(expires_at))
    return labels


def selector(run_id: str, candidate_id: str | None = None) -> str:
    """The label selector for everything of a run (or of one candidate of it)."""
    terms = [f"{RUN_ID}={label_value(run_id)}"]
    if candidate_id is not None:
        terms.append(f"{CANDIDATE_ID}={label_value(candidate_id)}")
    return ",".join(terms)


def deadline(max_duration_s: float, now: float | None = None) -> float:
    return (time.time() if now is None else now) + max_duration_s
