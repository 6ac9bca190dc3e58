"""Free solids (no pins) through the product's path for them (model_runtime.continuum_free):

    .venv/bin/python benchmarks/free_rows.py [MESH.obj ...]    # about 2-3 minutes per mesh, the reference's run

1. Drops against the validated reference (lab/data/reference.py, the full lattice): a jelly box and each closed mesh
   given (rescaled to 0.5 m, centred), tilted 0.4 rad, released 0.1 m above the ground with drag 0.5, 2 s at 24 fps.
   Holding the rest shape is no baseline for a falling body, so this reports the mean vertex error over the run as
   a fraction of the diagonal, and how much each run deforms: the mean distance of its vertices from the best rigid
   fit of its rest shape (Kabsch), model over reference.
2. Energy drift over 5 s without drag or damping: the soft box of the physics checks spinning without gravity, as a
   fraction of its kinetic energy, with the discrete angular momentum's largest change.
3. Time: a new mesh (build and integrate) and a re-simulate after a drag change, for the drops' meshes, printed
   against the reference's run of the same scene.
"""

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from model_runtime import continuum_free  # noqa: E402
from model_runtime.lab.data.reference import simulate_reference  # noqa: E402
from model_runtime.lab.data.shapes import box_surface  # noqa: E402
from model_runtime.lab.evaluate.checks import check_bodies  # noqa: E402
from model_runtime.mesh import bbox_diagonal, is_closed, read_obj, validate  # noqa: E402
from model_runtime.params import make_params  # noqa: E402
from model_runtime.simulator import Simulator  # noqa: E402

TILT = 0.4  # rad about x: lands on an edge, so it tumbles
DROP = 0.1  # m above the ground


def rigid_residual(rest: np.ndarray, frames: np.ndarray) -> float:
    """Mean over frames and vertices of the distance from the best rigid motion of ``rest`` onto each frame (m)."""
    centred = rest - rest.mean(0)
    out = []
    for x in frames:
        U, _, Vt = np.linalg.svd(centred.T @ (x - x.mean(0)))
        R = (U @ np.diag([1.0, 1.0, np.sign(np.linalg.det(U @ Vt))]) @ Vt).T
        out.append(np.linalg.norm(centred @ R.T + x.mean(0) - x, axis=1).mean())
    return float(np.mean(out))


def drop_row(name: str, v: np.ndarray, f: np.ndarray) -> None:
    c, s = np.cos(TILT), np.sin(TILT)
    v = (v - v.mean(0)) @ np.array([[1, 0, 0], [0, c, -s], [0, s, c]]).T
    p = make_params(num_vertices=len(v), material="jelly", frames=48, drag=0.5, ground=float(v[:, 2].min()) - DROP)
    t = time.perf_counter()
    ref = simulate_reference(v, f, p).astype(np.float64)
    t_ref = time.perf_counter() - t
    sim = Simulator()
    t = time.perf_counter()
    out = sim.simulate(v, f, p).astype(np.float64)
    t_new = time.perf_counter() - t
    t = time.perf_counter()
    sim.simulate(v, f, make_params(num_vertices=len(v), material="jelly", frames=48, drag=1.0, ground=p.ground))
    t_again = time.perf_counter() - t
    diag = bbox_diagonal(v)
    error = float(np.linalg.norm(out - ref, axis=2)[1:].mean() / diag)
    deform = rigid_residual(v, out[1:]) / rigid_residual(v, ref[1:])
    print(f"| {name} | {len(v)} | {error:.4f} | {deform:.2f} | {t_new:.1f} / {t_again:.1f} | {t_ref:.1f} |",
          flush=True)


def drift_row() -> None:
    v, f, _ = check_bodies()["soft_box"]
    mesh = validate(v, f)
    p = make_params(num_vertices=len(v), material="jelly", frames=120, drag=0.0, damping=0.0, gravity=(0, 0, 0),
                    angular_velocity=(1.0, 2.0, 5.0))
    sim = Simulator()
    built, _, _ = sim.built(continuum_free, mesh, p)
    X, P = continuum_free.integrate(built, p)
    e = continuum_free.energies(built, p, X, P)
    total = e["kinetic"] + e["elastic"]
    drift = np.abs(total - total[0]).max() / e["kinetic"][0]
    spin = np.abs(P[:, 3:6] - P[0, 3:6]).max() / np.linalg.norm(P[0, 3:6])
    print(f"soft box spinning, 5 s without drag or damping: energy drift {100 * drift:.3f}% of its kinetic energy, "
          f"angular momentum {spin:.1e} of itself; largest elastic energy {e['elastic'].max() / e['kinetic'][0]:.2%}")


def main(argv=None) -> int:
    meshes = [("jelly box 0.4 x 0.2 x 0.2 m", *box_surface((8, 4, 4), (0.4, 0.2, 0.2)))]
    for path in argv if argv is not None else sys.argv[1:]:
        mesh = read_obj(path)
        if not is_closed(mesh):
            print(f"{path}: open, not a solid; skipped")
            continue
        v = (mesh.vertices - mesh.vertices.mean(0)) * (0.5 / np.ptp(mesh.vertices, 0).max())
        meshes.append((Path(path).stem, v, mesh.faces))
    drift_row()
    print("\n| drop | vertices | mean error / diagonal | deformation, model / reference | new / re-simulate s | "
          "reference s |\n|---|---|---|---|---|---|")
    for name, v, f in meshes:
        drop_row(name, v, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
