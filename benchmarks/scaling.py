"""Scaling of ``Simulator.simulate`` with vertices and frames: time and peak memory, one fresh process per point
(section 2 of run.py)."""

import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from common import FPS, ROOT, log


def grid_mesh(target_vertices: int):
    """A 1 m pinned cloth grid with about ``target_vertices`` vertices: (n, n) points, two triangles per cell."""
    n = max(2, int(round(target_vertices ** 0.5)))
    u = np.linspace(-0.5, 0.5, n)
    x, y = np.meshgrid(u, u, indexing="ij")
    vertices = np.stack([x.ravel(), y.ravel(), np.zeros(n * n)], 1)
    idx = np.arange(n * n).reshape(n, n)
    a, b, c, d = idx[:-1, :-1].ravel(), idx[1:, :-1].ravel(), idx[1:, 1:].ravel(), idx[:-1, 1:].ravel()
    faces = np.concatenate([np.stack([a, b, c], 1), np.stack([a, c, d], 1)])
    pins = idx[:, -1]  # the y = +0.5 edge
    return vertices, faces.astype(np.int64), pins


def maxrss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # kB on Linux


def scaling_point(vertices: int, frames: int) -> dict:
    """One scaling point, run in a fresh process (``--scaling-point``): prints one JSON line."""
    t = time.perf_counter()
    from model_runtime.params import make_params
    from model_runtime.simulator import Simulator

    v, f, pins = grid_mesh(vertices)
    sim = Simulator()
    load = time.perf_counter() - t
    rss_loaded = maxrss_mib()
    params = make_params(frames=frames, fps=FPS, material="cloth", pins=pins, num_vertices=len(v))
    t = time.perf_counter()
    out = sim.simulate(v, f, params)
    seconds = time.perf_counter() - t
    rss_peak = maxrss_mib()
    params = make_params(frames=frames, fps=FPS, material="cloth", drag=0.1, pins=pins, num_vertices=len(v))
    t = time.perf_counter()
    sim.simulate(v, f, params)
    resim = time.perf_counter() - t
    return {"target_vertices": int(vertices), "vertices": int(len(v)), "frames": int(frames),
            "load_seconds": load, "seconds": seconds,
            "resimulate_seconds": resim, "rss_loaded_mib": rss_loaded, "rss_peak_mib": rss_peak,
            "rss_peak_after_resimulate_mib": maxrss_mib(), "result_mib": out.nbytes / 2**20}


def scaling(cfg: dict, images: Path, tag: str) -> dict:
    points = sorted({(v, cfg["scale_base_frames"]) for v in cfg["scale_vertices"]}
                    | {(cfg["scale_base_vertices"], f) for f in cfg["scale_frames"]})
    rows = []
    for v, f in points:
        log(f"scaling: {v:,} vertices x {f} frames")
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve().parent / "run.py"), "--scaling-point",
                               str(v), str(f)],
                              cwd=ROOT, capture_output=True, text=True)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if proc.returncode != 0 or not lines:
            error = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
            rows.append({"target_vertices": v, "vertices": v, "frames": f, "error": error})
            log(f"  failed: {rows[-1]['error']}")
            continue
        rows.append(json.loads(lines[-1]))
        r = rows[-1]
        log(f"  {r['seconds']:.2f} s (re-simulate {r['resimulate_seconds']:.2f} s), peak RSS {r['rss_peak_mib']:.0f} "
            f"MiB (after load {r['rss_loaded_mib']:.0f} MiB, result {r['result_mib']:.0f} MiB)")
    ok = [r for r in rows if "error" not in r]
    fit = None
    if len({r["vertices"] * r["frames"] for r in ok}) >= 2:
        x = np.array([r["vertices"] * r["frames"] for r in ok], float)

        def linear(y):  # least squares y = a + b x, and its R^2
            y = np.asarray(y, float)
            (b, a), *_ = np.linalg.lstsq(np.stack([x, np.ones_like(x)], 1), y, rcond=None)
            r2 = 1.0 - float(((y - a - b * x) ** 2).sum() / max(((y - y.mean()) ** 2).sum(), 1e-300))
            return float(a), float(b), r2

        a, b, r2 = linear([r["seconds"] for r in ok])
        ra, rb, rr2 = linear([r["resimulate_seconds"] for r in ok])
        am, bm, _ = linear([r["rss_peak_mib"] - r["rss_loaded_mib"] for r in ok])
        # The coarse sheet's steps cost per frame whatever the vertex count: time = a + c F + b V F separates them.
        frames = np.array([r["frames"] for r in ok], float)
        (a3, c3, b3), *_ = np.linalg.lstsq(np.stack([np.ones_like(x), frames, x], 1),
                                           np.array([r["seconds"] for r in ok]), rcond=None)
        fit = {"a_seconds": a, "b_seconds_per_vertex_frame": b, "r2": r2, "resim_a_seconds": ra,
               "resim_b_seconds_per_vertex_frame": rb, "resim_r2": rr2, "mem_a_mib": am,
               "mem_b_mib_per_vertex_frame": bm, "a3_seconds": float(a3), "c3_seconds_per_frame": float(c3),
               "b3_seconds_per_vertex_frame": float(b3)}
    plot = None
    if ok:
        plot = images / f"benchmark_scaling{tag}.png"
        plot_scaling(ok, fit, cfg, plot)
    return {"points": rows, "fit": fit, "plot": str(plot) if plot else None}


def plot_scaling(rows: list[dict], fit: dict | None, cfg: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    series = [("vertices", "frames", cfg["scale_base_frames"], axes[0], "vertices"),
              ("frames", "target_vertices", cfg["scale_base_vertices"], axes[1], "frames")]
    for key, fixed, value, ax, label in series:
        pts = sorted((r for r in rows if r[fixed] == value), key=lambda r: r[key])
        if not pts:
            continue
        xs = np.array([r[key] for r in pts], float)
        ax.plot(xs, [r["seconds"] for r in pts], "o-", label="simulate (new mesh)")
        ax.plot(xs, [r["resimulate_seconds"] for r in pts], "s--", label="re-simulate (cached build)")
        if fit:
            vf = np.array([r["vertices"] * r["frames"] for r in pts], float)
            ax.plot(xs, fit["a_seconds"] + fit["b_seconds_per_vertex_frame"] * vf, "k:",
                    label=f"fit a + b V F (R$^2$ {fit['r2']:.3f})")
        ax.set_xlabel(label)
        ax.set_ylabel("seconds")
        ax.set_title(f"time vs {label} ({'vertices ~' if fixed == 'target_vertices' else 'frames ='} {value:,})")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    ax = axes[2]
    vf = np.array([r["vertices"] * r["frames"] for r in rows], float)
    order = np.argsort(vf)
    ax.plot(vf[order], np.array([r["rss_peak_mib"] for r in rows])[order], "o-", label="peak RSS")
    ax.plot(vf[order], np.array([r["rss_loaded_mib"] for r in rows])[order], "s--", label="RSS after model load")
    ax.plot(vf[order], np.array([r["result_mib"] for r in rows])[order], "^:", label="result array (float32)")
    ax.set_xlabel("vertices x frames")
    ax.set_ylabel("MiB")
    ax.set_title("memory vs vertices x frames")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
