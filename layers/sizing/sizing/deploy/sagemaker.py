"""Provision a candidate as a SageMaker real-time endpoint: model → endpoint config → endpoint, each tagged with
the run and candidate ids (and the run's deadline) so teardown and the janitor find exactly them by tag.

The container is AWS's LMI (Large Model Inference) image running vLLM, configured through its `OPTION_*`
environment variables from the architecture's `ServingConfig`: the same settings the EKS manifests give vLLM's
command line. The image is LMI's, not `serving.image`: a SageMaker container must answer SageMaker's own
protocol (`/ping`, `/invocations` on port 8080), which the plain vLLM OpenAI image does not; LMI hosts the same
engine behind it. Only vLLM architectures are provisioned here (LMI's `vllm` rolling batch on GPUs); another
engine is refused rather than served by a different one than was estimated."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterator
from typing import Any

from sizing.base.aws import paged, tag_map
from sizing.base.errors import InvalidInput, Problem
from sizing.base.serving_config import VLLM_FP8_KV, ServingConfig
from sizing.deploy import labels as L
from sizing.deploy.architecture import DeployTarget
from sizing.deploy.base import Endpoint, EndpointKind, Provisioner, TeardownReport, as_target
from sizing.deploy.kube import ProvisioningError
from sizing.deploy.labels import DEFAULT_MAX_DURATION_S

log = logging.getLogger(__name__)

#: AWS LMI container with vLLM (the account is AWS's Deep Learning Containers registry in most regions).
DEFAULT_IMAGE = "763104351884.dkr.ecr.{region}.amazonaws.com/djl-inference:0.33.0-lmi15.0.0-cu128"
VARIANT = "AllTraffic"
#: Model download + load of a 70B model takes tens of minutes (docs/serving-facts.md s4); SageMaker allows 3600.
STARTUP_HEALTH_TIMEOUT_S = 3600
DOWNLOAD_TIMEOUT_S = 3600
#: In-flight quantization the LMI vLLM backend does on an unquantized checkpoint (as RenderOptions for EKS).
LMI_QUANTIZE = {"fp8": "fp8", "int4": "bitsandbytes"}


def _tags(run_id: str, candidate_id: str, expires_at: float) -> list[dict[str, str]]:
    return [
        {"Key": L.RUN_ID, "Value": run_id},
        {"Key": L.CANDIDATE_ID, "Value": candidate_id},
        {"Key": L.EXPIRES_AT, "Value": str(int(expires_at))},
        {"Key": L.MANAGED_BY, "Value": L.MANAGER},
    ]


def _exists(exc: Exception) -> bool:
    text = str(exc).lower()
    return "already exist" in text or "cannot create already existing" in text


class SageMakerProvisioner(Provisioner):
    """Real-time endpoints for EKS-shaped architectures; needs an execution role SageMaker can assume."""

    kind: EndpointKind = "sagemaker"

    def __init__(
        self,
        execution_role_arn: str | None = None,
        *,
        region: str = "us-east-1",
        client: Any | None = None,
        image_uri: str | None = None,
        max_duration_s: float = DEFAULT_MAX_DURATION_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if client is None:
            import boto3

            client = boto3.client("sagemaker", region_name=region)
        self.sm = client
        self.role = execution_role_arn
        self.region = region
        self.image = image_uri or DEFAULT_IMAGE.format(region=region)
        self.max_duration_s = max_duration_s
        self.clock = clock

    def name(self, arch: DeployTarget, run_id: str, candidate_id: str) -> str:
        return L.object_name(run_id, candidate_id, arch.instance_type or "")

    def _environment(self, arch: DeployTarget) -> dict[str, str]:
        """LMI's settings for `arch.serving`. LMI passes `OPTION_<vLLM engine arg>` through to vLLM; its own
        names stand for tensor_parallel_size (TENSOR_PARALLEL_DEGREE), max_num_seqs (MAX_ROLLING_BATCH_SIZE),
        max_num_batched_tokens (MAX_ROLLING_BATCH_PREFILL_TOKENS) and quantization (QUANTIZE)
        [deepjavalibrary/djl-serving djl_python/properties_manager/vllm_rb_properties.py]."""
        s = arch.serving
        assert s is not None
        env = {
            # The served model exactly as the workload named it (never the catalog's base model).
            "HF_MODEL_ID": s.model,
            "OPTION_ROLLING_BATCH": "vllm",
            "OPTION_TENSOR_PARALLEL_DEGREE": str(s.tensor_parallel),
            "OPTION_MAX_MODEL_LEN": str(s.max_model_len),
            "OPTION_MAX_ROLLING_BATCH_SIZE": str(s.max_num_seqs),
            "OPTION_GPU_MEMORY_UTILIZATION": str(s.gpu_memory_utilization),
            "OPTION_KV_CACHE_DTYPE": VLLM_FP8_KV if s.kv_cache_dtype == "fp8" else "auto",
            # LMI turns a "false" of a passthrough boolean into no flag at all (vLLM's default then applies):
            # stated anyway so the endpoint's configuration reads as estimated.
            "OPTION_ENABLE_CHUNKED_PREFILL": str(s.enable_chunked_prefill).lower(),
            "OPTION_ENABLE_PREFIX_CACHING": str(s.enable_prefix_caching).lower(),
        }
        if s.max_num_batched_tokens:
            env["OPTION_MAX_ROLLING_BATCH_PREFILL_TOKENS"] = str(s.max_num_batched_tokens)
        if s.quantization in LMI_QUANTIZE:
            env["OPTION_QUANTIZE"] = LMI_QUANTIZE[s.quantization]
        return env

    @staticmethod
    def _check(serving: ServingConfig) -> None:
        if serving.engine != "vllm":
            raise InvalidInput(
                f"serving.engine '{serving.engine}': SageMaker endpoints are provisioned with LMI's vLLM backend"
                " only; choose a vllm architecture",
                [Problem("serving.engine", f"'{serving.engine}' is not provisioned on SageMaker (use vllm)")],
            )

    # --- apply ----------------------------------------------------------------------------------------
    def apply(
        self, architecture: DeployTarget | dict[str, Any], run_id: str, candidate_id: str | None = None
    ) -> Endpoint:
        raw = as_target(architecture)
        cand = candidate_id or raw.id
        if not self.role:
            raise ProvisioningError(
                "no SageMaker execution role configured (SageMakerProvisioner(execution_role_arn=...))"
            )
        # Checked before anything is created: a refusal leaves nothing to tear down.
        arch = raw.resolve()
        assert arch.serving is not None
        self._check(arch.serving)
        try:
            name = self.name(arch, run_id, cand)
            tags = _tags(run_id, cand, L.deadline(self.max_duration_s, self.clock()))
            assert arch.instance_type and arch.replicas_per_instance
            # One model copy per instance on a plain endpoint: replicas that share an instance on EKS
            # still need whole instances here.
            count = max(1, math.ceil(max(1, arch.replicas.min) / arch.replicas_per_instance))
            self._create(
                self.sm.create_model,
                ModelName=name,
                ExecutionRoleArn=self.role,
                PrimaryContainer={"Image": self.image, "Environment": self._environment(arch)},
                Tags=tags,
            )
            self._create(
                self.sm.create_endpoint_config,
                EndpointConfigName=name,
                ProductionVariants=[
                    {
                        "VariantName": VARIANT,
                        "ModelName": name,
                        "InstanceType": f"ml.{arch.instance_type}",
                        "InitialInstanceCount": count,
                        "ContainerStartupHealthCheckTimeoutInSeconds": STARTUP_HEALTH_TIMEOUT_S,
                        "ModelDataDownloadTimeoutInSeconds": DOWNLOAD_TIMEOUT_S,
                    }
                ],
                Tags=tags,
            )
            self._create(self.sm.create_endpoint, EndpointName=name, EndpointConfigName=name, Tags=tags)
        except BaseException:
            log.warning("SageMaker apply of %s failed: tearing down", cand)
            try:
                self.teardown(run_id, cand)
            except Exception:
                log.exception("teardown after a failed apply of %s did not finish", cand)
            raise
        return Endpoint(
            url=f"https://runtime.sagemaker.{self.region}.amazonaws.com/endpoints/{name}/invocations",
            kind=self.kind,
            run_id=run_id,
            candidate_id=cand,
            model=arch.serving.model,
            details={"endpoint_name": name, "region": self.region},
        )

    def _create(self, call: Callable[..., Any], **kwargs: Any) -> None:
        """Create, treating "already exists" as done (re-apply is idempotent)."""
        try:
            call(**kwargs)
        except self.sm.exceptions.ClientError as exc:
            if not _exists(exc):
                raise ProvisioningError(f"SageMaker refused: {exc}") from None

    # --- ready ----------------------------------------------------------------------------------------
    def ready(self, endpoint: Endpoint) -> bool:
        """InService → True; Creating/Updating → False; Failed → ProvisioningError with SageMaker's reason."""
        try:
            desc = self.sm.describe_endpoint(EndpointName=endpoint.details["endpoint_name"])
        except self.sm.exceptions.ClientError:
            return False
        status = desc.get("EndpointStatus")
        if status == "Failed":
            raise ProvisioningError(
                f"endpoint {endpoint.details['endpoint_name']} failed: {desc.get('FailureReason')}"
            )
        return bool(status == "InService")

    # --- teardown -------------------------------------------------------------------------------------
    def _tagged(self, kind: str, run_id: str, candidate_id: str | None) -> Iterator[str]:
        """Names of endpoints/configs/models whose tags carry the run (and candidate)."""
        listing = {
            "endpoint": ("list_endpoints", "Endpoints", "EndpointName", "EndpointArn"),
            "config": ("list_endpoint_configs", "EndpointConfigs", "EndpointConfigName", "EndpointConfigArn"),
            "model": ("list_models", "Models", "ModelName", "ModelArn"),
        }[kind]
        for item in paged(self.sm, listing[0], listing[1]):
            tags = tag_map(self.sm.list_tags(ResourceArn=item[listing[3]]).get("Tags", []))
            if tags.get(L.RUN_ID) == run_id and (
                candidate_id is None or tags.get(L.CANDIDATE_ID) == candidate_id
            ):
                yield item[listing[2]]

    def teardown(self, run_id: str, candidate_id: str | None = None) -> TeardownReport:
        report = TeardownReport()
        deleters: dict[str, Callable[[str], Any]] = {
            "endpoint": lambda n: self.sm.delete_endpoint(EndpointName=n),
            "config": lambda n: self.sm.delete_endpoint_config(EndpointConfigName=n),
            "model": lambda n: self.sm.delete_model(ModelName=n),
        }
        for kind, delete in deleters.items():
            for name in list(self._tagged(kind, run_id, candidate_id)):
                try:
                    delete(name)
                    report.deleted.append(f"sagemaker-{kind}/{name}")
                except self.sm.exceptions.ClientError as exc:
                    report.remaining.append(f"sagemaker-{kind}/{name}: {exc}")
        return report
