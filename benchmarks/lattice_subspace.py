"""Which linear subspace can carry the continuum's own dynamics? Reduced runs on the reference's own lattice.

Issue 22 asks for the latent Lagrangian to use the material's own energy, and `subspace_stiffness.py` found the
learned subspace 2-6x too stiff in frequency for that. This script asks the question end to end, on the
validated reference's own discretization, so that the only difference from the reference is the subspace: the
solid is embedded in the reference's lattice (`reference.embed_solid`), its nodes move as x = X + U q for a basis
U, and q follows the same BDF2 incremental potential as `implicit_fem` (stable Neo-Hookean on every lattice tet,
lumped masses, drag c M, Rayleigh beta K, pins exact), minimized by Newton in the r coefficients. Bases:

* ``modes r``: the lattice's r lowest linear vibration modes about rest, pins held;
* ``fields``: the decoder's basis fields (its whole linear span) at the lattice nodes, pins held as the
  simulator holds them (encoding._hold_pins) and zeroed on held nodes;
* ``latent``: the span the learned latent moves in near rest (the fields times the coefficient map's Jacobian);
* ``fields + modes r``.

Each run's surface motion is compared with the full reference's over the same frames: mean vertex error over the
run as a fraction of the diagonal, and the rest shape's error over it (rest/run > 1: better than not simulating).
The shipped simulator (`model_runtime.simulate`) is run on the same case for comparison.

    .venv/bin/python benchmarks/lattice_subspace.py [--mesh ../shared/meshes/cheburashka.obj] [--beam]
"""

import argparse
import math
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
import torch

import model_runtime
from model_runtime import mesh as meshlib
from model_runtime.dynamics import DTYPE, LatentMap
from model_runtime.encoding import _hold_pins, decoder_view
from model_runtime.lab.data.implicit_fem import NEWTON_TOLERANCE, STEP_RATE, TetElasticity, _Pattern, bdf2, node_masses
from model_runtime.lab.data.reference import REFERENCE, embed_solid, lattice_cell, simulate_reference
from model_runtime.lab.data.shapes import box_surface
from model_runtime.lab.data.winding import enclosed_by_winding
from model_runtime.lab.evaluate.metrics import vertex_error
from model_runtime.lab.evaluate.rollouts import default_pins, normalize_mesh
from model_runtime.params import SimParams, make_params
from model_runtime.weights import load_model


def decoder_fields(mesh: meshlib.Mesh, pins: np.ndarray, gravity, points: np.ndarray):
    """The shipped decoder's basis fields at ``points`` (M, 3, P) in metres per unit coefficient, seen as the
    simulator sees the mesh (encoding.decoder_view), with the pins held; and the latent map's Jacobian at rest."""
    model = load_model(None)
    pin_mask = np.zeros(len(mesh.vertices), np.float32)
    pin_mask[pins] = 1.0
    axes = meshlib.principal_frame(mesh, pins, gravity)
    with torch.no_grad():
        basis, code, scale = decoder_view(model, mesh, pin_mask, axes, np.random.default_rng(0))
        at_points = basis(points, torch.zeros(1, len(points)), DTYPE) * scale
        if len(pins):
            at_vertices = basis(mesh.vertices, torch.as_tensor(pin_mask)[None], DTYPE) * scale
            at_points, _ = _hold_pins(mesh.vertices, pins, points, at_points, at_vertices, scale)
        k = model.decoder.coeff.l1.in_features - len(code)
        jac = LatentMap(model.decoder.coeff, code.double(), torch.eye(k, dtype=DTYPE)).with_derivatives(
            np.zeros(k), np.zeros(k))[1]
    return at_points.numpy(), jac


class ReducedSolid:
    """The lattice's nodes moving as x = X + U q: BDF2 steps of the reference's incremental potential in q."""

    def __init__(self, body, params: SimParams):
        self.x0, self.params = body.nodes.astype(np.float64), params
        self.elastic = TetElasticity(self.x0, body.tets, params, body.stiffness)
        n = len(self.x0)
        self.pattern = _Pattern(body.tets, np.arange(3 * n))
        self.m = np.repeat(node_masses(body.node_volume, params.density), 3)
        self.held = np.zeros(3 * n, bool)
        self.held[(3 * body.held[:, None] + np.arange(3)).ravel()] = True
        self.edge = float(np.cbrt(6.0 * np.median(self.elastic.volume)))

    def stiffness(self, x: np.ndarray):
        return self.pattern.matrix(self.pattern.assemble(self.elastic.hessian_blocks(x)), np.zeros(len(self.m)))

    def modes(self, count: int) -> np.ndarray:
        """The ``count`` lowest linear vibration modes about rest (3N, count), zero on held nodes."""
        free = ~self.held
        K = self.stiffness(self.x0)[free][:, free].tocsc()
        _, vec = spla.eigsh(K, k=count, M=sp.diags(self.m[free]).tocsc(), sigma=0.0, which="LM")
        U = np.zeros((len(self.m), count))
        U[free] = vec
        return U

    def modal_derivatives(self, modes: np.ndarray) -> np.ndarray:
        """Barbic and James's (2005) modal derivatives of the given modes (3N, m(m+1)/2): the static response
        K Psi_ij = -(dK/dq_i) Phi_j to the change of stiffness along one mode acting on another, which carries the
        second-order stretch that linearized rotations leave out. dK/dq_i by central differences."""
        free = ~self.held
        solve = spla.factorized(self.stiffness(self.x0)[free][:, free].tocsc())
        step = 1e-4 * self.edge / np.abs(modes).max(axis=0)  # a small fraction of a lattice edge along each mode
        slopes = [(self.stiffness(self.x0 + (s * u).reshape(self.x0.shape))
                   - self.stiffness(self.x0 - (s * u).reshape(self.x0.shape))) / (2.0 * s)
                  for u, s in zip(modes.T, step)]
        out = []
        for i in range(modes.shape[1]):
            for j in range(i, modes.shape[1]):
                psi = np.zeros(len(self.m))
                psi[free] = solve(-(slopes[i] @ modes[:, j])[free])
                out.append(psi)
        return np.stack(out, axis=1)

    def orthonormal(self, U: np.ndarray) -> np.ndarray:
        """An M-orthonormal basis of U's span (held rows zeroed), without its near-dependent directions."""
        U = np.where(self.held[:, None], 0.0, U)
        lam, vec = np.linalg.eigh(U.T @ (self.m[:, None] * U))
        keep = lam > 1e-10 * lam.max()
        return U @ (vec[:, keep] / np.sqrt(lam[keep]))

    def simulate(self, U: np.ndarray) -> np.ndarray:
        """Node positions (frames+1, N, 3) for an M-orthonormal basis U (3N, r), from rest."""
        p = self.params
        gravity = U.T @ (self.m * np.tile(np.asarray(p.gravity, np.float64), len(self.x0)))
        steps = max(1, math.ceil(STEP_RATE / p.fps - 1e-9))
        state = (np.zeros(U.shape[1]), np.zeros(U.shape[1]), None, None)
        out = [self.x0.copy()]
        for _ in range(p.frames):
            for _ in range(steps):
                state = self._step(U, gravity, *state, 1.0 / (p.fps * steps))
            out.append(self._place(U, state[0]))
        return np.stack(out)

    def _place(self, U: np.ndarray, q: np.ndarray) -> np.ndarray:
        return self.x0 + (U @ q).reshape(self.x0.shape)

    def _step(self, U, gravity, q, qd, q_prev, qd_prev, h):
        """One BDF2 step (backward Euler first) of implicit_fem's incremental potential, Newton in q."""
        p, r = self.params, U.shape[1]
        tau2, alpha, qp, q_hat, y = bdf2(q, qd, q_prev, qd_prev, h)
        # U is M-orthonormal: the reduced mass is the identity and drag is c I
        damp = p.drag * np.eye(r) + p.damping * (U.T @ (self.stiffness(self._place(U, q)) @ U))

        def potential(y_):
            e, grad = self.elastic.energy_and_gradient(self._place(U, y_))
            d = y_ - qp
            phi = 0.5 * (y_ - q_hat) @ (y_ - q_hat) + tau2 * (e - gravity @ y_ + 0.5 * alpha * d @ damp @ d)
            return phi, (y_ - q_hat) + tau2 * (U.T @ grad.ravel() - gravity + alpha * damp @ d)

        phi, g = potential(y)
        for _ in range(40):
            H = np.eye(r) + tau2 * (U.T @ (self.stiffness(self._place(U, y)) @ U) + alpha * damp)
            dy = -np.linalg.solve(H, g)
            s = 1.0
            while True:
                phi_new, g_new = potential(y + s * dy)
                if phi_new <= phi + 1e-4 * s * (g @ dy) or s < 1e-6:
                    break
                s *= 0.5
            y, phi, g = y + s * dy, phi_new, g_new
            if s * np.abs(U @ dy).max() <= NEWTON_TOLERANCE * self.edge:
                break
        return y, alpha * (y - qp), q, qd


def run_case(name: str, mesh: meshlib.Mesh, params: SimParams, counts=(8, 16, 32, 64), derivative_counts=(4, 6),
             only_derivatives: bool = False) -> None:
    v, f = mesh.vertices, mesh.faces
    pins = np.asarray(params.pins, np.int64)
    t = time.perf_counter()
    ref = simulate_reference(v, f, params).astype(np.float64)
    t_ref = time.perf_counter() - t
    diag = meshlib.bbox_diagonal(v)
    rest_err = float(vertex_error(np.repeat(v[None], len(ref), 0), ref, diag)[1:].mean())
    t = time.perf_counter()
    model = model_runtime.simulate(v, f, **{k: getattr(params, k) for k in (
        "frames", "fps", "gravity", "drag", "stiffness", "density", "damping", "poisson", "thickness")},
        pins=pins).astype(np.float64)
    t_model = time.perf_counter() - t
    volume = meshlib.enclosed_volume(mesh) if meshlib.is_closed(mesh) else None
    cell = lattice_cell(v, volume or enclosed_by_winding(mesh), REFERENCE)
    body = embed_solid(mesh, pins, volume, cell)
    solid = ReducedSolid(body, params)
    fields, jac = decoder_fields(mesh, pins, params.gravity, body.nodes)
    fields = fields.reshape(-1, fields.shape[-1])
    print(f"\n### {name}: {len(body.nodes)} lattice nodes, {len(body.tets)} tets, {len(body.held)} held; "
          f"reference {t_ref:.1f} s, rest error {rest_err:.4f} of the diagonal\n")
    print("| subspace | dims | mean error | rest / run | peak displacement / reference's | wall s |")
    print("|---|---|---|---|---|---|")
    peak_ref = np.linalg.norm(ref - v, axis=-1).max()

    def row(label, dims, positions, seconds):
        err = float(vertex_error(positions, ref, diag)[1:].mean())
        peak = np.linalg.norm(positions - v, axis=-1).max() / peak_ref
        print(f"| {label} | {dims} | {err:.4f} | {rest_err / err:.2f} | {peak:.2f} | {seconds:.1f} |", flush=True)

    row("shipped simulator", "", model, t_model)
    modes = solid.modes(max(counts))
    bases = [] if only_derivatives else [(f"modes {c}", modes[:, :c]) for c in counts] + [
        ("latent (near rest)", fields @ jac), ("fields", fields)] + [
        (f"fields + modes {c}", np.hstack([fields, modes[:, :c]])) for c in counts[:2]]
    for m in derivative_counts:
        derivatives = np.hstack([modes[:, :m], solid.modal_derivatives(modes[:, :m])])
        bases.append((f"modes {m} + their derivatives", derivatives))
    bases.append((f"fields + modes {m} + their derivatives", np.hstack([fields, derivatives])))
    for label, U in bases:
        U = solid.orthonormal(U)
        t = time.perf_counter()
        cage = solid.simulate(U)
        row(label, U.shape[1], body.surface(cage), time.perf_counter() - t)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mesh", default=str(Path(__file__).resolve().parents[2] / "shared/meshes/cheburashka.obj"))
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--beam", action="store_true", help="the rubber box cantilever of issue 22 instead")
    ap.add_argument("--poisson", type=float, default=None, help="Poisson ratio (default: the preset's)")
    ap.add_argument("--derivatives-only", action="store_true", help="only the modal-derivative bases")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    frames = int(round(24 * args.seconds))
    if args.beam:
        length, side = 0.3, 0.06
        v, f = box_surface((10, 2, 2), (length, side, side))
        v[:, 0] += length / 2
        mesh = meshlib.validate(v, f)
        pins = np.nonzero(v[:, 0] < 1e-9)[0]
        params = make_params(frames=frames, material="rubber", stiffness=1e6, drag=0.0, damping=0.0, pins=pins,
                             poisson=args.poisson, num_vertices=len(v))
        run_case(f"rubber box cantilever L 0.3 m, side 0.06 m, E 1 MPa, Poisson {params.poisson}, no drag or damping",
                 mesh, params, only_derivatives=args.derivatives_only)
    else:
        mesh = normalize_mesh(meshlib.read_obj(args.mesh), 0.5)
        pins = default_pins(mesh)
        params = make_params(frames=frames, material="jelly", drag=0.5, pins=pins, poisson=args.poisson,
                             num_vertices=len(mesh.vertices))
        run_case(f"{args.mesh.split('/')[-1]} 0.5 m, jelly, Poisson {params.poisson}, drag 0.5, lowest 10% pinned",
                 mesh, params, only_derivatives=args.derivatives_only)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
