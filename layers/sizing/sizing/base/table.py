"""The key scheme of the product's single DynamoDB table, in one place: every item's partition and sort key, the
listing index and its partitions. Writers build keys here and readers match them here, so a prefix is spelled
once.

    item                      PK                     SK                                GSI1PK          GSI1SK
    run                       RUN#{run_id}           RUN                               RUNS            {created_at}#{run_id}
    architecture              RUN#{run_id}           ARCH#{rank:04d}#{id}
    measurement               RUN#{run_id}           MEAS#{candidate}#{seq}
    ranking                   RUN#{run_id}           RANKING
    measured level            RUN#{run_id}           LEVEL#{candidate}#{level:06d}     MEASURED[#twin] {family}#{model}#...
    a level's engine steps    RUN#{run_id}           STEPS#{candidate}#{n:03d}         MEASURED#steps  {family}#{model}#...
    watch                     WATCH#{id}             WATCH                             WATCHES         {created_at}#{id}
    watch's release options   WATCH#{id}             RELEASE
    watch's release result    WATCH#{id}             RESULT#{at}#{model}
    released model            MODEL#{id}             MODEL                             MODELS          {added_at}#{id}
    Hub model seen            HFSEEN#{id}            SEEN
    Slack signature seen      SLACKSIG#{signature}   SLACKSIG
    idempotency record        (Powertools' own, in PK/SK under a static partition per feature)

Measurements, signatures and idempotency records carry `expires_at`, the table's TTL attribute."""

from __future__ import annotations

#: The table's key attributes and its one global secondary index (listings, newest first).
PK = "PK"
SK = "SK"
GSI1PK = "GSI1PK"
GSI1SK = "GSI1SK"
KEY_ATTRS = (PK, SK, GSI1PK, GSI1SK)
INDEX = "GSI1"
#: The attribute DynamoDB's TTL deletes items by.
TTL_ATTR = "expires_at"

#: GSI1 partitions: what each listing holds.
RUNS = "RUNS"
WATCHES = "WATCHES"
MODELS = "MODELS"
MEASURED = "MEASURED"
MEASURED_TWIN = "MEASURED#twin"
MEASURED_STEPS = "MEASURED#steps"

#: Partition-key prefixes and the sort-key prefixes queried by `begins_with`.
RUN_PREFIX = "RUN#"
WATCH_PREFIX = "WATCH#"
ARCH_PREFIX = "ARCH#"
MEAS_PREFIX = "MEAS#"
LEVEL_PREFIX = "LEVEL#"
STEPS_PREFIX = "STEPS#"
RESULT_PREFIX = "RESULT#"

#: Sort keys of the one-per-partition items.
RUN_SK = "RUN"
RANKING_SK = "RANKING"
WATCH_SK = "WATCH"
RELEASE_OPTIONS_SK = "RELEASE"


def run_pk(run_id: str) -> str:
    return f"{RUN_PREFIX}{run_id}"


def watch_pk(watch_id: str) -> str:
    return f"{WATCH_PREFIX}{watch_id}"


def run_key(run_id: str) -> dict[str, str]:
    return {PK: run_pk(run_id), SK: RUN_SK}


def architecture_key(run_id: str, rank: int, architecture_id: str) -> dict[str, str]:
    return {PK: run_pk(run_id), SK: f"{ARCH_PREFIX}{rank:04d}#{architecture_id}"}


def measurement_key(run_id: str, candidate_id: str, seq: str) -> dict[str, str]:
    return {PK: run_pk(run_id), SK: f"{MEAS_PREFIX}{candidate_id}#{seq}"}


def ranking_key(run_id: str) -> dict[str, str]:
    return {PK: run_pk(run_id), SK: RANKING_SK}


def level_key(run_id: str, candidate_id: str, level: int) -> dict[str, str]:
    return {PK: run_pk(run_id), SK: f"{LEVEL_PREFIX}{candidate_id}#{level:06d}"}


def steps_key(run_id: str, candidate_id: str, n: int) -> dict[str, str]:
    return {PK: run_pk(run_id), SK: f"{STEPS_PREFIX}{candidate_id}#{n:03d}"}


def watch_key(watch_id: str) -> dict[str, str]:
    return {PK: watch_pk(watch_id), SK: WATCH_SK}


def watch_options_key(watch_id: str) -> dict[str, str]:
    return {PK: watch_pk(watch_id), SK: RELEASE_OPTIONS_SK}


def watch_result_key(watch_id: str, at: str, model_id: str) -> dict[str, str]:
    return {PK: watch_pk(watch_id), SK: f"{RESULT_PREFIX}{at}#{model_id}"}


def model_key(model_id: str) -> dict[str, str]:
    return {PK: f"MODEL#{model_id}", SK: "MODEL"}


def hub_seen_key(model_id: str) -> dict[str, str]:
    return {PK: f"HFSEEN#{model_id}", SK: "SEEN"}


def slack_signature_key(signature: str) -> dict[str, str]:
    return {PK: f"SLACKSIG#{signature}", SK: "SLACKSIG"}


def listed(created_at: str, item_id: str) -> str:
    """A listing's sort key: newest first when read backwards (`created_at` sorts lexically in time order)."""
    return f"{created_at}#{item_id}"
