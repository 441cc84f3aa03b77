"""The catalog from its files: the YAML read once and kept as JSON in a user cache, CPU families expanded,
the Region snapshot applied, an overlay's models merged, everything validated into a `Catalog`, and the validated
catalog kept in compact form (in the cache, or shipped beside the code by a build) so a new process loads it
instead of validating it again."""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sizing.base.errors import InvalidInput, problems_from_pydantic
from sizing.catalog.families import expand_cpu_families
from sizing.catalog.models import Catalog
from sizing.catalog.offerings import _ManagedFile
from sizing.catalog.records import Accelerator, CatalogRecord, InstanceType, ModelSpec

DATA_DIR = Path(__file__).parent / "data"


#: Extra catalog files (same layout as data/) merged over the shipped ones; models added with
#: `sizing catalog add-model --catalog-dir` land there.
OVERLAY_ENV = "SIZING_CATALOG_DIR"


class _AcceleratorFile(CatalogRecord):
    accelerators: list[Accelerator]


class _InstanceFile(CatalogRecord):
    instances: list[InstanceType]


class _ModelFile(CatalogRecord):
    models: list[ModelSpec]


#: Parsed catalog files are kept as JSON under this directory (a user cache; `/tmp` in a Lambda), named by the
#: digest of the YAML they came from: json.load takes ~5 ms where PyYAML's constructor takes ~200 ms for the
#: catalog, so a process's first estimate starts that much sooner. The YAML stays the source of truth: a changed
#: file has another digest, and an unwritable cache only means parsing the YAML.
CACHE_ENV = "SIZING_CACHE_DIR"


def _cache_dir() -> Path:
    base = os.environ.get(CACHE_ENV) or os.environ.get("XDG_CACHE_HOME")
    if not base:
        try:
            base = str(Path.home() / ".cache")
        except (RuntimeError, KeyError):  # no home directory (a Lambda sandbox): the temporary directory
            import tempfile

            base = tempfile.gettempdir()
    return Path(base) / "sizing-catalog"


def _read(path: Path) -> dict[str, Any]:
    raw = path.read_bytes()
    cached = _cache_dir() / f"{path.stem}-{hashlib.sha256(raw).hexdigest()[:20]}.json"
    try:
        data = json.loads(cached.read_bytes())
    except (OSError, ValueError):
        # PyYAML (~25 ms to import, -X importtime) only when the JSON copy is missing: a process whose cache is
        # warm, as every `sizing predict` after the first, never imports it. libyaml's C loader where PyYAML was
        # built with it (3-5x faster on the catalog files), else the pure-Python one.
        import yaml

        data = yaml.load(raw, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}
        _keep(cached, data)
    if not isinstance(data, dict):
        raise InvalidInput(f"{path}: expected a mapping at the top level")
    return data


def _keep(target: Path, data: Any) -> None:
    """Write the parsed file to the cache, atomically; a read-only or full disk is not an error."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, default=str))
        tmp.replace(target)
    except OSError:
        pass


def _merge_models(base: list[dict[str, Any]], extra: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_id = {m["id"]: m for m in base}
    for m in extra:
        by_id[m["id"]] = m
    return list(by_id.values())


def _apply_region_snapshot(instances: list[dict[str, Any]], snap: dict[str, Any]) -> None:
    """Per-Region prices, availability and spot discounts from the price snapshot (data/regions.yaml), for the
    instance families it samples. A price already in instances.yaml for a Region (`refresh-prices`) wins."""
    regions: list[str] = list(snap.get("regions") or [])
    src, as_of = str(snap.get("source", "")), snap.get("as_of")
    for entry in instances:
        fam = (snap.get("families") or {}).get(entry.get("family"))
        if not fam:
            continue
        od: dict[str, float | None] = fam.get("on_demand") or {}
        entry["regions_known"] = regions
        entry["regions_available"] = [r for r in regions if r in od]
        base = (entry.get("prices") or {}).get("us-east-1", {}).get("usd_per_hour")
        ref = od.get("us-east-1")
        assumed = bool(fam.get("ratio_assumed"))
        for region in regions:
            here = od.get(region)
            if region == "us-east-1" or not here or not ref or not base or region in entry["prices"]:
                continue
            entry["prices"][region] = {
                "usd_per_hour": round(base * here / ref, 5),
                "source": f"{src}: {fam['sample']} {region} / us-east-1 = {here / ref:.4f} x this type's us-east-1"
                " price",
                "as_of": as_of,
                "assumed": assumed,
                "notes": None
                if not assumed
                else "Regional ratio from pre-2025-06 list prices applied to the current us-east-1 price",
            }
        spots: dict[str, dict[str, Any]] = {}
        for region, spot in (fam.get("spot") or {}).items():
            here = od.get(region)
            if spot and here:
                spots[region] = {
                    "fraction": round(max(0.0, 1 - spot / here), 3),
                    "source": f"{src}: median {fam['sample']} spot price over {region}'s availability zones",
                    "assumed": False,
                }
        entry["spot_by_region"] = spots


#: The catalog files a catalog is built from, in the order they are read (each is the `Catalog` attribute of its name).
CATALOG_FILES = ("accelerators", "instances", "models", "managed")
#: pickle protocol of the compact copy (5: Python 3.8 and later, so the 3.11 CLI and the 3.12 Lambda runtime read
#: each other's copies).
COMPACT_PROTOCOL = 5


#: Where a build puts the compact copy of the shipped catalog, beside the code (`make build` writes it into the
#: Lambda layer, whose file system is read-only at run time, so a cold start never validates the catalog).
PACKAGED_COMPACT_DIR = Path(__file__).parent / "compact"


def _compact_name(data_dir: Path, overlay_dir: Path | None) -> str:
    """The compact copy's file name: the digest of every input that shapes the catalog (the data files, the
    overlay, the source of the classes and of the vocabularies they validate against, pydantic-core's version), so
    any change to one of them names another file."""
    import pydantic_core

    digest = hashlib.sha256()
    files = [data_dir / f"{name}.yaml" for name in (*CATALOG_FILES, "regions", "cpus")]
    if overlay_dir:
        files.append(overlay_dir / "models.yaml")
    here = Path(__file__)
    classes = [here.parent / f"{name}.py" for name in ("models", "records", "offerings", "families")]
    vocabulary = here.parents[1] / "base" / "vocabulary.py"
    for path in (here, *classes, here.parent / "regions.py", vocabulary, *files):
        digest.update(path.name.encode())
        digest.update(path.read_bytes() if path.exists() else b"\0absent")
    digest.update(f"{pydantic_core.__version__}/{COMPACT_PROTOCOL}".encode())
    return f"catalog-{digest.hexdigest()[:24]}.pickle"


def _private(path: Path) -> bool:
    """`path` and its directory belong to this user and no one else can write them. A pickle runs code when
    loaded, so a compact copy in the cache is read only from such a place (other users of a shared temporary
    directory cannot plant one); where ownership cannot be told (no `os.getuid`), never."""
    getuid = getattr(os, "getuid", None)
    if getuid is None:
        return False
    try:
        return all(
            (st := p.stat()).st_uid == getuid() and not st.st_mode & 0o022 for p in (path.parent, path)
        )
    except OSError:
        return False


def _load_compact(path: Path, trusted: bool = False) -> Catalog | None:
    """The catalog kept at `path`, or None. `trusted`: a copy shipped beside the code, as trusted as the code."""
    if not path.is_file() or not (trusted or _private(path)):
        return None
    import pickle

    try:
        catalog = pickle.loads(path.read_bytes())
    except Exception:  # a damaged or foreign copy is rebuilt, never an error
        return None
    return catalog if isinstance(catalog, Catalog) else None


#: Modes of a compact copy in the cache (this user's only) and of one shipped beside the code (as the code's own
#: files: the Lambda runtime reads the layer as another user than the one that built it).
CACHE_MODES = (0o700, 0o600)
PACKAGED_MODES = (0o755, 0o644)


def _keep_compact(path: Path, catalog: Catalog, modes: tuple[int, int] = CACHE_MODES) -> None:
    """Write the compact copy atomically with `modes` (directory, file); a read-only or full disk is not an
    error."""
    import pickle

    try:
        path.parent.mkdir(mode=modes[0], parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, modes[1])
        with os.fdopen(fd, "wb") as out:
            out.write(pickle.dumps(catalog, protocol=COMPACT_PROTOCOL))
        os.chmod(tmp, modes[1])  # as asked, whatever the umask
        tmp.replace(path)
    except OSError:
        pass


def build_catalog(data_dir: Path = DATA_DIR, overlay_dir: Path | None = None) -> Catalog:
    """The catalog from its files, validated. The validated catalog is kept in compact form (a pickle, loaded in
    ~5 ms) in the cache, or shipped in the package by a build: validating takes ~55 ms in a new process, nearly all
    of it pydantic building the classes' schemas, which a process that loads the compact copy never does."""
    name = _compact_name(data_dir, overlay_dir)
    known = _load_compact(PACKAGED_COMPACT_DIR / name, trusted=True) or _load_compact(_cache_dir() / name)
    if known is not None:
        return known
    catalog = _validated(data_dir, overlay_dir)
    _keep_compact(_cache_dir() / name, catalog)
    return catalog


def package_compact() -> Path:
    """Write the shipped catalog's compact copy beside the code (`make build`, into the layer), and check that it
    reads back as the catalog validated from the YAML; the path written."""
    catalog = _validated(DATA_DIR, None)
    path = PACKAGED_COMPACT_DIR / _compact_name(DATA_DIR, None)
    for old in PACKAGED_COMPACT_DIR.glob("catalog-*.pickle"):
        old.unlink()
    _keep_compact(path, catalog, PACKAGED_MODES)
    PACKAGED_COMPACT_DIR.chmod(PACKAGED_MODES[0])
    back = _load_compact(path, trusted=True)
    if back is None or any(getattr(back, part) != getattr(catalog, part) for part in CATALOG_FILES):
        raise SystemExit(f"the catalog's compact copy {path} does not read back as the catalog")
    return path


def _validated(data_dir: Path, overlay_dir: Path | None) -> Catalog:
    raw = {name: _read(data_dir / f"{name}.yaml") for name in CATALOG_FILES}
    if (data_dir / "cpus.yaml").exists():
        accelerators, instances = expand_cpu_families(_read(data_dir / "cpus.yaml"))
        raw["accelerators"]["accelerators"] = [*raw["accelerators"]["accelerators"], *accelerators]
        raw["instances"]["instances"] = [*raw["instances"]["instances"], *instances]
    if (data_dir / "regions.yaml").exists():
        _apply_region_snapshot(raw["instances"]["instances"], _read(data_dir / "regions.yaml"))
    if overlay_dir and (overlay_dir / "models.yaml").exists():
        raw["models"]["models"] = _merge_models(
            raw["models"]["models"], _read(overlay_dir / "models.yaml").get("models", [])
        )
    try:
        return Catalog(
            _AcceleratorFile.model_validate(raw["accelerators"]).accelerators,
            _InstanceFile.model_validate(raw["instances"]).instances,
            _ModelFile.model_validate(raw["models"]).models,
            _ManagedFile.model_validate(raw["managed"]),
        )
    except ValidationError as exc:
        raise InvalidInput("the catalog data does not validate", problems_from_pydantic(exc)) from None


@functools.cache
def _cached(overlay: str | None) -> Catalog:
    return build_catalog(DATA_DIR, Path(overlay) if overlay else None)


def load_catalog() -> Catalog:
    """The shipped catalog, merged with `$SIZING_CATALOG_DIR` when set; parsed once per process."""
    return _cached(os.environ.get(OVERLAY_ENV) or None)


def reset_cache() -> None:
    _cached.cache_clear()
