"""Build the PyTorch error atlas: ``atlas.jsonl.gz`` and ``manifest.json``.

    python scripts/build_atlas.py                          # the installed torch: Python sources, headers, libraries
    python scripts/build_atlas.py <pytorch checkout>       # ... plus a checkout (a work tree or a bare .git)
    python scripts/build_atlas.py <checkout> --no-package  # only the checkout (rebuild for your own PyTorch)
    python scripts/build_atlas.py --extra cuda.jsonl.gz    # ... merging entries extracted elsewhere (a CUDA build)
    torchhelp kb atlas --from <checkout>                   # the same, into $TORCHHELP_HOME/atlas (used from then on)

Sources, in priority order (the first occurrence of a template keeps it; later ones go to its ``also`` list):
the torch package's Python files (``python``), its C++ headers (``header``), its shared libraries (``binary``,
through ``assistant.atlas.extract_binary`` when that module exists), then the checkout's C++/CUDA (``cpp``,
``cuda``) and Python (``python``) sources. Categories come from the hand rules of ``assistant.atlas.categories``
(``category_source: "hand"``); the rest stay null for the calibrated decision.
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import gzip
import importlib
import importlib.util
import inspect
import io
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from assistant.atlas import extract_cpp, extract_python
from assistant.atlas.categories import classify

DATA = Path(__file__).resolve().parent / "data"  # the shipped atlas
SOURCES = Path(__file__).resolve().parent / "sources"  # entries extracted elsewhere (a CUDA build's libraries), merged at build time

FIELDS = (
    "id", "template", "kind", "exc_type", "source", "file", "line", "function", "op", "condition", "condition_sense",
    "internal", "matchable", "category", "category_source", "torch_version", "commit", "via_macro", "also",
)
ALSO_FIELDS = ("id", "source", "file", "line", "function", "op", "exc_type", "condition", "torch_version")
CHECKOUT_CPP_DIRS = ("aten", "c10", "torch", "caffe2/serialize", "functorch/csrc")
HEADER_DIRS = ("ATen", "c10", "torch")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------------------------------


def installed_torch_dir() -> Path | None:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def schema_op_names(package_dir: Path) -> list[str]:
    """``torch._C._jit_get_all_schemas()`` names when the importable torch is this package, else []."""
    try:
        import torch  # noqa: PLC0415
    except Exception:  # noqa: BLE001 - any import failure means no schemas
        return []
    if Path(torch.__file__).resolve().parent != package_dir.resolve():
        return []
    try:
        return [s.name for s in torch._C._jit_get_all_schemas()]
    except Exception:  # noqa: BLE001
        return []


def is_bare_git(path: Path) -> bool:
    return (path / "HEAD").is_file() and (path / "objects").is_dir() and not (path / ".git").exists()


def export_bare(git_dir: Path, dest: Path) -> str:
    """Check out HEAD of a bare repository into ``dest`` (blobs missing from a partial clone are left out)."""
    tree = subprocess.run(["git", "--git-dir", str(git_dir), "ls-tree", "-r", "HEAD"], check=True, capture_output=True, text=True).stdout
    rows = [line.split("\t", 1) for line in tree.splitlines() if "\t" in line]
    blobs = [(meta.split()[2], path) for meta, path in rows if meta.split()[1] == "blob"]
    check = subprocess.run(["git", "--git-dir", str(git_dir), "cat-file", "--batch-check"], input="\n".join(h for h, _ in blobs) + "\n",
                           check=True, capture_output=True, text=True).stdout.splitlines()
    missing = {line.split()[0] for line in check if line.endswith(" missing")}
    wanted = [p for h, p in blobs if h not in missing and p.endswith(tuple(extract_cpp.CPP_EXTS) + (".py", ".yaml", ".cwrap", ".txt", ".in"))]
    dest.mkdir(parents=True, exist_ok=True)
    for i in range(0, len(wanted), 2000):
        chunk = wanted[i : i + 2000]
        archive = subprocess.run(["git", "--literal-pathspecs", "--git-dir", str(git_dir), "archive", "--format=tar", "HEAD", "--", *chunk], check=True, capture_output=True).stdout
        import tarfile  # noqa: PLC0415

        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(dest, filter="data")
    return subprocess.run(["git", "--git-dir", str(git_dir), "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()


def checkout_version(root: Path) -> str:
    p = root / "version.txt"
    if p.is_file():
        return p.read_text(encoding="utf-8").strip()
    p = root / "setup.py"
    if p.is_file():
        m = re.search(r"^version\s*=\s*['\"]([^'\"]+)['\"]", p.read_text(encoding="utf-8", errors="replace"), re.M)
        if m:
            return m.group(1)
    return ""


def checkout_commit(root: Path) -> str:
    try:
        return subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


# ---------------------------------------------------------------------------------------------------------------
# Extraction
# ---------------------------------------------------------------------------------------------------------------


def extract_package(package_dir: Path, *, with_binary: bool = True) -> tuple[list[dict], dict]:
    version, commit = extract_python.package_version(package_dir)
    info: dict = {}
    log(f"package {package_dir} (torch {version}, {commit[:12]})")
    entries = extract_python.extract(package_dir, torch_version=version, commit=commit, source="python")
    info["python"] = {"torch_version": version, "commit": commit, "path": "torch/", "unparsed_files": list(getattr(extract_python.extract, "failed_files", []))}
    log(f"  python: {len(entries)} entries")
    include = package_dir / "include"
    if include.is_dir():
        names = schema_op_names(package_dir)
        ops = extract_cpp.OpIndex(names) if names else None
        hdr = extract_cpp.extract_tree(include, subdirs=HEADER_DIRS, rel_prefix="torch/include/", source_of=lambda _p: "header",
                                       torch_version=version, commit=commit, ops=ops, legacy=False)
        entries += hdr
        info["header"] = {"torch_version": version, "commit": commit, "path": "torch/include/", "op_names": len(names)}
        log(f"  header: {len(hdr)} entries ({len(names)} op schemas)")
    if with_binary:
        try:
            binary = importlib.import_module("assistant.atlas.extract_binary")
        except ImportError:
            binary = None
        if binary is not None and hasattr(binary, "extract") and (package_dir / "lib").is_dir():
            params = inspect.signature(binary.extract).parameters
            kwargs = {k: v for k, v in (("torch_version", version), ("commit", commit)) if k in params}
            found = list(binary.extract(package_dir / "lib", **kwargs))
            for e in found:
                e.setdefault("source", "binary")
                e.setdefault("torch_version", version)
                e.setdefault("commit", commit)
                if not e.get("torch_version"):
                    e["torch_version"] = version
                if not e.get("commit"):
                    e["commit"] = commit
            entries += found
            info["binary"] = {"torch_version": version, "commit": commit, "path": "torch/lib/"}
            log(f"  binary: {len(found)} entries")
    return entries, info


def extract_checkout(root: Path, *, version: str, commit: str, tag_ids: bool) -> tuple[list[dict], dict]:
    log(f"checkout {root} (torch {version}, {commit[:12]})")
    names = extract_cpp.ops_from_yaml(root)
    ops = extract_cpp.OpIndex(names) if names else None
    cpp = extract_cpp.extract_tree(root, subdirs=CHECKOUT_CPP_DIRS, torch_version=version, commit=commit, ops=ops)
    log(f"  cpp/cuda: {len(cpp)} entries ({len(names)} op names from native_functions.yaml)")
    py: list[dict] = []
    unparsed: list[str] = []
    if (root / "torch").is_dir():
        py = extract_python.extract(root / "torch", torch_version=version, commit=commit, source="python")
        unparsed = list(getattr(extract_python.extract, "failed_files", []))
        log(f"  python: {len(py)} entries ({len(unparsed)} files not parsed)")
    entries = cpp + py
    if tag_ids:  # the package's entries own the plain ids
        for e in entries:
            src = e["source"]
            e["id"] = f"{src}@{version}:" + e["id"][len(src) + 1 :]
    info = {}
    for src in sorted({e["source"] for e in entries}):
        info[f"{src}@checkout"] = {"torch_version": version, "commit": commit, "path": str(root)}
    if unparsed:
        info["python@checkout"]["unparsed_files"] = unparsed
    return entries, info


# ---------------------------------------------------------------------------------------------------------------
# Assembly
# ---------------------------------------------------------------------------------------------------------------

_SOURCE_RANK = {"python": 0, "header": 1, "cpp": 2, "cuda": 2, "binary": 3}


def dedupe(entries: list[dict], version_rank: dict[str, int]) -> list[dict]:
    """Identical (template, kind) pairs collapse into the first, best-sourced entry; the rest go to ``also``."""
    order = sorted(range(len(entries)), key=lambda i: (version_rank.get(entries[i].get("torch_version", ""), 99),
                                                       _SOURCE_RANK.get(entries[i].get("source", ""), 9), i))
    first: dict[tuple[str, str], dict] = {}
    out: list[dict] = []
    for i in order:
        e = entries[i]
        key = (e["template"], e["kind"])
        head = first.get(key)
        if head is None:
            first[key] = e
            out.append(e)
            continue
        also = {k: e.get(k) for k in ALSO_FIELDS if e.get(k) is not None}
        if also.get("exc_type") == head.get("exc_type"):
            also.pop("exc_type", None)
        if also.get("torch_version") == head.get("torch_version"):
            also.pop("torch_version", None)
        head.setdefault("also", []).append(also)
    return out


def finish(e: dict) -> dict:
    e.setdefault("internal", False)
    e.setdefault("matchable", extract_python.matchable(e["template"]))
    if e.get("category") is None:
        cat = classify(e)
        e["category"] = cat
        e["category_source"] = "hand" if cat else None
    e.setdefault("category_source", None)
    out = {k: e.get(k) for k in FIELDS if k in e or k in ("category", "category_source", "op", "condition", "function", "file", "line", "exc_type")}
    for k, v in e.items():  # fields another extractor adds travel too
        if k not in out:
            out[k] = v
    for k in ("via_macro", "also", "condition_sense"):
        if out.get(k) is None:
            out.pop(k, None)
    return out


def manifest_for(entries: list[dict], sources: dict, out_files: dict[str, int]) -> dict:
    def count(key) -> dict:
        c = collections.Counter(key(e) for e in entries)
        return {str(k): v for k, v in sorted(c.items(), key=lambda kv: (-kv[1], str(kv[0])))}

    per_version: dict[str, set[str]] = collections.defaultdict(set)
    occurrences = collections.Counter()
    for e in entries:
        versions = {e.get("torch_version", "")} | {a.get("torch_version", e.get("torch_version", "")) for a in e.get("also", [])}
        for v in versions:
            per_version[v].add(e["template"])
        occurrences[e.get("torch_version", "")] += 1
        for a in e.get("also", []):
            occurrences[a.get("torch_version", e.get("torch_version", ""))] += 1
    return {
        "build_date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "templates": len(entries),
        "occurrences": sum(1 + len(e.get("also", [])) for e in entries),
        "templates_per_version": {v: len(t) for v, t in sorted(per_version.items())},
        "occurrences_per_version": dict(sorted(occurrences.items())),
        "only_in_version": {v: len(t - set().union(*(per_version[o] for o in per_version if o != v))) for v, t in sorted(per_version.items())},
        "matchable": sum(1 for e in entries if e.get("matchable")),
        "internal": sum(1 for e in entries if e.get("internal")),
        "with_condition": sum(1 for e in entries if e.get("condition")),
        "with_op": sum(1 for e in entries if e.get("op")),
        "per_source": count(lambda e: e.get("source")),
        "per_kind": count(lambda e: e.get("kind")),
        "per_exc_type": count(lambda e: e.get("exc_type")),
        "per_category": count(lambda e: e.get("category")),
        "per_category_source": count(lambda e: e.get("category_source")),
        "sources": sources,
        "files": out_files,
    }


def write(entries: list[dict], out_dir: Path, sources: dict) -> dict:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "atlas.jsonl.gz"
    buf = io.BytesIO()
    with gzip.GzipFile(filename="atlas.jsonl", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
        for e in entries:
            gz.write((json.dumps(e, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8"))
    path.write_bytes(buf.getvalue())
    manifest = manifest_for(entries, sources, {"atlas.jsonl.gz": path.stat().st_size})
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return manifest


def build(checkout: Path | None = None, *, package: Path | None = None, out: Path, with_binary: bool = True,
          version: str | None = None, commit: str | None = None, extra: list[Path] | None = None, decide: bool = False) -> dict:
    """Extract, de-duplicate, categorise (hand rules; optionally the calibrated decision for the rest) and write; returns the manifest.

    ``decide`` is off by default: asked about the bare template of a message, the decision agreed with a hand review
    only 0.42 (first round) and 0.59 (second) of the time (eval/atlas/review.md), worse than leaving the category open,
    so open categories stay open and the engine decides from the user's full text instead."""
    entries: list[dict] = []
    sources: dict = {}
    ranks: dict[str, int] = {}
    if package is not None:
        got, info = extract_package(package, with_binary=with_binary)
        entries += got
        sources.update(info)
        ranks[next(iter(info.values()))["torch_version"]] = 0
    tmp: Path | None = None
    try:
        if checkout is not None:
            root = checkout
            ck_commit = commit or ""
            if is_bare_git(checkout):
                tmp = Path(tempfile.mkdtemp(prefix="atlas_checkout_"))
                head = export_bare(checkout, tmp)
                ck_commit = commit or head
                root = tmp
            ck_version = version or checkout_version(root)
            ck_commit = ck_commit or checkout_commit(root)
            got, info = extract_checkout(root, version=ck_version, commit=ck_commit, tag_ids=package is not None)
            for v in info.values():
                v["path"] = str(checkout)
            entries += got
            sources.update(info)
            ranks.setdefault(ck_version, len(ranks))
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    for path in extra or ():
        with gzip.open(path, "rt", encoding="utf-8") if str(path).endswith(".gz") else open(path, encoding="utf-8") as fh:
            got = [json.loads(line) for line in fh if line.strip()]
        entries += got
        for v in sorted({e.get("torch_version", "") for e in got}):
            ranks.setdefault(v, len(ranks))
        sources[f"extra:{Path(path).name}"] = {"entries": len(got), "torch_versions": sorted({e.get("torch_version", "") for e in got})}
        log(f"extra {path}: {len(got)} entries")
    unique = dedupe(entries, ranks)
    unique = [finish(e) for e in unique]
    if decide:
        from assistant.atlas.categorize import categorize

        counts = categorize(unique, progress=lambda n: log(f"  categorising: {n} entries"))
        sources["categories_by_decision"] = counts
        log(f"categories by the decision: {counts}")
    unique.sort(key=lambda e: (ranks.get(e.get("torch_version", ""), 99), _SOURCE_RANK.get(e.get("source", ""), 9), e.get("file") or "", e.get("line") or 0, e["id"]))
    return write(unique, out, sources)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkout", nargs="?", type=Path, help="a PyTorch source checkout (work tree or bare .git)")
    ap.add_argument("--torch-package", type=Path, default=None, help="a torch package directory (default: the installed torch)")
    ap.add_argument("--no-package", action="store_true", help="do not read the installed torch package")
    ap.add_argument("--no-binary", action="store_true", help="skip the shared-library extractor")
    ap.add_argument("--version", default=None, help="the checkout's torch version (default: version.txt / setup.py)")
    ap.add_argument("--commit", default=None, help="the checkout's commit (default: git rev-parse HEAD)")
    ap.add_argument("--extra", type=Path, action="append", default=[], help="an entries file (.jsonl or .jsonl.gz) extracted elsewhere, e.g. a CUDA build's libraries")
    ap.add_argument("--out", type=Path, default=DATA)
    ap.add_argument("--decide", action="store_true", help="also categorise what the hand rules leave open with the decision (measured unreliable on bare templates)")
    args = ap.parse_args(argv)
    package = None
    if not args.no_package:
        package = args.torch_package or installed_torch_dir()
        if package is None:
            log("no torch package found (use --torch-package or --no-package)")
            return 2
    if package is None and args.checkout is None:
        log("nothing to read: give a checkout or a torch package")
        return 2
    extra = args.extra or ([*sorted(SOURCES.glob("*.jsonl.gz"))] if args.out == DATA else [])
    manifest = build(args.checkout, package=package, out=args.out, with_binary=not args.no_binary, version=args.version, commit=args.commit, extra=extra,
                     decide=args.decide)
    log(f"{manifest['templates']} templates ({manifest['occurrences']} occurrences) -> {args.out}")
    for v, n in manifest["templates_per_version"].items():
        log(f"  torch {v}: {n} templates ({manifest['only_in_version'].get(v, 0)} only there)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
