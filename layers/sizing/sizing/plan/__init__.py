"""Architecture search, cost projection and ranking: the product's answer to "what should we run this on?".

The estimate's phases, one module each, in the order `search.estimate` runs them:
- `candidates`: the hardware options and Bedrock offers a workload may run on;
- `state`: the working data (a replica, an option, the search state every phase reads and appends to);
- `search`: the branch and bound (memory fit and roofline bounds, simulation cheapest-bound first) and the
  top-level estimate;
- `capacity`, `measured`: a replica's SLO capacity, simulated or answered from the team's measurement;
- `answer`: a replica to its architectures (pricing, fleet, headroom, placement), verified at the operating point;
- `tuning`: the runtime parameters searched at the ranking's head, and each architecture's tuning block;
- `as_sold`: spot terms, SageMaker inference components and asynchronous jobs, a batch workload's day;
- `bedrock`: Amazon Bedrock in every mode it is sold, or the typed reason it is not ranked;
- `ranking`: cheapest first, same-performance sizes folded, the Pareto front;
- `explain`: why nothing is feasible, why cheaper hardware is not ranked, the Region block, the assumptions;
- `cost`, `serving`, `memo`: the cost arithmetic, the serving configuration searched, the simulations' memos.

`estimate` (and `DEFAULT_HEADROOM`) are loaded on first use: a module that needs only `sizing.plan.cost` or
another light part (the manifests' zone count, the budget guard) does not import the search and its simulator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sizing.plan.search import DEFAULT_HEADROOM, estimate

__all__ = ["DEFAULT_HEADROOM", "estimate"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from sizing.plan import search

        return getattr(search, name)
    raise AttributeError(f"module 'sizing.plan' has no attribute {name!r}")
