r"""What the reference simulator costs on the generator's own scenes: CPU seconds per simulated second.

    taskset -c 1 .venv/bin/python -m model_runtime.lab.data.cost --config configs/data-v2.json \
        --indices 0 2 9 --seconds 0.5

Each scene ``sample_scene(seed, i, config)`` runs for ``--seconds`` of simulated time at the config's solver
settings (``config["solver"]``, default the v1 dataset's) or the one given; the process's CPU time (not wall time,
so a busy second core does not inflate it) is divided by the simulated time. It also reports the lattice size of
solids on the implicit engine and the integrator and MuJoCo steps per second of cloth, read while it runs.
"""

import argparse
import json
import time
from dataclasses import replace

from . import mujoco_engine, reference
from .scenes import DEFAULT_CONFIG, sample_scene


def measure(seed: int, index: int, config: dict, seconds: float, settings: str | None = None,
            damping: float | None = None, vbd: tuple[float, int] | None = None) -> dict:
    """Simulate scene ``index`` for ``seconds``; return its description and CPU s per simulated s.

    ``vbd``: (substeps per second, iterations): cloth on VBD at these instead of the settings' own engine."""
    cfg = {**DEFAULT_CONFIG, **config}
    chosen = settings or cfg.get("solver", "dataset")
    if vbd is not None:
        base = reference.REFERENCE if chosen == "reference" else reference.DATASET
        chosen = replace(base, substep_rate=vbd[0], iterations=vbd[1], cloth_engine="newton")
    scene = sample_scene(seed, index, cfg)
    params = scene.params
    frames = max(1, round(seconds * params.fps))
    params = replace(params, frames=frames) if damping is None else replace(params, frames=frames, damping=damping)
    seen: dict = {}
    cloth_run, solid_run = mujoco_engine._run, reference.simulate_solid

    def spy_cloth(x0, faces, p, mass, pinned, steps, integrator, *rest):
        seen.update(nodes=len(x0), integrator=integrator, steps_per_s=steps * p.fps, mass=float(mass.sum()))
        return cloth_run(x0, faces, p, mass, pinned, steps, integrator, *rest)

    def spy_solid(nodes, tets, p, *rest, **kw):
        seen.update(nodes=len(nodes), tets=len(tets), integrator="implicit")
        return solid_run(nodes, tets, p, *rest, **kw)

    mujoco_engine._run, reference.simulate_solid = spy_cloth, spy_solid
    try:
        cpu = time.process_time()
        error = None
        try:
            reference.simulate_reference(scene.vertices, scene.faces, params, settings=chosen)
        except Exception as exc:  # a failure is a measurement too (e.g. a diverged step)
            error = f"{type(exc).__name__}: {exc}"
        cpu = time.process_time() - cpu
    finally:
        mujoco_engine._run, reference.simulate_solid = cloth_run, solid_run
    return {"index": index, "family": scene.family, "variant": scene.variant, "vertices": len(scene.vertices),
            "stiffness": params.stiffness, "density": params.density, "damping": params.damping,
            "simulated_s": frames / params.fps, "cpu_s": round(cpu, 2),
            "cpu_per_sim_s": round(cpu * params.fps / frames, 2), **seen, "error": error}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", help="generator config JSON (default: v1's)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--indices", type=int, nargs="+", required=True)
    ap.add_argument("--seconds", type=float, default=0.5)
    ap.add_argument("--settings", choices=("reference", "dataset"), help="default: the config's solver")
    ap.add_argument("--damping", type=float, help="override the scene's material damping, s")
    ap.add_argument("--vbd", help="cloth on VBD at these substeps per second x iterations, e.g. 1152x32")
    args = ap.parse_args(argv)
    config = {}
    if args.config:
        with open(args.config, encoding="utf-8") as f:
            config = json.load(f)
    for i in args.indices:
        vbd = None if args.vbd is None else (float(args.vbd.split("x")[0]), int(args.vbd.split("x")[1]))
        print(json.dumps(measure(args.seed, i, config, args.seconds, args.settings, args.damping, vbd)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
