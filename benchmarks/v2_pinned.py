"""v2's pinned solids and beams, product against the validated reference: rest/model over 2 s per scene.

The v2 evaluation set (`configs/data-v2.json`, seed 1) is not stored in git. Its scenes are drawn again here with
`scenes.sample_scene` (cheap), those that take the continuum path (`continuum_solid.applies`: closed, pinned) are
kept, and each is simulated over its first 2 s by the reference (cached under --cache, so a rerun resumes) and by
the product's `Simulator.simulate`. Printed per scene, then the median per family and over all.

    .venv/bin/python benchmarks/v2_pinned.py [--count 158 | --indices 13,27] [--reverse]
        [--cache data/v2-pinned-reference]
"""

import argparse
import dataclasses
import json
import statistics
import time
from pathlib import Path

import numpy as np

from model_runtime import continuum_solid
from model_runtime import mesh as meshlib
from model_runtime.errors import SimulationError
from model_runtime.lab.data.reference import simulate_reference
from model_runtime.lab.data.scenes import sample_scene
from model_runtime.lab.evaluate.metrics import vertex_error
from model_runtime.simulator import Simulator

ROOT = Path(__file__).resolve().parents[1]
SECONDS = 2.0  # the window: rest/model over the first 2 s


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=158, help="scenes 0..count-1 of v2 are drawn")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--config", default=str(ROOT / "configs/data-v2.json"))
    ap.add_argument("--cache", default=str(ROOT / "data/v2-pinned-reference"))
    ap.add_argument("--reverse", action="store_true", help="last scene first (a second process shares the cache)")
    ap.add_argument("--indices", help="comma-separated scene indices, instead of all of 0..count-1")
    args = ap.parse_args(argv)
    config = json.loads(Path(args.config).read_text())
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    ratios: dict[str, list[float]] = {}
    simulator = Simulator()
    print("| scene | family | variant | V | E kPa | rest 2 s | model 2 s | rest/model | reference s | product s |")
    print("|---|---|---|---|---|---|---|---|---|---|", flush=True)
    indices = [int(i) for i in args.indices.split(",")] if args.indices else range(args.count)
    for index in (reversed if args.reverse else iter)(indices):
        scene = sample_scene(args.seed, index, config)
        mesh = meshlib.Mesh(np.asarray(scene.vertices, np.float64), np.asarray(scene.faces))
        if not continuum_solid.applies(mesh, scene.params):
            continue
        p = dataclasses.replace(scene.params, frames=min(scene.params.frames, round(SECONDS * scene.params.fps)))
        path = cache / f"seq_{index:06d}.npz"
        t = time.perf_counter()
        try:
            if path.exists():
                ref = np.load(path)["positions"]
            else:
                ref = simulate_reference(scene.vertices, scene.faces, p)
                np.savez_compressed(path, positions=ref)
        except SimulationError as exc:  # v2 rejected such scenes too
            print(f"| {index} | {scene.family} | {scene.variant} | reference refused: {exc} |", flush=True)
            continue
        t_ref = time.perf_counter() - t
        t = time.perf_counter()
        model = simulator.simulate(scene.vertices, scene.faces, p)
        t_model = time.perf_counter() - t
        diag = meshlib.bbox_diagonal(scene.vertices)
        rest = float(vertex_error(np.repeat(scene.vertices[None], len(ref), 0), ref, diag)[1:].mean())
        err = float(vertex_error(model, ref, diag)[1:].mean())
        ratios.setdefault(scene.family, []).append(rest / err)
        print(f"| {index} | {scene.family} | {scene.variant} | {len(scene.vertices)} | {p.stiffness / 1e3:.1f} | "
              f"{rest:.4f} | {err:.4f} | {rest / err:.2f} | {t_ref:.0f} | {t_model:.1f} |", flush=True)
    every = [r for rs in ratios.values() for r in rs]
    print("\n| family | scenes | median rest/model over 2 s |\n|---|---|---|")
    for family, rs in sorted(ratios.items()):
        print(f"| {family} | {len(rs)} | {statistics.median(rs):.2f} |")
    if every:
        print(f"| all | {len(every)} | {statistics.median(every):.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
