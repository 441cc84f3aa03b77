"""The digital twin: an OpenAI-compatible endpoint whose timing follows the performance model of one candidate
(model x instance x TP x quantization x engine). Local runs and tests load-test it as if it were the real thing.

    handle = start_twin(HardwareConfig.create("meta-llama/Llama-3.1-8B-Instruct", "g6e.xlarge"))
    ... measure handle.url ...
    handle.stop()
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from typing import Any

from sizing.perf import StepModel
from sizing.twin.engine import Engine, StepModelLike
from sizing.twin.server import TwinServer, TwinSettings

__all__ = [
    "Engine",
    "StepModelLike",
    "TwinHandle",
    "TwinServer",
    "TwinSettings",
    "serve",
    "start_twin",
    "step_model_for",
]


def step_model_for(cfg: Any) -> StepModelLike:
    """The perf estimator's step model for a `sizing.perf.HardwareConfig`."""
    model: StepModelLike = StepModel.for_config(cfg)
    return model


def _settings(
    cfg: Any, sm: StepModelLike, served_model: str | None, seed: int, serving: Any = None
) -> TwinSettings:
    """Served name: the one given, else the serving config's, else the config's model id (also accepted when a
    name is given); context limit: the serving config's, else the hardware config's, else the step model's (the
    model's). `serving` (a `sizing.base.serving_config.ServingConfig`) is stated on the model card."""
    model_id = getattr(cfg, "model_id", None)
    max_model_len = (
        getattr(serving, "max_model_len", None)
        or getattr(cfg, "max_model_len", None)
        or getattr(sm, "max_model_len", None)
    )
    served_model = served_model or getattr(serving, "model", None)
    return TwinSettings(
        served_model=served_model or str(model_id or "twin"),
        aliases=[model_id] if model_id and served_model and model_id != served_model else [],
        seed=seed,
        max_model_len=max_model_len,
        serving=serving.model_dump(mode="json") if serving is not None else None,
    )


@dataclass
class TwinHandle:
    """A twin running in a background thread. `url` is its base URL (no trailing slash)."""

    url: str
    server: TwinServer
    _loop: asyncio.AbstractEventLoop = field(repr=False)
    _thread: threading.Thread = field(repr=False)

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def stop(self, timeout: float = 5.0) -> None:
        """Close the server and its connections, stop the loop and join the thread."""
        if not self._thread.is_alive():
            return
        fut = asyncio.run_coroutine_threadsafe(self.server.close(), self._loop)
        try:
            fut.result(timeout)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)

    def __enter__(self) -> TwinHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_twin(
    cfg: Any,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    step_model: StepModelLike | None = None,
    served_model: str | None = None,
    seed: int = 0,
    serving: Any = None,
) -> TwinHandle:
    """Start a twin for `cfg` (a `sizing.perf.HardwareConfig`) in a daemon thread with its own event loop and
    return once it listens. `step_model` replaces the perf model (tests); `port=0` picks a free port; `serving`
    (the `ServingConfig` `cfg` was built from) sets the context limit and is stated on the model card."""
    sm = step_model or step_model_for(cfg)
    server = TwinServer(sm, _settings(cfg, sm, served_model, seed, serving))
    loop = asyncio.new_event_loop()
    ready: dict[str, Any] = {}
    started = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            ready["port"] = loop.run_until_complete(server.start(host, port))
        except BaseException as exc:  # reported to the caller below
            ready["error"] = exc
            started.set()
            return
        started.set()
        loop.run_forever()
        loop.close()

    thread = threading.Thread(target=run, name=f"twin-{host}:{port}", daemon=True)
    thread.start()
    started.wait()
    if "error" in ready:
        raise ready["error"]
    return TwinHandle(f"http://{host}:{ready['port']}", server, loop, thread)


def serve(
    cfg: Any,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    step_model: StepModelLike | None = None,
    served_model: str | None = None,
    seed: int = 0,
    serving: Any = None,
    on_ready: Any = None,
) -> None:
    """Run a twin in the foreground until interrupted (the `sizing twin` command)."""
    sm = step_model or step_model_for(cfg)
    server = TwinServer(sm, _settings(cfg, sm, served_model, seed, serving))

    async def main() -> None:
        bound = await server.start(host, port)
        if on_ready is not None:
            on_ready(f"http://{host}:{bound}")
        try:
            await asyncio.Event().wait()
        finally:
            await server.close()

    asyncio.run(main())
