"""Which linear subspace can carry the continuum's own dynamics? Reduced runs on the reference's own lattice.

Issue 22 asks for the dynamics to use the material's own energy. This script asks which subspace carries it end to
end, on the
validated reference's own discretization, so that what differs from the reference is the subspace and the time
step: the solid is embedded in the reference's lattice (`lattice.embed_solid`), its nodes move as x = X + U q for a
basis U, and q follows `continuum_solid.integrate` (the reference's dynamics, by implicit midpoint where the
reference takes BDF2) with the exact reduced energy, every lattice tet, instead of the product's cubature. Bases:

* ``modes r``: the lattice's r lowest linear vibration modes about rest, pins held;
* ``modes m + their derivatives``: with Barbic and James's modal derivatives, and with the static responses to
  uniform loads (the product's basis, `continuum_solid.build_subspace`).

(The decoder's basis fields, alone and with modes, were measured here too until the learned model left the dynamics:
docs/decisions.md, 2026-12-06.)

Each run's surface motion is compared with the full reference's over the same frames: mean vertex error over the
run as a fraction of the diagonal, and the rest shape's error over it (rest/run > 1: better than not simulating).
The product (`model_runtime.simulate`: for a pinned solid, `continuum_solid` on its own lattice and cubature) is
run on the same case for comparison.

    .venv/bin/python benchmarks/lattice_subspace.py [--mesh ../shared/meshes/cheburashka.obj] [--beam]
        [--derivatives-only | --product-only] [--ground GAP]
"""

import argparse
import time
from pathlib import Path

import numpy as np
import torch

import model_runtime
from model_runtime import contact, continuum_solid
from model_runtime import mesh as meshlib
from model_runtime.lab.data.reference import REFERENCE, simulate_reference
from model_runtime.lab.data.shapes import box_surface
from model_runtime.lab.evaluate.metrics import vertex_error
from model_runtime.lab.evaluate.rollouts import default_pins, normalize_mesh
from model_runtime.lattice import embed_solid, lattice_cell
from model_runtime.params import SimParams, make_params
from model_runtime.winding import enclosed_by_winding


def run_case(name: str, mesh: meshlib.Mesh, params: SimParams, counts=(8, 16, 32, 64), derivative_counts=(4, 6),
             only_derivatives: bool = False, only_product: bool = False) -> None:
    v, f = mesh.vertices, mesh.faces
    pins = np.asarray(params.pins, np.int64)
    t = time.perf_counter()
    ref = simulate_reference(v, f, params).astype(np.float64)
    t_ref = time.perf_counter() - t
    diag = meshlib.bbox_diagonal(v)
    rest_err = float(vertex_error(np.repeat(v[None], len(ref), 0), ref, diag)[1:].mean())
    t = time.perf_counter()
    model = model_runtime.simulate(v, f, **{k: getattr(params, k) for k in (
        "frames", "fps", "gravity", "drag", "stiffness", "density", "damping", "poisson", "thickness", "ground")},
        pins=pins).astype(np.float64)
    t_model = time.perf_counter() - t
    volume = meshlib.enclosed_volume(mesh) if meshlib.is_closed(mesh) else None
    cell = lattice_cell(v, volume or enclosed_by_winding(mesh), REFERENCE)
    body = embed_solid(mesh, pins, volume, cell)
    print(f"\n### {name}: {len(body.nodes)} lattice nodes, {len(body.tets)} tets, {len(body.held)} held; "
          f"reference {t_ref:.1f} s, rest error {rest_err:.4f} of the diagonal\n")
    print("| subspace | dims | mean error | rest / run | peak displacement / reference's | wall s |")
    print("|---|---|---|---|---|---|")
    peak_ref = np.linalg.norm(ref - v, axis=-1).max()

    def row(label, dims, positions, seconds):
        err = float(vertex_error(positions, ref, diag)[1:].mean())
        peak = np.linalg.norm(positions - v, axis=-1).max() / peak_ref
        print(f"| {label} | {dims} | {err:.4f} | {rest_err / err:.2f} | {peak:.2f} | {seconds:.1f} |", flush=True)

    row("model_runtime.simulate (the product)", "", model, t_model)
    if only_product:
        return
    lattice = continuum_solid.Lattice(body, SimParams(stiffness=1.0, density=1.0, poisson=params.poisson))
    modes, _ = lattice.modes(max(counts))
    bases = [] if only_derivatives else [(f"modes {c}", modes[:, :c]) for c in counts]
    for m in derivative_counts:
        derivatives = np.hstack([modes[:, :m], lattice.modal_derivatives(modes[:, :m])])
        bases.append((f"modes {m} + their derivatives", derivatives))
    bases.append((f"modes {m} + their derivatives + static loads",
                  np.hstack([derivatives, lattice.static_responses()])))
    colliders = contact.scene_colliders(params.ground, params.colliders)
    for label, U in bases:
        sub = continuum_solid.subspace(body, lattice.orthonormal(U))
        t = time.perf_counter()
        positions = continuum_solid.simulate(sub, mesh, params, colliders=colliders)
        row(label, sub.dims, positions, time.perf_counter() - t)


def ground(vertices: np.ndarray, gap: float | None) -> float | None:
    return None if gap is None else float(vertices[:, 2].min()) - gap


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mesh", default=str(Path(__file__).resolve().parents[2] / "shared/meshes/cheburashka.obj"))
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--beam", action="store_true", help="the rubber box cantilever of issue 22 instead")
    ap.add_argument("--poisson", type=float, default=None, help="Poisson ratio (default: the preset's)")
    ap.add_argument("--derivatives-only", action="store_true", help="only the modal-derivative bases")
    ap.add_argument("--product-only", action="store_true", help="only the product against the reference")
    ap.add_argument("--ground", type=float, default=None, metavar="GAP",
                    help="a ground plane GAP m below the body's lowest point")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    frames = int(round(24 * args.seconds))
    below = "" if args.ground is None else f", ground {args.ground} m below"
    if args.beam:
        length, side = 0.3, 0.06
        v, f = box_surface((10, 2, 2), (length, side, side))
        v[:, 0] += length / 2
        mesh = meshlib.validate(v, f)
        pins = np.nonzero(v[:, 0] < 1e-9)[0]
        params = make_params(frames=frames, material="rubber", stiffness=1e6, drag=0.0, damping=0.0, pins=pins,
                             poisson=args.poisson, num_vertices=len(v), ground=ground(v, args.ground))
        run_case(f"rubber box cantilever L 0.3 m, side 0.06 m, E 1 MPa, Poisson {params.poisson}, no drag or damping"
                 + below,
                 mesh, params, only_derivatives=args.derivatives_only, only_product=args.product_only)
    else:
        mesh = normalize_mesh(meshlib.read_obj(args.mesh), 0.5)
        pins = default_pins(mesh)
        params = make_params(frames=frames, material="jelly", drag=0.5, pins=pins, poisson=args.poisson,
                             num_vertices=len(mesh.vertices), ground=ground(mesh.vertices, args.ground))
        run_case(f"{args.mesh.split('/')[-1]} 0.5 m, jelly, Poisson {params.poisson}, drag 0.5, lowest 10% pinned"
                 + below,
                 mesh, params, only_derivatives=args.derivatives_only, only_product=args.product_only)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
