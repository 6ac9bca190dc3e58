"""Issue 22's sheet rows, measured through the product's path for sheets (model_runtime.continuum_sheet):

    .venv/bin/python benchmarks/sheet_rows.py            # all rows (about 3 minutes, Blender's bake included)
    .venv/bin/python benchmarks/sheet_rows.py --skip-blender

1. Edge strain, 5th-95th percentile over the second second, of an irregular cut-out with a hole (1 x 0.8 m, 1,256
   vertices, so decimated) pinned along its top edge, cloth preset, 2 s at 24 fps.
2. Energy drift over 5 s without drag or damping of the physics checks' cloth strip (lab/evaluate/checks.py).
3. Turning: the cut-out turned about gravity, and turned with gravity together, against the original turned back;
   mean difference over 1 s as a fraction of the mean motion.
4. Speed: a 10,000-vertex grid pinned along an edge, 100 frames at 24 fps, as Blender's Cloth bake (default
   settings, headless bpy) and as ``Simulator.simulate`` in this process (what the worker runs): a new mesh, and a
   re-simulate after a drag change. Printed as ratios against Blender's bake of the same run.
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from model_runtime.errors import SimulationError  # noqa: E402
from model_runtime.lab.data.shapes import grid_sheet  # noqa: E402
from model_runtime.lab.evaluate.checks import check_bodies, run_states  # noqa: E402
from model_runtime.mesh import edge_strain, validate  # noqa: E402
from model_runtime.params import make_params  # noqa: E402
from model_runtime.simulator import Simulator  # noqa: E402


def cut_out():
    """The 1 x 0.8 m sheet with a 0.15 m hole at its centre (tests/test_continuum_sheet.py's), and its top edge."""
    mesh = validate(*grid_sheet(40, 32, 1.0, 0.8, hole=0.15))
    return mesh, np.flatnonzero(mesh.vertices[:, 1] > 0.4 - 1e-9)


def strain_row(sim: Simulator) -> None:
    mesh, pins = cut_out()
    out = sim.simulate(mesh.vertices, mesh.faces, make_params(num_vertices=len(mesh.vertices), material="cloth",
                                                              frames=48, pins=pins))
    low, high = np.percentile(edge_strain(out, mesh.faces)[25:], [5, 95])
    print(f"cut-out edge strain, 5th / 95th percentile over 1-2 s: {100 * low:+.2f}% / {100 * high:+.2f}%")


def drift_row(sim: Simulator) -> None:
    v, f, material = check_bodies()["cloth_strip"]
    pins = np.flatnonzero(v[:, 0] <= v[:, 0].min() + 1e-9)
    p = make_params(num_vertices=len(v), material=material, frames=120, pins=pins, drag=0.0, damping=0.0)
    try:
        _, e = run_states(sim, v, f, p)
    except SimulationError as error:
        print(f"cloth strip, 5 s without drag or damping: {error}")
        return
    total = e["kinetic"] + e["elastic"] + e["gravitational"]
    drift = np.abs(total - total[0]).max() / e["kinetic"].max()
    print(f"cloth strip, 5 s without drag or damping: energy drift {100 * drift:.2f}% of the largest kinetic energy")


def turning_row(sim: Simulator) -> None:
    mesh, pins = cut_out()
    physics = dict(num_vertices=len(mesh.vertices), material="cloth", frames=24, pins=pins)
    base = sim.simulate(mesh.vertices, mesh.faces, make_params(**physics))
    motion = np.abs(base - mesh.vertices).mean()
    about_z = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    axis = np.array([1.0, 2.0, 3.0]) / np.sqrt(14.0)
    angle = np.radians(70.0)
    cross = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    spin = np.eye(3) + np.sin(angle) * cross + (1 - np.cos(angle)) * cross @ cross
    for name, turn, gravity in (("about gravity", about_z, (0.0, 0.0, -9.81)),
                                ("mesh and gravity together", spin, tuple(spin @ [0.0, 0.0, -9.81]))):
        out = sim.simulate(mesh.vertices @ turn.T, mesh.faces, make_params(**physics, gravity=gravity)) @ turn
        print(f"turned {name}: {100 * np.abs(out - base).mean() / motion:.3f}% of the motion apart")


def speed_row(sim: Simulator, blender: bool) -> None:
    n = 100
    u, v = np.meshgrid(np.linspace(-0.5, 0.5, n), np.linspace(-0.5, 0.5, n), indexing="ij")
    vertices = np.c_[u.ravel(), v.ravel(), np.zeros(n * n)].astype(np.float32)
    quads = np.array([[i * n + j, (i + 1) * n + j, (i + 1) * n + j + 1, i * n + j + 1]
                      for i in range(n - 1) for j in range(n - 1)])
    faces = np.concatenate([quads[:, [0, 1, 2]], quads[:, [0, 2, 3]]])
    pins = np.flatnonzero(vertices[:, 1] > 0.5 - 1e-6)
    physics = dict(num_vertices=len(vertices), material="cloth", frames=100, fps=24.0, pins=pins)
    t = time.perf_counter()
    sim.simulate(vertices, faces, make_params(**physics))
    new_mesh = time.perf_counter() - t
    t = time.perf_counter()
    sim.simulate(vertices, faces, make_params(**physics, drag=0.1))
    warm = time.perf_counter() - t
    print(f"10,000-vertex cloth, 100 frames: new mesh {new_mesh:.2f} s, re-simulate after a drag change {warm:.2f} s")
    if blender:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import bpy
        from blender_speed import blender_bake, make_grid

        bpy.ops.wm.read_factory_settings(use_empty=True)
        scene = bpy.context.scene
        scene.frame_start, scene.frame_end, scene.render.fps = 1, 101, 24
        baked = blender_bake("cloth", make_grid(99))
        print(f"Blender's Cloth bake of the same grid: {baked:.2f} s; NeuROK / Blender speed: new mesh "
              f"{baked / new_mesh:.2f}x, re-simulate {baked / warm:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-blender", action="store_true", help="time NeuROK only")
    args = parser.parse_args()
    sim = Simulator()
    strain_row(sim)
    drift_row(sim)
    turning_row(sim)
    speed_row(sim, not args.skip_blender)


if __name__ == "__main__":
    main()
