"""NeuROK benchmark: speed against Blender's own simulators, scaling, fidelity; writes one Markdown report.

    .venv/bin/python benchmarks/run.py --out docs/benchmarks.md          # the published figures (long)
    .venv/bin/python benchmarks/run.py --out /tmp/bench/b.md --quick     # a tiny end-to-end development run

Everything runs on this machine, in this process, except the scaling points (one fresh subprocess each, so that
``ru_maxrss`` is the peak memory of that point alone). Plots and the fidelity report go to ``images/`` next to
``--out`` (``docs/images/benchmark_*`` for the published report); the raw numbers to ``--out`` with ``.json``.

1. **Speed vs Blender** (headless bpy, the real extension built with Blender's tool and installed in a throwaway
   user directory): pinned grids (one edge) timed as a Cloth bake (default cloth settings, pin group, 100 frames at
   24 fps, ``bpy.ops.ptcache.bake``) against ``bpy.ops.neurok.simulate`` (background mode runs the worker
   synchronously: mesh export, encode, latent ODE, decode, writing 101 shape keys), and icospheres pinned at the
   bottom timed as a Soft Body bake against NeuROK with the jelly preset. Runs alternate Blender / NeuROK; medians.
   NeuROK is timed twice per repeat: *cold* (the worker is stopped first, so the time includes starting it,
   importing torch and loading the model) and *new mesh* (a running worker, a mesh it has not encoded: the object
   is moved 1 mm, which changes its world-space vertices). Then *re-simulate*: same object, warm worker, a
   parameter (drag) changed, so the mesh encoding is reused.
2. **Scaling** of ``model_runtime.Simulator.simulate`` (pinned cloth grids) against vertices and frames: time and
   peak RSS, with a least-squares fit time = a + b * V * frames.
3. **Fidelity**: ``model_runtime.lab.evaluate.evaluate`` on ``../shared/meshes`` and the test split of the dataset
   (reference vs NeuROK, rest-shape and rigid baselines, filmstrips).
"""

import argparse
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
ADDON_MODULE = "bl_ext.user_default.neurok"
FPS = 24
FRAMES = 100  # simulated frames after the rest frame: scene frames 1..101
PIN_GROUP = "pinned"

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


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def median(xs):
    return float(statistics.median(xs)) if xs else None


# ------------------------------------------------------------------------------------------------ machine


def machine() -> dict:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = int(line.split()[1]) / 2**20
    except OSError:
        pass

    def version(pkg):
        try:
            return metadata.version(pkg)
        except metadata.PackageNotFoundError:
            return None

    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                                timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": mem, "python": platform.python_version(),
            "platform": platform.platform(), "torch": version("torch"), "bpy": version("bpy"),
            "torchdiffeq": version("torchdiffeq"), "numpy": version("numpy"), "commit": commit,
            "load_average_start": os.getloadavg()}


# ------------------------------------------------------------------------------------------ Blender side


def install_extension(workdir: Path):
    """Build the extension zip with Blender's own tool and install it (BLENDER_USER_RESOURCES set by main)."""
    import bpy

    tool = Path(bpy.utils.system_resource("SCRIPTS")) / "addons_core" / "bl_pkg" / "cli" / "blender_ext.py"
    out = workdir / "extension"
    out.mkdir()
    subprocess.run([sys.executable, str(tool), "build", "--source-dir", str(ROOT), "--output-dir", str(out)],
                   check=True, capture_output=True)
    zip_path = next(out.glob("neurok-*.zip"))
    result = bpy.ops.extensions.package_install_files(filepath=str(zip_path), repo="user_default",
                                                      enable_on_install=True)
    if result != {"FINISHED"}:
        raise RuntimeError(f"installing {zip_path} failed: {result}")


def fresh_scene():
    import addon_utils
    import bpy

    bpy.ops.wm.read_factory_settings(use_empty=True)
    addon_utils.enable(ADDON_MODULE, default_set=True)
    prefs = bpy.context.preferences.addons[ADDON_MODULE].preferences
    prefs.python_path = sys.executable
    prefs.timeout = max(prefs.timeout, 600)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 1 + FRAMES
    scene.render.fps, scene.render.fps_base = FPS, 1.0
    return scene


def make_grid(subdivisions: int, z: float = 0.0):
    """A 1 m x 1 m horizontal grid of (subdivisions + 1)^2 vertices, its y = +0.5 edge in the pin group."""
    import bpy

    bpy.ops.mesh.primitive_grid_add(x_subdivisions=subdivisions, y_subdivisions=subdivisions, size=1.0,
                                    location=(0.0, 0.0, z))
    obj = bpy.context.active_object
    ys = np.empty(len(obj.data.vertices) * 3, np.float32)
    obj.data.vertices.foreach_get("co", ys)
    ys = ys.reshape(-1, 3)[:, 1]
    group = obj.vertex_groups.new(name=PIN_GROUP)
    group.add(np.nonzero(ys > ys.max() - 1e-4)[0].tolist(), 1.0, "REPLACE")
    return obj


def make_icosphere(subdivisions: int, z: float = 0.0):
    """A 1 m diameter icosphere, the vertices in its lowest 10% of height in the pin group."""
    import bpy

    bpy.ops.mesh.primitive_ico_sphere_add(subdivisions=subdivisions, radius=0.5, location=(0.0, 0.0, z))
    obj = bpy.context.active_object
    co = np.empty(len(obj.data.vertices) * 3, np.float32)
    obj.data.vertices.foreach_get("co", co)
    zs = co.reshape(-1, 3)[:, 2]
    group = obj.vertex_groups.new(name=PIN_GROUP)
    group.add(np.nonzero(zs < zs.min() + 0.1 * (zs.max() - zs.min()))[0].tolist(), 1.0, "REPLACE")
    return obj


def remove(obj) -> None:
    import bpy

    mesh = obj.data
    bpy.data.objects.remove(obj)
    if mesh.users == 0:
        bpy.data.meshes.remove(mesh)


def pinned_indices(obj) -> np.ndarray:
    index = obj.vertex_groups[PIN_GROUP].index
    return np.array([v.index for v in obj.data.vertices for g in v.groups if g.group == index and g.weight > 0.5])


def evaluated_positions(obj, frame: int) -> np.ndarray:
    import bpy

    bpy.context.scene.frame_set(frame)
    ev = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
    co = np.empty(len(ev.data.vertices) * 3, np.float32)
    ev.data.vertices.foreach_get("co", co)
    return co.reshape(-1, 3) @ np.asarray(obj.matrix_world)[:3, :3].T + np.asarray(obj.matrix_world)[:3, 3]


def motion_check(obj) -> dict:
    """What the last frame looks like: mean vertex displacement and the largest pinned-vertex displacement (m)."""
    rest = evaluated_positions(obj, 1)
    last = evaluated_positions(obj, 1 + FRAMES)
    d = np.linalg.norm(last - rest, axis=1)
    pins = pinned_indices(obj)
    return {"mean_displacement_m": float(d.mean()), "max_pin_displacement_m": float(d[pins].max()) if len(pins)
            else None, "lowest_z_m": float(last[:, 2].min() - rest[:, 2].min())}


def blender_bake(kind: str, obj) -> float:
    """Add Blender's Cloth or Soft Body with default settings (pins through the pin group) and time the bake."""
    import bpy

    if kind == "cloth":
        mod = obj.modifiers.new("Cloth", "CLOTH")
        mod.settings.vertex_group_mass = PIN_GROUP
    else:
        mod = obj.modifiers.new("Softbody", "SOFT_BODY")
        mod.settings.vertex_group_goal = PIN_GROUP
        # Blender 5.0 scales goal-group weights by the default goal (0.7): at 0.7 the "pinned" vertices fell with
        # the rest (measured), at 1.0 weight-1 vertices hold and weight-0 vertices are free.
        mod.settings.goal_default = 1.0
    cache = mod.point_cache
    cache.frame_start, cache.frame_end = 1, 1 + FRAMES
    scene = bpy.context.scene
    t = time.perf_counter()
    with bpy.context.temp_override(scene=scene, active_object=obj, object=obj, point_cache=cache):
        result = bpy.ops.ptcache.bake(bake=True)
    seconds = time.perf_counter() - t
    if result != {"FINISHED"} or not cache.is_baked:
        raise RuntimeError(f"the {kind} bake did not finish: {result}")
    return seconds


class NeurokTimer:
    """Runs the add-on's Simulate operator and measures, inside it, the time spent writing shape keys."""

    def __init__(self):
        import importlib

        self.client = importlib.import_module(ADDON_MODULE + ".neurok_addon.client")
        self.shape_keys = importlib.import_module(ADDON_MODULE + ".neurok_addon.shape_keys")
        self._write = self.shape_keys.write_animation
        self.write_seconds = 0.0

        def timed_write(*args, **kwargs):
            t = time.perf_counter()
            try:
                return self._write(*args, **kwargs)
            finally:
                self.write_seconds += time.perf_counter() - t

        self.shape_keys.write_animation = timed_write  # operators.py looks it up on the module at call time

    def stop_worker(self) -> None:
        self.client.shutdown()

    def simulate(self, obj) -> dict:
        import bpy

        for other in bpy.context.selected_objects:
            other.select_set(False)
        bpy.context.view_layer.objects.active = obj
        obj.select_set(True)
        self.write_seconds = 0.0
        t = time.perf_counter()
        result = bpy.ops.neurok.simulate()
        seconds = time.perf_counter() - t
        keys = len(self.shape_keys.neurok_key_blocks(obj))
        if result != {"FINISHED"} or keys != FRAMES + 1:
            raise RuntimeError(f"neurok.simulate returned {result} with {keys} NeuROK shape keys")
        return {"seconds": seconds, "shape_keys_seconds": self.write_seconds}


def neurok_object(kind: str, size: int, material: str, offset: float):
    obj = (make_grid if kind == "cloth" else make_icosphere)(size, z=offset)
    obj.neurok.pin_group = PIN_GROUP
    obj.neurok.material = material
    return obj


def speed(cfg: dict, workdir: Path) -> dict:
    import bpy

    install_extension(workdir)
    fresh_scene()
    neurok = NeurokTimer()
    cases = [("cloth", n, "cloth") for n in cfg["cloth"]] + [("softbody", n, "jelly") for n in cfg["soft"]]
    results = []
    moves = 0
    for kind, size, material in cases:
        make = make_grid if kind == "cloth" else make_icosphere
        probe = make(size)
        vertices = len(probe.data.vertices)
        remove(probe)
        row = {"kind": kind, "subdivisions": size, "vertices": vertices, "material": material, "blender": [],
               "cold": [], "new_mesh": [], "shape_keys": []}
        log(f"speed: {kind} {vertices:,} vertices, {cfg['repeats']} repeats")
        for r in range(cfg["repeats"]):
            obj = make(size)
            row["blender"].append(blender_bake(kind, obj))
            if r == 0:
                row["blender_check"] = motion_check(obj)
            remove(obj)
            log(f"  Blender {kind}: {row['blender'][-1]:.2f} s")

            neurok.stop_worker()
            moves += 1
            obj = neurok_object(kind, size, material, 1e-3 * moves)
            cold = neurok.simulate(obj)
            row["cold"].append(cold["seconds"])
            remove(obj)

            moves += 1
            obj = neurok_object(kind, size, material, 1e-3 * moves)
            new = neurok.simulate(obj)
            row["new_mesh"].append(new["seconds"])
            row["shape_keys"].append(new["shape_keys_seconds"])
            if r == 0:
                row["neurok_check"] = motion_check(obj)
            remove(obj)
            log(f"  NeuROK: cold {cold['seconds']:.2f} s, new mesh {new['seconds']:.2f} s "
                f"(shape keys {new['shape_keys_seconds']:.2f} s)")
        for key in ("blender", "cold", "new_mesh", "shape_keys"):
            row[f"{key}_median"] = median(row[key])
        row["speedup_new_mesh"] = row["blender_median"] / row["new_mesh_median"]
        row["speedup_cold"] = row["blender_median"] / row["cold_median"]
        results.append(row)

    # Warm re-simulate: same object and mesh, a running worker, one parameter changed each time.
    obj = neurok_object("cloth", cfg["warm_grid"], "cloth", 0.5)
    vertices = len(obj.data.vertices)
    first = neurok.simulate(obj)
    warm = []
    for r in range(cfg["warm_repeats"]):
        obj.neurok.drag = 0.05 * (r + 1)
        warm.append(neurok.simulate(obj))
        log(f"  warm re-simulate {vertices:,} vertices (drag {obj.neurok.drag:.2f}): {warm[-1]['seconds']:.2f} s")
    remove(obj)
    neurok.stop_worker()
    bpy.ops.wm.read_factory_settings(use_empty=True)
    return {"cases": results, "warm": {
        "vertices": vertices, "first_seconds": first["seconds"], "seconds": [w["seconds"] for w in warm],
        "shape_keys_seconds": [w["shape_keys_seconds"] for w in warm],
        "median": median([w["seconds"] for w in warm]),
        "shape_keys_median": median([w["shape_keys_seconds"] for w in warm])}}


# ----------------------------------------------------------------------------------------------- scaling


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
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--scaling-point", str(v), str(f)],
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
        # The latent ODE costs per frame whatever the vertex count: time = a + c F + b V F separates it out.
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
        ax.plot(xs, [r["resimulate_seconds"] for r in pts], "s--", label="re-simulate (cached encoding)")
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


# ---------------------------------------------------------------------------------------------- fidelity


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


# ------------------------------------------------------------------------------------------------ report


def _s(x, digits=2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _pm(x: float, digits: int = 3) -> str:
    return f"{'-' if x < 0 else '+'} {abs(x):.{digits}f}"


def _verdict(ok: bool) -> str:
    return "**met**" if ok else "**not met**"


def report_markdown(r: dict, out: Path) -> str:
    m = r["machine"]
    quick = r["quick"]
    lines = ["# NeuROK benchmarks", ""]
    if quick:
        lines += ["> **--quick, development run, not the published figures.** Tiny sizes and 2 repeats, to check "
                  "that the benchmark runs end to end.", ""]
    lines += [f"Generated by `{r['command']}` on {r['date']} (commit `{m['commit']}`) in {r['seconds'] / 60:.1f} "
              "min. " + ("Every number, table and plot below comes from that command and the one named for each kept "
                         "section." if r.get("merged") else
                         "Every number, table and plot below comes from that one command."), ""]
    for section, origin in r.get("merged", {}).items():
        lines += [f"The *{section}* section is kept from an earlier run: `{origin['command']}` on {origin['date']}.",
                  ""]
    lines += [
              "## Machine", "",
              f"- CPU: {m['cpu']}, {m['cores']} logical cores, {_s(m['memory_gib'], 1)} GiB RAM, no GPU used",
              f"- {m['platform']}, Python {m['python']}",
              f"- torch {m['torch']}, torchdiffeq {m['torchdiffeq']}, numpy {m['numpy']}, bpy {m['bpy']} "
              "(Blender as a Python module, headless)",
              f"- Load average at start {', '.join(f'{x:.2f}' for x in m['load_average_start'])}, at end "
              f"{', '.join(f'{x:.2f}' for x in r['load_average_end'])} (other work on the machine skews timings)",
              ""]
    sp = r.get("speed")
    if sp:
        lines += ["## Speed against Blender's simulators", "",
                  f"{FRAMES} frames at {FPS} fps (scene frames 1-{1 + FRAMES}). Blender: a 1 m grid pinned along one "
                  "edge with the Cloth modifier (default settings, pin group as *Pin Group*), an icosphere of 1 m "
                  "diameter pinned over its lowest 10% of height with the Soft Body modifier (default settings, pin "
                  "group as *Goal* group, default goal 1.0 so that the pins hold), both baked with "
                  "`bpy.ops.ptcache.bake`. NeuROK: `bpy.ops.neurok.simulate` on the same mesh and pin group "
                  "(material preset in the table) through the installed extension in background mode, which runs "
                  "the worker synchronously: mesh export, encoding, latent ODE, decoding and writing "
                  f"{FRAMES + 1} shape keys with their keyframes. *Cold*: the worker is stopped first (the time "
                  "includes starting it, importing torch and loading the model). *New mesh*: a running worker and a "
                  "mesh it has not encoded yet. Runs alternate Blender, NeuROK cold, NeuROK new mesh; medians of "
                  f"{r['config']['repeats']} repeats.", "",
                  "| sim | vertices | NeuROK material | Blender bake s | NeuROK new mesh s | of which shape keys s | "
                  "NeuROK cold s | speed-up (new mesh) | speed-up (cold) |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for c in sp["cases"]:
            lines.append(f"| {c['kind']} | {c['vertices']:,} | {c['material']} | {_s(c['blender_median'])} | "
                         f"{_s(c['new_mesh_median'])} | {_s(c['shape_keys_median'])} | {_s(c['cold_median'])} | "
                         f"{c['speedup_new_mesh']:.1f}x | {c['speedup_cold']:.1f}x |")
        lines += ["", "All runs (seconds):", "", "| sim | vertices | Blender | NeuROK cold | NeuROK new mesh |",
                  "|---|---|---|---|---|"]
        for c in sp["cases"]:
            lines.append(f"| {c['kind']} | {c['vertices']:,} | {', '.join(_s(x) for x in c['blender'])} | "
                         f"{', '.join(_s(x) for x in c['cold'])} | {', '.join(_s(x) for x in c['new_mesh'])} |")
        lines += ["", "Sanity check of what each side simulated (first repeat, last frame vs first, metres): mean "
                  "vertex displacement, largest displacement of a pinned vertex, drop of the lowest point.", "",
                  "| sim | vertices | Blender mean disp | Blender pin disp | Blender drop | NeuROK mean disp | "
                  "NeuROK pin disp | NeuROK drop |", "|---|---|---|---|---|---|---|---|"]
        for c in sp["cases"]:
            b, n = c["blender_check"], c["neurok_check"]
            lines.append(f"| {c['kind']} | {c['vertices']:,} | {_s(b['mean_displacement_m'], 3)} | "
                         f"{_s(b['max_pin_displacement_m'], 4)} | {_s(-b['lowest_z_m'], 3)} | "
                         f"{_s(n['mean_displacement_m'], 3)} | {_s(n['max_pin_displacement_m'], 4)} | "
                         f"{_s(-n['lowest_z_m'], 3)} |")
        w = sp["warm"]
        lines += ["", f"**Re-simulate with a warm worker** (same {w['vertices']:,}-vertex pinned cloth grid, "
                  f"{FRAMES} frames, drag changed before each run, so the cached mesh encoding is reused): median "
                  f"{_s(w['median'])} s (of which shape keys {_s(w['shape_keys_median'])} s; runs "
                  f"{', '.join(_s(x) for x in w['seconds'])} s; the first simulation of that mesh took "
                  f"{_s(w['first_seconds'])} s).", "", "Targets (issue 6):", ""]
        for c in sp["cases"]:
            if c["kind"] == "cloth" and c["vertices"] >= 9_000:
                ok = _verdict(c["speedup_new_mesh"] >= 10)
                lines.append(f"- NeuROK >= 10x faster than Cloth at {c['vertices']:,} vertices: "
                             f"{c['speedup_new_mesh']:.1f}x with a running worker ({ok}), "
                             f"{c['speedup_cold']:.1f}x cold")
        if w["vertices"] >= 9_000:
            lines.append(f"- warm re-simulate < 1 s at {w['vertices']:,} vertices x {FRAMES} frames: "
                         f"{_s(w['median'])} s ({_verdict(w['median'] < 1.0)})")
        else:
            lines.append(f"- warm re-simulate target is for 10k vertices; this run used {w['vertices']:,}")
        lines.append("")
    sc = r.get("scaling")
    if sc:
        lines += ["## Scaling of `simulate`", "",
                  "`model_runtime.Simulator.simulate` on pinned cloth grids (1 m, pinned along one edge, cloth "
                  f"preset, {FPS} fps), each point in a fresh process: *simulate* is a new mesh (encode + ODE + "
                  "decode, model already loaded), *re-simulate* the same mesh with drag changed. Memory is the "
                  "process's peak resident set (`ru_maxrss`) after loading the model and after simulating; the "
                  "result array alone is (frames + 1) x V x 3 float32.", "",
                  "| vertices | frames | simulate s | re-simulate s | model load s | RSS after load MiB | peak RSS "
                  "MiB | result MiB |", "|---|---|---|---|---|---|---|---|"]
        for p in sc["points"]:
            if "error" in p:
                lines.append(f"| {p['vertices']:,} | {p['frames']} | failed: {p['error']} | | | | | |")
                continue
            lines.append(f"| {p['vertices']:,} | {p['frames']} | {_s(p['seconds'])} | {_s(p['resimulate_seconds'])} "
                         f"| {_s(p['load_seconds'])} | {p['rss_loaded_mib']:.0f} | {p['rss_peak_mib']:.0f} | "
                         f"{p['result_mib']:.1f} |")
        f = sc["fit"]
        if f:
            lines += ["", f"Least-squares fit over all points: **time = {f['a_seconds']:.3f} s "
                      f"{_pm(f['b_seconds_per_vertex_frame'] * 1e6)} us x V x frames** (R^2 = {f['r2']:.3f}); "
                      f"re-simulate {f['resim_a_seconds']:.3f} s {_pm(f['resim_b_seconds_per_vertex_frame'] * 1e6)} "
                      f"us x V x frames (R^2 = {f['resim_r2']:.3f}); memory "
                      f"above the loaded model ~ {f['mem_a_mib']:.0f} MiB + {f['mem_b_mib_per_vertex_frame'] * 1e6:.1f}"
                      " MiB per million vertex-frames. With a per-frame term for the latent ODE (independent of "
                      f"V): time = {f['a3_seconds']:.3f} s {_pm(f['c3_seconds_per_frame'] * 1e3)} ms x frames "
                      f"{_pm(f['b3_seconds_per_vertex_frame'] * 1e6)} us x V x frames."]
        if sc["plot"]:
            lines += ["", f"![scaling]({os.path.relpath(sc['plot'], out.parent)})"]
        lines.append("")
    fi = r.get("fidelity")
    if fi:
        rel = os.path.relpath(fi["dir"], out.parent)
        body = fi["markdown"]
        body = re.sub(r"!\[([^\]]*)\]\(([^)/]+)\)", lambda mm: f"![{mm.group(1)}]({rel}/{mm.group(2)})", body)
        body = re.sub(r"^(#+) ", r"#\1 ", body, flags=re.M).split("\n")[1:]
        while body and not body[0].strip():
            body.pop(0)  # drop its title, one level down
        lines += ["## Fidelity", "",
                  f"Run in-process with `model_runtime.lab.evaluate.evaluate`, the same as `python -m model_runtime "
                  f"evaluate --meshes {fi['meshes']} --data {fi['data']} --limit {r['config']['fidelity_limit']}"
                  f"{'' if r['config']['physics'] else ' --no-physics'} --out {rel}`, in {fi['seconds']:.0f} s; its "
                  f"JSON and plots are in `{rel}/`.", ""] + body
    return "\n".join(lines).rstrip() + "\n"


# -------------------------------------------------------------------------------------------------- main


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
