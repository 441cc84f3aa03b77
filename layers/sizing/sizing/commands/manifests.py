"""`sizing manifests --architecture ID|FILE`: the Karpenter and Kubernetes YAML that runs one architecture
(`sizing manifests --rbac [GROUP]`: the RBAC the provisioning identity needs).

FILE is one architecture (JSON) or a whole estimate result (then `--id` picks one; default: the best-ranked EKS
architecture). An ID (`eks:p5.48xlarge:tp4:fp8:vllm:on-demand`) needs `--model` or `--workload` for the model.
Writes one YAML file per object kind into `--out`, or prints one YAML stream."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from sizing.errors import InvalidInput


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("manifests", help="write the Karpenter + Kubernetes manifests for an architecture")
    p.add_argument("--architecture", metavar="ID|FILE", help="architecture id or JSON file")
    p.add_argument("--id", help="which architecture of an estimate result (default: best-ranked EKS one)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--model", help="model (catalog id) when --architecture is an id")
    src.add_argument("--workload", help="workload spec whose model to use when --architecture is an id")
    p.add_argument(
        "--run-id", default="manual", help="run id the objects are labelled with (default: manual)"
    )
    p.add_argument("--candidate-id", help="candidate id label (default: the architecture id)")
    p.add_argument("--replicas", type=int, help="fixed replicas (default: the architecture's minimum)")
    p.add_argument("--no-autoscale", action="store_true", help="leave out the HorizontalPodAutoscaler")
    p.add_argument("--namespace", default="llm-sizing")
    p.add_argument("--cluster-name", default="llm-sizing", help="karpenter.sh/discovery tag value")
    p.add_argument("--node-role", default="KarpenterNodeRole-llm-sizing", help="IAM role of the nodes")
    p.add_argument("--ami-family", choices=["al2023", "bottlerocket"], default="al2023")
    p.add_argument(
        "--validate", action="store_true", help="validate against the CRDs and Kubernetes 1.31-1.34"
    )
    p.add_argument(
        "--rbac",
        metavar="GROUP",
        nargs="?",
        const="llm-sizing",
        help="instead: the RBAC the provisioning identity (Kubernetes group, default llm-sizing) needs",
    )
    p.add_argument("--out", help="directory for one YAML file per kind (default: print to stdout)")
    p.set_defaults(func=run)


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None


def load_architecture(args: argparse.Namespace) -> Any:
    from sizing.deploy.architecture import Architecture, pick_architecture

    path = Path(args.architecture)
    if path.is_file():
        raw = _load_json(path)
        if isinstance(raw, dict) and "architectures" in raw:
            raw = pick_architecture(raw, args.id, deployment=None if args.id else "eks")
        return Architecture.from_dict(raw)
    if args.architecture.count(":") != 5:
        raise InvalidInput(f"--architecture: '{args.architecture}' is neither a file nor an architecture id")
    model = args.model
    if args.workload:
        from sizing.workload import load_spec

        model = load_spec(args.workload).model
    if not model:
        raise InvalidInput("--model (or --workload) is required when --architecture is an id")
    return Architecture.from_id(args.architecture, model)


def run(args: argparse.Namespace) -> int:
    from sizing.deploy import validate as checks
    from sizing.deploy.manifests import RenderOptions, render, to_yaml

    opts = RenderOptions(
        namespace=args.namespace,
        cluster_name=args.cluster_name,
        node_role=args.node_role,
        ami_family=args.ami_family,
        replicas=args.replicas,
        autoscale=not args.no_autoscale,
    )
    if args.rbac:
        from sizing.deploy.rbac import rbac

        objs = rbac(opts, args.rbac)
    elif not args.architecture:
        raise InvalidInput("--architecture is required (or --rbac)")
    else:
        arch = load_architecture(args)
        objs = render(arch, args.run_id, args.candidate_id or arch.id, opts)
    if args.validate:
        checks.validate(objs)
    if not args.out:
        print(to_yaml(objs), end="")
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for obj in objs:
        target = out / f"{obj['kind'].lower()}.yaml"
        target.write_text(to_yaml([obj]))
        print(target)
    return 0
