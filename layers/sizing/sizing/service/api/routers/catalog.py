"""GET /catalog/instances and /catalog/models: what the estimator knows about."""

from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query

from sizing.catalog import load_catalog
from sizing.catalog.records import GB
from sizing.service.api import deps
from sizing.service.api.models import InstanceList, InstanceOut, ModelList, ModelOut
from sizing.service.api.responses import ok

router = Router()

#: AWS region names: two or three lowercase groups and a number (us-east-1, ap-southeast-2, us-gov-west-1).
REGION_PATTERN = r"^[a-z]{2}(-[a-z]+){1,2}-\d$"


@router.get(
    "/catalog/instances",
    summary="Accelerated instance types and prices",
    tags=["catalog"],
    responses=ok(InstanceList, "instance types with their accelerators and on-demand prices"),
)
def list_instances(
    region: Annotated[str, Query(pattern=REGION_PATTERN, description="prices for this region")] = "us-east-1",
    family: Annotated[
        str | None, Query(max_length=16, description="only this family (g5, p5, inf2, ...)")
    ] = None,
) -> InstanceList:
    cat = load_catalog()
    out: list[InstanceOut] = []
    for inst in sorted(cat.instances.values(), key=lambda i: i.instance_type):
        if family and inst.family != family.lower():
            continue
        acc = cat.accelerator_of(inst)
        price = inst.price(region)
        out.append(
            InstanceOut(
                instance_type=inst.instance_type,
                family=inst.family,
                accelerator=acc.id,
                accelerator_name=acc.name,
                accelerator_count=inst.accelerator_count,
                devices=cat.devices(inst),
                device_memory_gb=round(acc.device_memory_bytes / GB, 2),
                vcpu=inst.vcpu,
                memory_gib=inst.memory_gib,
                usd_per_hour=price.usd_per_hour,
                price_assumed=price.assumed,
                spot_discount=inst.spot_discount.fraction,
            )
        )
    return InstanceList(region=region, instances=out)


@router.get(
    "/catalog/models",
    summary="Models the estimator knows",
    tags=["catalog"],
    responses=ok(ModelList, "the catalog's models, those added by model releases included"),
)
def list_models() -> ModelList:
    cat = deps.catalog()
    models = [
        ModelOut(
            id=m.id,
            aliases=list(m.aliases),
            params_b=m.params_b,
            active_params_b=m.active_params_b,
            layers=m.layers,
            max_context_tokens=m.max_position_embeddings,
            moe=m.moe is not None,
            kv_bytes_per_token_bf16=m.kv_bytes_per_token(),
            bedrock=[o.bedrock_model_id for o in cat.bedrock_offers(m.id)],
        )
        for m in sorted(cat.models.values(), key=lambda m: m.id)
    ]
    return ModelList(models=models)
