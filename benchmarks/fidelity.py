"""Fidelity: the lab's evaluation on the benchmark meshes and the dataset's test split (section 3 of run.py)."""

import time
from pathlib import Path

from common import log


def fidelity(cfg: dict, images: Path, tag: str, meshes: str | None, data: str | None, workdir: Path) -> dict:
    from model_runtime.lab.evaluate import evaluate
    from model_runtime.lab.evaluate.report import markdown

    out = images / f"benchmark_fidelity{tag}"
    meshes = meshes if meshes and Path(meshes).is_dir() else None
    label = meshes
    chosen = None
    if meshes and cfg.get("smallest_mesh_only"):
        # --quick: the reference simulator dominates, so evaluate only the smallest mesh (not the first by name).
        chosen = [min(Path(meshes).glob("*.obj"), key=lambda p: p.stat().st_size)]
    elif meshes and cfg.get("mesh_names"):
        chosen = [Path(meshes) / f"{name}.obj" for name in cfg["mesh_names"]]
    if chosen:
        (workdir / "meshes").mkdir()
        for path in chosen:
            (workdir / "meshes" / path.name).symlink_to(path.resolve())
        meshes = str(workdir / "meshes")
        label = f"{label} (only {', '.join(p.name for p in chosen)})"
    data = data if data and Path(data).is_dir() else None
    log(f"fidelity: meshes={meshes} data={data} limit={cfg['fidelity_limit']} -> {out}")
    t = time.perf_counter()
    report = evaluate(None, data, meshes, str(out), limit=cfg["fidelity_limit"], physics=cfg["physics"],
                      log=lambda m: log("  " + m))
    return {"dir": str(out), "seconds": time.perf_counter() - t, "meshes": label, "data": data,
            "markdown": markdown(report, out)}
