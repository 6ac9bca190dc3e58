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
   parameters from the file) the learned simulator runs the same frames at the same fps; the error at a frame is
   the mean vertex distance to the stored reference positions divided by the rest bbox diagonal. Reported over all
   frames and over the first 2 s, next to two baselines: the rest shape held still, and rigid free fall (the rest
   shape translated by v0 t + g t^2 / 2 for unpinned bodies, or the exact solution with linear air drag when drag > 0,
   ignoring rotation; held still when pinned). The mean row gives rest/model as a ratio of the means (dominated by
   free-falling bodies, whose rest error grows like t^2) and the median of the per-item ratios.
   ``--meshes DIR`` does the same for every ``.obj`` in a folder, with the reference simulator run here: each mesh
   is rescaled to a 0.75 m bbox diagonal, default material and gravity, 48 frames at 24 fps; open meshes get the
   lowest 10% of each connected component pinned, closed ones are free (they fall).
3. **Physics checks** of the learned simulator on a pinned cloth strip and a pinned soft box (cantilever):
   total-energy drift over 5 s with zero drag and damping (max |E(t) - E(0)| over the run, relative to the largest
   kinetic energy reached, E = kinetic + elastic + gravitational from ``Dynamics.energy`` on the integrated
   states), pin error (largest pinned-vertex displacement / diagonal), and monotonicity: more drag -> less mean
   kinetic energy, more gravity -> more sag, stiffer -> less sag (sag = downward displacement of the vertices in
   metres, averaged over the last quarter of a run with SETTLE_DRAG: the settled sag these statements are about; a
   time average of an undamped swing is not monotonic even for an exact pendulum).
4. **Plots**: loss curves from a training run's ``log.jsonl`` (``--run``), error over time, and a filmstrip per
   sequence/mesh (reference top row, NeuROK bottom row).
"""

import argparse
import json
import os
import re
import time
from pathlib import Path

import numpy as np
import torch

from . import mesh as meshlib
from .params import SimParams, make_params

PARAM_KEYS = ("frames", "fps", "gravity", "drag", "stiffness", "density", "damping", "poisson", "thickness",
              "material", "initial_velocity", "angular_velocity", "ground")
MESH_DIAGONAL = 0.75  # metres: --meshes inputs are rescaled to this bbox diagonal
PIN_FRACTION = 0.10
SETTLE_DRAG = 4.0  # 1/s: settles a swing to a few percent within the 2 s of a sag check


# ----------------------------------------------------------------------------------------------- metrics


def chamfer_l1(a, b) -> float:
    """Chamfer-L1 of two point clouds (N, 3), (M, 3): mean of the two directed mean Euclidean NN distances."""
    a, b = torch.as_tensor(np.asarray(a), dtype=torch.float64), torch.as_tensor(np.asarray(b), dtype=torch.float64)
    d = torch.cdist(a, b, compute_mode="donot_use_mm_for_euclid_dist")  # exact: CD(P, P) == 0
    return float(0.5 * (d.min(1).values.mean() + d.min(0).values.mean()))


def bbox_diagonal(x: np.ndarray) -> float:
    return float(np.linalg.norm(x.max(0) - x.min(0)))


def vertex_error(pred: np.ndarray, ref: np.ndarray, diagonal: float) -> np.ndarray:
    """Per-frame mean vertex distance / diagonal for (T, V, 3) arrays."""
    return np.linalg.norm(np.asarray(pred, np.float64) - np.asarray(ref, np.float64), axis=-1).mean(-1) / diagonal


def rigid_fall(rest: np.ndarray, p: SimParams) -> np.ndarray:
    """Rigid free-fall baseline (T+1, V, 3), held still if pinned; else translated by v0 t + g t^2 / 2, or with
    air drag c > 0 by the exact solution of x'' = g - c x': g t / c + (v0 - g / c)(1 - exp(-c t)) / c."""
    t = np.arange(p.frames + 1)[:, None] / p.fps
    if len(p.pins):
        return np.repeat(rest[None].astype(np.float64), len(t), 0)
    v0, g, c = np.asarray(p.initial_velocity), np.asarray(p.gravity), p.drag
    if c > 1e-9:
        shift = g * t / c + (v0 - g / c) * (-np.expm1(-c * t)) / c
    else:
        shift = t * v0 + 0.5 * t**2 * g
    return rest[None].astype(np.float64) + shift[:, None, :]


def rollout_metrics(pred: np.ndarray, ref: np.ndarray, p: SimParams) -> dict:
    """Model and baseline errors (fractions of the rest diagonal) over all frames and over the first 2 s."""
    rest = np.asarray(ref[0], np.float64)
    diag = bbox_diagonal(rest)
    curves = {"model": vertex_error(pred, ref, diag),
              "rest": vertex_error(np.repeat(rest[None], len(ref), 0), ref, diag),
              "rigid": vertex_error(rigid_fall(rest, p), ref, diag)}
    n2 = min(len(ref), int(round(2.0 * p.fps)) + 1)
    out = {"frames": int(len(ref) - 1), "fps": float(p.fps)}
    for k, c in curves.items():
        out[f"{k}_error"] = float(c[1:].mean())
        out[f"{k}_error_2s"] = float(c[1:n2].mean())
    out["rest_over_model_2s"] = out["rest_error_2s"] / max(out["model_error_2s"], 1e-12)
    out["pin_error"] = pin_error(pred, p.pins, diag)
    out["curves"] = {k: [float(x) for x in c] for k, c in curves.items()}
    return out


def pin_error(positions: np.ndarray, pins: np.ndarray, diagonal: float) -> float | None:
    if not len(pins):
        return None
    return float(np.linalg.norm(positions[:, pins] - positions[0, pins], axis=-1).max() / diagonal)


# ------------------------------------------------------------------------------------------ reconstruction


def reconstruct_sequence(model, seq: dict, frames: int, points: int, ik_steps: int, rng: np.random.Generator,
                         ik_lr: float = 0.05) -> list[dict]:
    """CD-L1 of IK and posterior reconstructions for `frames` evenly spaced frames of one sequence."""
    from .train import prepare, sample_points

    shape = prepare(seq)
    T = len(shape.disp)
    picks = np.unique(np.linspace(0, T - 1, frames).round().astype(int))
    enc, evl, tgt = ([sample_points(shape, int(f), points, rng) for f in picks] for _ in range(3))

    def stack(samples, k):
        return torch.as_tensor(np.stack([s[k] for s in samples]), dtype=torch.float32)

    with torch.no_grad():
        tokens, mu_cond, code = model.prior(stack(enc, 0), stack(enc, 1))
        mu_post, _ = model.posterior(stack(enc, 0), stack(enc, 1), stack(enc, 2), tokens)
        phi_fit = model.decoder.basis(stack(enc, 0), stack(enc, 1), tokens)
        phi_eval = model.decoder.basis(stack(evl, 0), stack(evl, 1), tokens)
    target_fit = stack(enc, 2)
    z = mu_cond.clone().requires_grad_(True)
    opt = torch.optim.Adam([z], lr=ik_lr)
    for _ in range(ik_steps):
        pred = torch.einsum("bnip,bp->bni", phi_fit, model.decoder.coefficients(z, code))
        loss = ((pred - target_fit) ** 2).sum((1, 2)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    out = []
    with torch.no_grad():
        decode = {name: torch.einsum("bnip,bp->bni", phi_eval, model.decoder.coefficients(zz, code)).numpy()
                  for name, zz in (("ik", z.detach()), ("posterior", mu_post), ("prior_mean", mu_cond))}
    for i, f in enumerate(picks):
        x_eval, _, d_eval = evl[i]
        target = tgt[i][0] + tgt[i][2]
        row = {"frame": int(f) + 1, "displacement": float(np.linalg.norm(d_eval, axis=1).mean()),
               "rest": chamfer_l1(x_eval, target), "floor": chamfer_l1(x_eval + d_eval, target)}
        for name, d in decode.items():
            row[name] = chamfer_l1(x_eval + d[i], target)
        out.append(row)
    return out


# ---------------------------------------------------------------------------------------------- rollouts


def sequence_params(seq: dict) -> SimParams:
    """SimParams of a stored sequence, from its parameter JSON (SI units) and pin mask."""
    raw = seq["params"]
    kw = {k: raw[k] for k in PARAM_KEYS if k in raw}
    kw["frames"] = len(seq["positions"]) - 1
    kw["fps"] = seq["fps"]
    return make_params(pins=np.nonzero(seq["pin_mask"])[0], num_vertices=len(seq["rest"]), **kw)


def normalize_mesh(mesh: meshlib.Mesh, diagonal: float = MESH_DIAGONAL) -> meshlib.Mesh:
    """Centre on the bbox centre (lowest point at z = 0) and scale to the given bbox diagonal."""
    v = mesh.vertices - (mesh.vertices.min(0) + mesh.vertices.max(0)) / 2
    v = v * (diagonal / bbox_diagonal(v))
    v[:, 2] -= v[:, 2].min()
    return meshlib.Mesh(v, mesh.faces)


def default_pins(mesh: meshlib.Mesh, fraction: float = PIN_FRACTION) -> np.ndarray:
    """The lowest `fraction` of the vertices of every connected component (by z; by x for flat meshes lying in a
    horizontal plane). Per component, because a loose part (a teapot's lid, Suzanne's eyes) would otherwise fall
    away freely in the reference and dominate the error."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    v, f = mesh.vertices, mesh.faces
    axis = 2 if np.ptp(v[:, 2]) > 0.01 * bbox_diagonal(v) else 0
    graph = coo_matrix((np.ones(f.size), (f.ravel(), np.roll(f, 1, axis=1).ravel())), shape=(len(v), len(v)))
    _, label = connected_components(graph, directed=False)
    pins = []
    for c in np.unique(label[np.unique(f)]):
        idx = np.nonzero(label == c)[0]
        pins.append(idx[np.argsort(v[idx, axis], kind="stable")[: max(1, int(round(fraction * len(idx))))]])
    return np.sort(np.concatenate(pins))


# --------------------------------------------------------------------------------------------- physics


def _test_bodies() -> dict:
    from .data import shapes

    sv, sf = shapes.grid_sheet(21, 5, 1.0, 0.2)  # cloth strip along x, pinned at x = min
    bv, bf = shapes.box_surface((12, 3, 3), (0.6, 0.12, 0.12))  # soft cantilever
    return {"cloth_strip": (sv, sf, "cloth"), "soft_box": (bv, bf, "jelly")}


def run_states(sim, vertices, faces, p: SimParams):
    """Positions (T+1, V, 3) and energies per frame through the simulator's own pipeline functions."""
    from .dynamics import Dynamics
    from .simulator import DEFAULT_METHOD, build_body, decode_frames, integrate

    mesh = meshlib.validate(vertices, faces)
    enc = sim.encode(mesh, p.pins, p.gravity)
    with torch.no_grad():
        plan = build_body(enc, p, sim.coeff, sim.locking)
        states = integrate(plan, p, DEFAULT_METHOD, lambda *a: None, None)
        positions = decode_frames(enc, plan, states)
        dyn = Dynamics(plan.body)
        energy = [dyn.energy(y) for y in states]
    return positions, energy


def physics_checks(sim, seconds: float = 5.0, fps: float = 24.0, check_seconds: float = 2.0) -> dict:
    return {name: check_body(sim, v, f, material, seconds, fps, check_seconds)
            for name, (v, f, material) in _test_bodies().items()}


def check_body(sim, v: np.ndarray, f: np.ndarray, material: str, seconds: float = 5.0, fps: float = 24.0,
               check_seconds: float = 2.0) -> dict:
    """Energy drift, pin error and the three monotonicity checks for one body pinned at its x = min end."""
    pins = np.nonzero(v[:, 0] <= v[:, 0].min() + 1e-9)[0]
    diag = bbox_diagonal(v)

    def params(**kw):
        base = dict(frames=int(round(check_seconds * fps)), fps=fps, material=material, pins=pins,
                    num_vertices=len(v))
        return make_params(**{**base, **kw})

    def sag_and_kinetic(p):
        x, e = run_states(sim, v, f, p)
        settled = x[-max(1, len(x) // 4):]
        return float((x[0, :, 2] - settled[:, :, 2]).mean()), float(np.mean([k["kinetic"] for k in e[1:]]))

    t0 = time.time()
    pos, energy = run_states(sim, v, f, params(frames=int(round(seconds * fps)), drag=0.0, damping=0.0))
    total = np.array([e["kinetic"] + e["elastic"] + e["gravitational"] for e in energy])
    kinetic = np.array([e["kinetic"] for e in energy])
    scale = max(float(kinetic.max()), 1e-12)
    res = {"vertices": len(v), "material": material, "seconds_simulated": seconds,
           "energy_drift": float(np.abs(total - total[0]).max() / scale),
           "energy_drift_final": float(abs(total[-1] - total[0]) / scale),
           "max_kinetic_J": float(kinetic.max()), "pin_error": pin_error(pos, pins, diag),
           "energy_curve": [float(x) for x in total]}
    drags = [0.0, 1.0, 4.0]
    ke = [sag_and_kinetic(params(drag=d))[1] for d in drags]
    gravities = [2.0, 9.81, 20.0]
    sg = [sag_and_kinetic(params(gravity=(0, 0, -g), drag=SETTLE_DRAG))[0] for g in gravities]
    base_e = params().stiffness
    stiff = [base_e, 4 * base_e, 16 * base_e]
    ss = [sag_and_kinetic(params(stiffness=e, drag=SETTLE_DRAG))[0] for e in stiff]
    res["drag"] = {"values_per_s": drags, "mean_kinetic_J": ke,
                   "monotonic": bool(all(a > b for a, b in zip(ke, ke[1:])))}
    res["gravity"] = {"values_m_s2": gravities, "sag_m": sg,
                      "monotonic": bool(all(a < b for a, b in zip(sg, sg[1:])))}
    res["stiffness"] = {"values_pa": stiff, "sag_m": ss,
                        "monotonic": bool(all(a > b for a, b in zip(ss, ss[1:])))}
    res["seconds"] = time.time() - t0
    return res


# ------------------------------------------------------------------------------------------------ plots


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_loss_curves(log_path: Path, out: Path) -> bool:
    rows = [json.loads(line) for line in log_path.read_text().splitlines() if line.strip()]
    if not rows:
        return False
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    steps = [r["step"] for r in rows]
    for key in ("loss", "recon"):
        axes[0].plot(steps, [r[key] for r in rows], label=key, lw=1)
    val = [r for r in rows if "val_recon" in r]
    if val:
        axes[0].plot([r["step"] for r in val], [r["val_recon"] for r in val], "o-", label="val_recon")
    axes[0].set_yscale("log")
    axes[0].set_xlabel("step")
    axes[0].legend()
    axes[0].set_title("reconstruction loss")
    axes[1].plot(steps, [r["kl"] for r in rows], label="kl", lw=1)
    if val and "val_vertex_error" in val[0]:
        ax2 = axes[1].twinx()
        ax2.plot([r["step"] for r in val], [r["val_vertex_error"] for r in val], "o-", color="C2",
                 label="val vertex error")
        ax2.plot([r["step"] for r in val], [r["val_rest_baseline"] for r in val], "s--", color="C3",
                 label="val rest baseline")
        ax2.set_ylabel("fraction of diagonal")
        ax2.legend(loc="upper right")
    axes[1].set_xlabel("step")
    axes[1].legend(loc="upper left")
    axes[1].set_title("KL and validation error")
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return True


def plot_error_curves(items: list[dict], out: Path, title: str) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4))
    for key, color in (("model", "C0"), ("rest", "C1"), ("rigid", "C2")):
        curves = [np.asarray(it["curves"][key]) for it in items]
        n = min(len(c) for c in curves)
        mean = np.mean([c[:n] for c in curves], axis=0)
        t = np.arange(n) / items[0]["fps"]
        for c in curves:
            ax.plot(np.arange(len(c)) / items[0]["fps"], c, color=color, alpha=0.15, lw=0.7)
        ax.plot(t, mean, color=color, lw=2, label=f"{key} (mean)")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("mean vertex error / diagonal")
    ax.set_yscale("log")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)


def plot_filmstrip(ref: np.ndarray, pred: np.ndarray, faces: np.ndarray, out: Path, title: str,
                   n: int = 5) -> None:
    plt = _plt()
    picks = np.unique(np.linspace(0, len(ref) - 1, n).round().astype(int))
    both = np.concatenate([ref[picks], pred[picks]]).reshape(-1, 3)
    lo, hi = both.min(0), both.max(0)
    c, half = (lo + hi) / 2, max(float((hi - lo).max()) / 2, 1e-6)
    fig = plt.figure(figsize=(2.6 * len(picks), 5.4))
    for row, (name, data) in enumerate((("reference", ref), ("NeuROK", pred))):
        for col, f in enumerate(picks):
            ax = fig.add_subplot(2, len(picks), row * len(picks) + col + 1, projection="3d")
            x = data[f]
            ax.plot_trisurf(x[:, 0], x[:, 1], x[:, 2], triangles=faces, color="C0" if row == 0 else "C1",
                            linewidth=0, antialiased=False, shade=True)
            for setlim, k in ((ax.set_xlim, 0), (ax.set_ylim, 1), (ax.set_zlim, 2)):
                setlim(c[k] - half, c[k] + half)
            ax.set_box_aspect((1, 1, 1))
            ax.set_axis_off()
            ax.set_title(f"{name} f{f}", fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=70)
    plt.close(fig)


# ----------------------------------------------------------------------------------------------- driver


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", s)


def _summary(items: list[dict]) -> dict:
    if not items:
        return {}
    keys = ("model_error", "model_error_2s", "rest_error", "rest_error_2s", "rigid_error", "rigid_error_2s")
    s = {k: float(np.mean([it[k] for it in items])) for k in keys}
    s["rest_over_model_2s"] = s["rest_error_2s"] / max(s["model_error_2s"], 1e-12)
    s["median_rest_over_model_2s"] = float(np.median([it["rest_over_model_2s"] for it in items]))
    pins = [it["pin_error"] for it in items if it.get("pin_error") is not None]
    s["max_pin_error"] = max(pins) if pins else None
    s["count"] = len(items)
    return s


def evaluate(weights: str | None, data: str | None, meshes: str | None, out: str, limit: int | None = 20,
             run: str | None = None, recon_frames: int = 4, points: int = 2048, ik_steps: int = 200,
             mesh_frames: int = 48, physics: bool = True, filmstrips: int = 6, seed: int = 0,
             split: str = "test", log=print) -> dict:
    """The report of the module docstring. ``split`` chooses the dataset's sequences: "test" (held out from the
    training data), or "all" for a dataset the weights were not trained on at all."""
    from .data.format import list_sequences, load_sequence
    from .simulator import Simulator

    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    t_start = time.time()
    sim = Simulator(weights)
    model = sim.model
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
        report["test_rollouts"] = {"summary": _summary(rollouts), "items": rollouts,
                                   "by_family": {fam: _summary([r for r in rollouts if r["family"] == fam])
                                                 for fam in sorted({r["family"] for r in rollouts})}}
        report["test_seconds"] = time.time() - t0
        plot_error_curves(rollouts, out_dir / "error_test.png", f"{split} split: rollout error vs reference")

    if meshes:
        from .data.reference import simulate_reference

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
        report["mesh_rollouts"] = {"summary": _summary(ok), "items": items}
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
    from .weights import default_weights_path

    return default_weights_path()


def _read(path: Path):
    m = meshlib.read_obj(str(path))
    return m.vertices, m.faces


def _f(x, digits: int = 4) -> str:
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "NO"
    if isinstance(x, float) and (abs(x) >= 1e4 or (0 < abs(x) < 10 ** -digits)):
        return f"{x:.2e}"
    return f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def markdown(r: dict, out_dir: Path | None = None) -> str:
    lines = ["# NeuROK evaluation", "", f"Weights: `{r['weights']}`" + (
        f" ({json.dumps(r['weights_info'])})" if r.get("weights_info") else ""), "",
        f"Total time {r['seconds']:.0f} s. Settings: `{json.dumps(r['settings'])}`.", ""]
    if "reconstruction" in r:
        rec = r["reconstruction"]
        lines += ["## Reconstruction (Chamfer-L1, unit-diagonal shapes; paper: 0.028, target <= 0.03)", "",
                  f"CD-L1 = {r['cd_definition']}. Clouds of {r['settings']['points']} surface samples; "
                  "`floor` = ground truth at independent samples (sampling noise), `rest` = undeformed.", "",
                  "| set | IK | posterior | prior mean | rest baseline | floor |", "|---|---|---|---|---|---|"]
        for name, s in [("all", rec["summary"]), *rec["by_family"].items()]:
            lines.append(f"| {name} | {_f(s['ik'])} | {_f(s['posterior'])} | {_f(s['prior_mean'])} | "
                         f"{_f(s['rest'])} | {_f(s['floor'])} |")
        lines.append("")
    for key, title in (("test_rollouts", f"Rollout vs reference: {r['settings'].get('split', 'test')} split"),
                       ("mesh_rollouts", "Rollout vs reference: meshes")):
        if key not in r:
            continue
        block = r[key]
        lines += [f"## {title}", "", "Mean vertex error / rest bbox diagonal, averaged over frames 1..T and over "
                  "the first 2 s. Target: rest / model over 2 s >= 3.", "",
                  "| item | V | pinned | model | model 2 s | rest | rest 2 s | rigid | rigid 2 s | rest/model 2 s | "
                  "pin error | NeuROK s |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for it in block["items"]:
            if "error" in it:
                lines.append(f"| {it['name']} | {it['vertices']} | {_f(it['pinned'])} | failed: {it['error']} |"
                             + " |" * 8)
                continue
            label = it["name"] + (f" ({it['family']})" if "family" in it else "")
            lines.append(f"| {label} | {it['vertices']} | {_f(it['pinned'])} | {_f(it['model_error'])} | "
                         f"{_f(it['model_error_2s'])} | {_f(it['rest_error'])} | {_f(it['rest_error_2s'])} | "
                         f"{_f(it['rigid_error'])} | {_f(it['rigid_error_2s'])} | {it['rest_over_model_2s']:.2f} | "
                         f"{_f(it['pin_error'], 6)} | {it['simulate_seconds']:.1f} |")
        s = block["summary"]
        if s:
            lines.append(f"| **mean ({s['count']})** | | | {_f(s['model_error'])} | {_f(s['model_error_2s'])} | "
                         f"{_f(s['rest_error'])} | {_f(s['rest_error_2s'])} | {_f(s['rigid_error'])} | "
                         f"{_f(s['rigid_error_2s'])} | {s['rest_over_model_2s']:.2f} (median "
                         f"{s['median_rest_over_model_2s']:.2f}) | {_f(s['max_pin_error'], 6)} | |")
        lines.append("")
    if "physics" in r:
        lines += ["## Physics checks of the learned simulator", "",
                  "Energy drift: max |E(t) - E(0)| over 5 s with zero drag and damping, relative to the largest "
                  "kinetic energy (target <= 2%). Pin error: max pinned-vertex displacement / diagonal (target "
                  f"< 1e-4). Sag: downward vertex displacement over the last quarter of 2 s with drag "
                  f"{SETTLE_DRAG:g}/s (settled).", "",
                  "| body | energy drift | pin error | more drag -> less KE | more gravity -> more sag | "
                  "stiffer -> less sag |", "|---|---|---|---|---|---|"]
        for name, c in r["physics"].items():
            def fmt(block, key):
                vals = ", ".join(_f(x, 5) for x in block[key])
                return f"{_f(block['monotonic'])} ({vals})"

            lines.append(f"| {name} ({c['material']}, {c['vertices']} V) | {100 * c['energy_drift']:.2f}% | "
                         f"{_f(c['pin_error'], 6)} | {fmt(c['drag'], 'mean_kinetic_J')} | "
                         f"{fmt(c['gravity'], 'sag_m')} | {fmt(c['stiffness'], 'sag_m')} |")
        lines.append("")
    plots = sorted(p for p in os.listdir(out_dir) if p.endswith(".png")) if out_dir else []
    if plots:
        lines += ["## Plots", ""] + [f"![{p}]({p})" for p in plots] + [""]
    return "\n".join(lines)


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
