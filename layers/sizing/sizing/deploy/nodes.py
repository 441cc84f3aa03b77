"""The nodes an architecture runs on: Karpenter's EC2NodeClass (AMI pin, node volume) and NodePool
(instance type, zones, taint, limits), with their disruption rules: a sizing run's nodes expire after its maximum
duration, serving nodes never expire on their own and are replaced only outside business hours."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from sizing.deploy import labels as L
from sizing.deploy.rendering import ZONE_KEY, _Plan, _quantity_gib

KARPENTER_API = "karpenter.sh/v1"
NODECLASS_API = "karpenter.k8s.aws/v1"


#: Bottlerocket keeps the OS on a small first volume (Karpenter's default 4 GiB) and images/pods on the second.
BOTTLEROCKET_OS_GIB = 4
#: gp3 at its maximum throughput and IOPS (AWS EBS gp3 limits: 1,000 MiB/s, 16,000 IOPS): loading weights
#: from gp3 at its baseline took 48 s for an 8B model against 7.5 s from io2 (docs/serving-facts.md s4).
GP3_THROUGHPUT_MIBS = 1000
GP3_IOPS = 16000


#: Karpenter waits this long before removing an empty node: long enough that a restarting pod does not bounce
#: its GPU node, short enough that an idle GPU node costs minutes, not hours.
CONSOLIDATE_AFTER = "2m"
#: Sizing run: bound on how long Karpenter waits for pods (do-not-disrupt included) when a node expires or is
#: deleted; the run is over by then.
NODE_TERMINATION_GRACE = "10m"
#: Serving: a node being replaced drains one pod at a time (the PDB allows one unavailable); each evicted pod's
#: replacement loads the model within the startup budget before the next may go. The grace period is that budget
#: for every pod of the node plus this margin for the eviction and the scheduling of the replacement.
SERVE_GRACE_MARGIN_S = 10 * 60
#: Serving nodes do not expire: in Karpenter v1 expiry is forceful (it ignores disruption budgets and
#: `karpenter.sh/do-not-disrupt`), so an expiry would reload models at any hour. Nodes are replaced by drift
#: instead (a new AMI pin below), which the disruption budgets keep outside business hours.
SERVE_EXPIRE_AFTER = "Never"


#: Local business hours the serving nodes are protected in: 08:00 for 10 hours, Monday to Friday (the window above,
#: in the workload's own time zone when it has one: `business_hours_window`).
BUSINESS_HOURS_START = 8
BUSINESS_HOURS_LENGTH = 10


@dataclass(frozen=True)
class BusinessHoursWindow:
    """Karpenter's budget window (cron in UTC, duration) for local business hours on a given date, and when the
    zone's UTC offset next changes (the window then moves by the change: re-render, or see `note`)."""

    schedule: str
    duration: str
    utc_offset_h: float
    next_change: date | None
    note: str


def business_hours_window(timezone: str, on: date | None = None) -> BusinessHoursWindow:
    """Local BUSINESS_HOURS_START for BUSINESS_HOURS_LENGTH hours, Monday to Friday, in `timezone` on date `on`
    (default today), as a Karpenter budget: its cron is UTC (Karpenter schedules have no time zone), so a local
    08:00 in New York is 13:00 UTC in winter and 12:00 in summer, and a start that falls on the UTC day before
    (Tokyo's 08:00 is 23:00 UTC) moves the weekdays with it. A zone whose offset changes states when."""
    zone = ZoneInfo(timezone)
    day = on or datetime.now(UTC).date()
    local = datetime.combine(day, time(BUSINESS_HOURS_START), tzinfo=zone)
    offset = local.utcoffset() or timedelta(0)
    start = local.astimezone(UTC)
    shift = (start.date() - day).days  # -1: the UTC start is the day before; +1: the day after
    days = {-1: "0-4", 0: "1-5", 1: "2-6"}[shift]
    minute = f"{start.minute}" if start.minute else "0"
    schedule = f"{minute} {start.hour} * * {days}"
    change = None
    for k in range(1, 367):  # the next date whose 08:00 has another offset (DST), within a year
        later = datetime.combine(day + timedelta(days=k), time(BUSINESS_HOURS_START), tzinfo=zone)
        if later.utcoffset() != offset:
            change = later.date()
            break
    hours = offset.total_seconds() / 3600
    note = f"{BUSINESS_HOURS_START:02d}:00-{BUSINESS_HOURS_START + BUSINESS_HOURS_LENGTH:02d}:00 {timezone}"
    note += f" (UTC{hours:+g}) is {start:%H:%M}-{(start + timedelta(hours=BUSINESS_HOURS_LENGTH)):%H:%M} UTC"
    if change is not None:
        note += f" until {change:%Y-%m-%d}, when the zone's offset changes: render again then"
    return BusinessHoursWindow(schedule, f"{BUSINESS_HOURS_LENGTH}h", hours, change, note)


def _nodeclass(p: _Plan) -> dict[str, Any]:
    discovery = {"karpenter.sh/discovery": p.opts.cluster_name}
    ebs = {
        "volumeType": "gp3",
        "encrypted": True,
        "deleteOnTermination": True,
        "throughput": GP3_THROUGHPUT_MIBS,
        "iops": GP3_IOPS,
    }
    if p.opts.ami_family == "bottlerocket":
        devices = [
            {
                "deviceName": "/dev/xvda",
                "ebs": {"volumeSize": f"{BOTTLEROCKET_OS_GIB}Gi", "volumeType": "gp3"},
            },
            {
                "deviceName": "/dev/xvdb",
                "rootVolume": True,
                "ebs": {"volumeSize": f"{p.volume_gib}Gi", **ebs},
            },
        ]
    else:
        devices = [
            {"deviceName": "/dev/xvda", "rootVolume": True, "ebs": {"volumeSize": f"{p.volume_gib}Gi", **ebs}}
        ]
    spec: dict[str, Any] = {
        "amiSelectorTerms": [{"alias": f"{p.opts.ami_family}@{p.ami_version}"}],
        "role": p.opts.node_role,
        "subnetSelectorTerms": [{"tags": discovery}],
        "securityGroupSelectorTerms": [{"tags": discovery}],
        "blockDeviceMappings": devices,
        "metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": 1},
        # Tags reach the EC2 instances and volumes: a leak is traceable to its run from the EC2 console.
        "tags": {
            L.RUN_ID: p.labels[L.RUN_ID],
            L.CANDIDATE_ID: p.labels[L.CANDIDATE_ID],
            L.MANAGED_BY: L.MANAGER,
        },
    }
    if p.opts.capacity_reservation:
        # Karpenter v1.3+ (the CRD in deploy/schemas/ has it): nodes launch into this On-Demand Capacity
        # Reservation or Capacity Block first, labelled karpenter.sh/capacity-type=reserved.
        spec["capacityReservationSelectorTerms"] = [{"id": p.opts.capacity_reservation}]
    return {
        "apiVersion": NODECLASS_API,
        "kind": "EC2NodeClass",
        "metadata": p.meta(p.name, namespaced=False),
        "spec": spec,
    }


def _disruption(p: _Plan) -> dict[str, Any]:
    """Only empty nodes are consolidated. A sizing run's nodes are never disrupted for drift or utilisation
    (the run ends first). Serving nodes: never for Drifted/Underutilized during business hours, one node at a
    time otherwise (an AMI pin bump rolls through the nodes overnight)."""
    reasons = ["Drifted", "Underutilized"]
    if p.purpose == "run":
        budgets: list[dict[str, Any]] = [
            {"nodes": "1", "reasons": ["Empty"]},
            {"nodes": "0", "reasons": reasons},
        ]
    else:
        budgets = [
            {"nodes": "1", "reasons": ["Empty"]},
            {
                "nodes": "0",
                "reasons": reasons,
                "schedule": p.opts.business_hours_schedule,
                "duration": p.opts.business_hours_duration,
            },
            {"nodes": "1", "reasons": reasons},
        ]
    return {"consolidationPolicy": "WhenEmpty", "consolidateAfter": CONSOLIDATE_AFTER, "budgets": budgets}


def _expiry(p: _Plan) -> tuple[str, str]:
    """(expireAfter, terminationGracePeriod) of the NodePool's nodes.

    Sizing run: the run's maximum duration, a bounded backstop should teardown and the janitor both fail; the
    pods' do-not-disrupt annotation holds everything else off until then. Serving: never expire (SERVE_EXPIRE_AFTER)
    and give a draining node long enough for each of its pods to be replaced in turn."""
    if p.purpose == "run":
        return f"{math.ceil(p.opts.max_duration_s / 60)}m", NODE_TERMINATION_GRACE
    grace_s = p.per_node * p.startup_s + SERVE_GRACE_MARGIN_S
    return SERVE_EXPIRE_AFTER, f"{math.ceil(grace_s / 60)}m"


def _nodepool(p: _Plan) -> dict[str, Any]:
    arch = p.arch
    if p.opts.restrict_to == "instance-family":
        # the family's sizes with the devices a pod asks for; a CPU replica runs on all its instance's cores
        if p.cpu:
            size = {
                "key": "karpenter.k8s.aws/instance-cpu",
                "operator": "Gt",
                "values": [str(p.inst.vcpu - 1)],
            }
        else:
            count = "instance-accelerator-count" if p.neuron else "instance-gpu-count"
            size = {
                "key": f"karpenter.k8s.aws/{count}",
                "operator": "Gte",
                "values": [str(p.devices_per_pod)],
            }
        shape = [
            {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": [p.inst.family]},
            size,
        ]
    else:
        shape = [
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [p.inst.instance_type]}
        ]
    # With a reservation, Karpenter fills it first and falls back to the capacity type the cost counted.
    capacity = ["reserved", arch.capacity_type] if p.opts.capacity_reservation else [arch.capacity_type]
    zones = [{"key": ZONE_KEY, "operator": "In", "values": p.zones}] if p.zones else []
    expire_after, grace = _expiry(p)
    accel_per_node = p.inst.accelerator_count
    return {
        "apiVersion": KARPENTER_API,
        "kind": "NodePool",
        "metadata": p.meta(p.name, namespaced=False),
        "spec": {
            "template": {
                # Template labels reach NodeClaims and nodes: teardown waits on NodeClaims with these.
                "metadata": {"labels": dict(p.labels)},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": p.name},
                    "requirements": [
                        *shape,
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": capacity},
                        *zones,
                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                    ],
                    "taints": [dict(p.taint)],
                    "expireAfter": expire_after,
                    "terminationGracePeriod": grace,
                },
            },
            "limits": {
                "cpu": str(p.nodes_max * p.inst.vcpu),
                "memory": _quantity_gib(p.nodes_max * p.inst.memory_gib),
                **({p.resource: str(p.nodes_max * accel_per_node)} if p.resource else {}),
                "nodes": str(p.nodes_max),
            },
            "disruption": _disruption(p),
        },
    }
