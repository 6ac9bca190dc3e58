"""NeuROK benchmark: speed against Blender's own simulators, scaling, fidelity; writes one Markdown report.

    .venv/bin/python benchmarks/run.py --out docs/benchmarks.md          # the published figures (long)
    .venv/bin/python benchmarks/run.py --out /tmp/bench/b.md --quick     # a tiny end-to-end development run

Everything runs on this machine, in this process, except the scaling points (one fresh subprocess each, so that
``ru_maxrss`` is the peak memory of that point alone). Plots and the fidelity report go to ``images/`` next to
``--out`` (``docs/images/benchmark_*`` for the published report); the raw numbers to ``--out`` with ``.json``.

1. **Speed vs Blender** (headless bpy, the real extension built with Blender's tool and installed in a throwaway
   user directory): pinned grids (one edge) timed as a Cloth bake (default cloth settings, pin group, 100 frames at
   24 fps, ``bpy.ops.ptcache.bake``) against ``bpy.ops.neurok.simulate`` (background mode runs the worker
   synchronously: mesh export, the path's build, integration, writing 101 shape keys), and icospheres pinned at the
   bottom timed as a Soft Body bake against NeuROK with the jelly preset. Runs alternate Blender / NeuROK; medians.
   NeuROK is timed twice per repeat: *cold* (the worker is stopped first, so the time includes starting it,
   importing torch) and *new mesh* (a running worker, a mesh it has not built: the object
   is moved 1 mm, which changes its world-space vertices). Then *re-simulate*: same object, warm worker, a
   parameter (drag) changed, so the mesh's build is reused.
2. **Scaling** of ``model_runtime.Simulator.simulate`` (pinned cloth grids) against vertices and frames: time and
   peak RSS, with a least-squares fit time = a + b * V * frames.
3. **Fidelity**: ``model_runtime.lab.evaluate.evaluate`` on ``../shared/meshes`` and the test split of the dataset
   (reference vs NeuROK, rest-shape and rigid baselines, filmstrips).

This file holds the sizes and the driver; each section is its own module (``blender_speed``, ``scaling``,
``fidelity``) and ``report`` writes the Markdown.
"""

import argparse
import json
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from blender_speed import speed
from common import ROOT, log, machine
from fidelity import fidelity
from report import report_markdown
from scaling import scaling, scaling_point

FULL = dict(
    cloth=[31, 99, 199],  # grid subdivisions: (n + 1)^2 vertices = 1,024 / 10,000 / 40,000
    soft=[5, 6],  # icosphere subdivisions: 2,562 / 10,242 vertices
    repeats=3,
    warm_grid=99, warm_repeats=5,
    scale_vertices=[1_000, 5_000, 10_000, 25_000, 50_000, 100_000, 200_000],  # at scale_base_frames
    scale_frames=[25, 50, 100, 200, 500],  # at scale_base_vertices
    scale_base_frames=100, scale_base_vertices=10_000,
    fidelity_limit=20, physics=True,
)
QUICK = dict(
    cloth=[31], soft=[4], repeats=2, warm_grid=31, warm_repeats=2,
    scale_vertices=[1_000, 4_000], scale_frames=[25, 50], scale_base_frames=25, scale_base_vertices=1_000,
    fidelity_limit=1, physics=False, smallest_mesh_only=True,
)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="docs/benchmarks.md", help="Markdown report to write")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, 2 repeats: a development run")
    parser.add_argument("--only", default="speed,scaling,fidelity", help="comma-separated sections to run")
    parser.add_argument("--merge", action="store_true",
                        help="keep the sections not run from the existing report's JSON (e.g. rerun fidelity only)")
    parser.add_argument("--meshes", default=str(ROOT.parent / "shared" / "meshes"), help="fidelity meshes folder")
    parser.add_argument("--data", default=str(ROOT / "data" / "neurok-v1"), help="dataset root (test split)")
    parser.add_argument("--fidelity-limit", type=int, help="meshes and test sequences evaluated (default 20)")
    parser.add_argument("--mesh-names", help="comma-separated mesh names (file stems) to evaluate, default all")
    parser.add_argument("--scaling-point", nargs=2, type=int, metavar=("VERTICES", "FRAMES"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    if args.scaling_point:
        print(json.dumps(scaling_point(*args.scaling_point)), flush=True)
        return 0

    cfg = dict(QUICK if args.quick else FULL)
    if args.fidelity_limit is not None:
        cfg["fidelity_limit"] = args.fidelity_limit
    if args.mesh_names:
        cfg["mesh_names"] = [n.strip() for n in args.mesh_names.split(",") if n.strip()]
    sections = {s.strip() for s in args.only.split(",") if s.strip()}
    out = Path(args.out).resolve()
    images = out.parent / "images"
    images.mkdir(parents=True, exist_ok=True)
    tag = "_quick" if args.quick else ""
    t0 = time.perf_counter()
    command = " ".join([".venv/bin/python", "benchmarks/run.py", *(argv if argv is not None else sys.argv[1:])])
    result = {"command": command, "quick": args.quick, "config": cfg,
              "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "machine": machine()}
    with tempfile.TemporaryDirectory(prefix="neurok-bench-") as tmp:
        # Blender reads its user directory when bpy is imported: keep the extension install out of the user's.
        os.environ["BLENDER_USER_RESOURCES"] = str(Path(tmp) / "blender-user")
        if "speed" in sections:
            result["speed"] = speed(cfg, Path(tmp))
        if "scaling" in sections:
            result["scaling"] = scaling(cfg, images, tag)
        if "fidelity" in sections:
            result["fidelity"] = fidelity(cfg, images, tag, args.meshes, args.data, Path(tmp))
    result["seconds"] = time.perf_counter() - t0
    result["load_average_end"] = os.getloadavg()
    if args.merge and out.with_suffix(".json").exists():
        previous = json.loads(out.with_suffix(".json").read_text())
        kept = [k for k in ("speed", "scaling", "fidelity") if k not in sections and k in previous]
        result.update({k: previous[k] for k in kept})
        # A section kept twice keeps the run it came from, not the run that last carried it along.
        origin = {"command": previous["command"], "date": previous["date"]}
        result["merged"] = {k: previous.get("merged", {}).get(k, origin) for k in kept}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report_markdown(result, out))
    out.with_suffix(".json").write_text(json.dumps(result, indent=1, default=str) + "\n")
    log(f"wrote {out} and {out.with_suffix('.json')} in {result['seconds'] / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
