"""Evaluation: ``python -m model_runtime evaluate --weights W --data ROOT [--meshes DIR] [--run RUN] --out DIR``.

Writes ``evaluate.json``, ``evaluate.md`` (tables) and PNG plots into ``--out``. What is measured:

1. **Reconstruction** (the paper's inverse-kinematics metric) on the test split. For a few frames of each test
   sequence the rest shape is normalized to unit bounding-box diagonal (``train.prepare``, which also removes the
   rigid motion of free bodies, as in training) and the latent z is found two ways: *inverse kinematics* (Adam on z,
   starting at the prior mean, to match the target displacement at surface samples; decoder with the prior's shape
   tokens and code) and the *posterior encoder* (its mean). The metric is

       CD-L1(P, Q) = 1/2 (mean_{p in P} min_{q in Q} |p - q|_2 + mean_{q in Q} min_{p in P} |p - q|_2),

   the mean of the two directed mean nearest-neighbour **Euclidean** (L2-norm, not squared) distances, the
   "Chamfer-L1" of Occupancy Networks / 3DShape2VecSet, on unit-diagonal shapes. P is the decoded deformed cloud at
   one set of surface samples, Q the target deformed cloud at an independent set of samples of the same surface,
   so the table also gives the sampling floor (ground-truth displacement at P's samples vs Q) and the rest-shape
   baseline (undeformed P vs Q).
2. **Rollout fidelity** against the reference simulator: for each test sequence (its rest mesh, faces, pins and SI
   parameters from the file) the product's simulator runs the same frames at the same fps; the error at a frame is
   the mean vertex distance to the stored reference positions divided by the rest bbox diagonal. Reported over all
   frames and over the first 2 s, next to two baselines: the rest shape held still, and rigid free fall (the rest
   shape translated by v0 t + g t^2 / 2 for unpinned bodies, or the exact solution with linear air drag when drag > 0,
   ignoring rotation; held still when pinned). The mean row gives rest/model as a ratio of the means (dominated by
   free-falling bodies, whose rest error grows like t^2) and the median of the per-item ratios.
   ``--meshes DIR`` does the same for every ``.obj`` in a folder, with the reference simulator run here: each mesh
   is rescaled to a 0.75 m bbox diagonal, default material and gravity, 48 frames at 24 fps; open meshes get the
   lowest 10% of each connected component pinned, closed ones are free (they fall).
3. **Physics checks** of the product's simulator on a pinned cloth strip and a pinned soft box (cantilever):
   total-energy drift over 5 s with zero drag and damping (max |E(t) - E(0)| over the run, relative to the largest
   kinetic energy reached, E = kinetic + elastic + gravitational from the path's ``energies`` on the integrated
   states), pin error (largest pinned-vertex displacement / diagonal), and monotonicity: more drag -> less mean
   kinetic energy, more gravity -> more sag, stiffer -> less sag (sag = downward displacement of the vertices in
   metres, averaged over the last quarter of a run with SETTLE_DRAG: the settled sag these statements are about; a
   time average of an undamped swing is not monotonic even for an exact pendulum).
4. **Plots**: loss curves from a training run's ``log.jsonl`` (``--run``), error over time, and a filmstrip per
   sequence/mesh (reference top row, NeuROK bottom row).

The metrics are in ``metrics`` and ``reconstruction``, the rollouts' inputs in ``rollouts``, the physics checks in
``checks``, the figures in ``plots`` and the Markdown in ``report``; this module runs them and writes the files.
"""

import argparse
import json
import re
import time
from pathlib import Path

import numpy as np
import torch

from ... import mesh as meshlib
from ...params import make_params
from .checks import physics_checks
from .metrics import rollout_metrics, summarize
from .plots import plot_error_curves, plot_filmstrip, plot_loss_curves
from .reconstruction import reconstruct_sequence
from .report import markdown
from .rollouts import MESH_DIAGONAL, PIN_FRACTION, default_pins, normalize_mesh, sequence_params


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", s)


def evaluate(weights: str | None, data: str | None, meshes: str | None, out: str, limit: int | None = 20,
             run: str | None = None, recon_frames: int = 4, points: int = 2048, ik_steps: int = 200,
             mesh_frames: int = 48, physics: bool = True, filmstrips: int = 6, seed: int = 0,
             split: str = "test", log=print) -> dict:
    """The report of the module docstring. ``split`` chooses the dataset's sequences: "test" (held out from the
    training data), or "all" for a dataset the weights were not trained on at all."""
    from ...simulator import Simulator
    from ..data.format import list_sequences, load_sequence
    from ..weights import load_model

    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    t_start = time.time()
    sim = Simulator()
    model = load_model(weights)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    report: dict = {"weights": str(weights) if weights else "shipped", "settings": {
        "limit": limit, "recon_frames": recon_frames, "points": points, "ik_steps": ik_steps,
        "mesh_frames": mesh_frames, "seed": seed, "mesh_diagonal_m": MESH_DIAGONAL, "pin_fraction": PIN_FRACTION,
        "split": split},
        "cd_definition": "0.5*(mean_p min_q |p-q|_2 + mean_q min_p |p-q|_2) on unit-diagonal shapes"}
    try:
        from safetensors import safe_open

        with safe_open(str(weights or model_default_path()), framework="pt") as f:
            info = (f.metadata() or {}).get("info")
        report["weights_info"] = json.loads(info) if info else None
    except Exception:  # noqa: BLE001 - informational only
        report["weights_info"] = None

    if data:
        paths = list_sequences(data, None if split == "all" else split)[:limit]
        if not paths:
            raise FileNotFoundError(f"no {split}-split sequences under {data}")
        recon, rollouts = [], []
        t0 = time.time()
        for i, path in enumerate(paths):
            seq = load_sequence(path)
            name = Path(path).stem
            rows = reconstruct_sequence(model, seq, recon_frames, points, ik_steps, rng)
            for r in rows:
                r.update(sequence=name, family=seq["family"])
            recon += rows
            p = sequence_params(seq)
            ts = time.time()
            pred = sim.simulate(seq["rest"], seq["faces"], p)
            m = rollout_metrics(pred, seq["positions"], p)
            m.update(name=name, family=seq["family"], vertices=int(len(seq["rest"])), pinned=bool(len(p.pins)),
                     simulate_seconds=time.time() - ts)
            rollouts.append(m)
            if i < filmstrips:
                plot_filmstrip(seq["positions"], pred, seq["faces"], out_dir / f"filmstrip_{_slug(name)}.png",
                               f"{name} ({seq['family']}): model err {m['model_error']:.4f}, "
                               f"rest {m['rest_error']:.4f}")
            log(f"[{i + 1}/{len(paths)}] {name} {seq['family']:6s} IK CD {np.mean([r['ik'] for r in rows]):.4f} "
                f"rollout {m['model_error']:.4f} (rest {m['rest_error']:.4f}, rigid {m['rigid_error']:.4f})")
        keys = ("ik", "posterior", "prior_mean", "rest", "floor")
        report["reconstruction"] = {
            "summary": {k: float(np.mean([r[k] for r in recon])) for k in keys},
            "by_family": {fam: {k: float(np.mean([r[k] for r in recon if r["family"] == fam])) for k in keys}
                          for fam in sorted({r["family"] for r in recon})},
            "rows": recon}
        report["test_rollouts"] = {"summary": summarize(rollouts), "items": rollouts,
                                   "by_family": {fam: summarize([r for r in rollouts if r["family"] == fam])
                                                 for fam in sorted({r["family"] for r in rollouts})}}
        report["test_seconds"] = time.time() - t0
        plot_error_curves(rollouts, out_dir / "error_test.png", f"{split} split: rollout error vs reference")

    if meshes:
        from ..data.reference import simulate_reference

        files = sorted(Path(meshes).glob("*.obj"))[:limit]
        items = []
        for path in files:
            m0 = normalize_mesh(meshlib.validate(*_read(path)))
            closed = meshlib.is_closed(m0)
            pins = np.zeros(0, np.int64) if closed else default_pins(m0)
            p = make_params(frames=mesh_frames, fps=24.0, pins=pins, num_vertices=len(m0.vertices))
            entry = {"name": path.stem, "vertices": int(len(m0.vertices)), "closed": closed,
                     "pinned": bool(len(pins))}
            try:
                ts = time.time()
                ref = simulate_reference(m0.vertices, m0.faces, p)
                entry["reference_seconds"] = time.time() - ts
                ts = time.time()
                pred = sim.simulate(m0.vertices, m0.faces, p)
                entry["simulate_seconds"] = time.time() - ts
            except Exception as exc:  # noqa: BLE001 - one bad mesh must not end the report
                entry["error"] = f"{type(exc).__name__}: {exc}"
                log(f"{path.stem}: failed: {entry['error']}")
                items.append(entry)
                continue
            entry.update(rollout_metrics(pred, ref, p))
            items.append(entry)
            plot_filmstrip(ref, pred, m0.faces, out_dir / f"filmstrip_mesh_{_slug(path.stem)}.png",
                           f"{path.stem}: model err {entry['model_error']:.4f}, rest {entry['rest_error']:.4f}")
            log(f"mesh {path.stem}: rollout {entry['model_error']:.4f} (rest {entry['rest_error']:.4f}, "
                f"rigid {entry['rigid_error']:.4f}); reference {entry['reference_seconds']:.1f}s, "
                f"NeuROK {entry['simulate_seconds']:.1f}s")
        ok = [e for e in items if "error" not in e]
        report["mesh_rollouts"] = {"summary": summarize(ok), "items": items}
        if ok:
            plot_error_curves(ok, out_dir / "error_meshes.png", "meshes: rollout error vs reference")

    if physics:
        t0 = time.time()
        report["physics"] = physics_checks(sim)
        report["physics_seconds"] = time.time() - t0
        log(f"physics checks in {report['physics_seconds']:.0f}s")

    if run:
        log_path = Path(run) / "log.jsonl"
        report["loss_curves"] = bool(log_path.is_file() and plot_loss_curves(log_path, out_dir / "loss_curves.png"))

    report["seconds"] = time.time() - t_start
    (out_dir / "evaluate.json").write_text(json.dumps(report, indent=1) + "\n")
    (out_dir / "evaluate.md").write_text(markdown(report, out_dir))
    return report


def model_default_path():
    from ..weights import default_weights_path

    return default_weights_path()


def _read(path: Path):
    m = meshlib.read_obj(str(path))
    return m.vertices, m.faces


def run_cli(args: argparse.Namespace) -> int:
    if not args.data and not args.meshes and getattr(args, "no_physics", False) and not args.run:
        print("error: nothing to evaluate (give --data, --meshes, --run or drop --no-physics)")
        return 2
    limit = 20 if args.limit is None else args.limit
    r = evaluate(args.weights, args.data, args.meshes, args.out, limit=limit, run=args.run,
                 recon_frames=args.recon_frames, points=args.points, ik_steps=args.ik_steps,
                 mesh_frames=args.mesh_frames, physics=not args.no_physics, seed=args.seed, split=args.split)
    print(f"wrote {Path(args.out) / 'evaluate.json'} and evaluate.md in {r['seconds']:.0f}s")
    return 0
