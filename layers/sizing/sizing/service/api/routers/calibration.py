"""GET /calibration: the team's calibration profile versions -- which one estimates use, and per version its
figures (cross-validated error on the team's levels and on the reference rows), decision and what changed
(`sizing.learn`, docs/learning.md). Rolling back is `sizing calibrate --rollback VERSION`."""

from typing import Annotated, Any

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query
from pydantic import Field

from sizing.base.strict import Open, Strict
from sizing.service.api.responses import ok

router = Router()

#: Versions listed at most (newest first): a refit per measured run, so 100 is months of a team's runs.
MAX_VERSIONS = 100


class CalibrationVersion(Open):
    version: str = Field(description="sortable: UTC time of the refit, then a short digest")
    status: str | None = Field(
        default=None,
        description="adopted (estimates may use it), candidate (kept with its figures), unreadable",
    )
    created_at: str | None = None
    parent: str | None = Field(default=None, description="the version adopted when this one was fitted")
    levels: int | None = Field(default=None, description="measured levels the refit used")
    runs: int | None = None
    team_error: dict[str, Any] | None = Field(
        default=None,
        description="MdAPE on the team's levels: before (adopted profile), after (leave-one-level-out)",
    )
    reference_error: dict[str, Any] | None = Field(
        default=None, description="per metric, the reference rows' cross-validated MdAPE before and after"
    )
    decision: dict[str, Any] | None = None
    what_changed: list[str] = Field(default_factory=list)
    corrections: dict[str, Any] = Field(
        default_factory=dict,
        description="per family/engine/model (and family/engine/*), the two time scales; a model's step correction"
        " also states `steps`, the step time's factors fitted to its server's own steps (docs/learning.md)",
    )
    refit_seconds: float | None = None


class CalibrationOverview(Strict):
    adopted: str = Field(
        description="the version estimates use now; `reference` for the shipped profile alone"
    )
    history: list[str] = Field(default_factory=list, description="versions adopted, newest first")
    reference_version: str = Field(description="the shipped reference profile every correction sits on")
    configured: bool = Field(
        description="false where no calibration bucket is configured (nothing is learned)"
    )
    versions: list[CalibrationVersion]


@router.get(
    "/calibration",
    summary="The team's calibration profiles: versions, figures, what changed",
    tags=["calibration"],
    responses=ok(CalibrationOverview, "the adopted version and the stored versions, newest first"),
)
def get_calibration(
    limit: Annotated[int, Query(ge=1, le=MAX_VERSIONS, description="versions listed, newest first")] = 20,
) -> CalibrationOverview:
    # deferred: sizing.learn.refit and what it loads cost the API's cold start ~20 ms (-X importtime), and
    # only this route needs them
    from sizing.learn.profiles import configured_store
    from sizing.learn.refit import overview, shipped_reference

    store = configured_store()
    if store is None:
        return CalibrationOverview(
            adopted="reference", reference_version=shipped_reference()[0], configured=False, versions=[]
        )
    data = overview(store, limit)
    return CalibrationOverview(**data, configured=True)
