"""How physical is a weights file's deformation subspace? Its cantilevers' continuum frequencies against beam theory.

The continuum-elasticity dynamics (issue 22) evaluates the material's own energy on decoded deformations. That
only gives the right motion if the decoder can bend a body without straining it in ways real bending does not: a
subspace whose bending shapes also stretch, shear or distort the section is too stiff (locking), whatever the
integrator. This script measures it without any simulation: for clamped box beams (solids) and clamped strips
(sheets) it builds the continuum energy at the cubature points (model_runtime.cubature, model_runtime.potential),
and prints the lowest vibration frequency of the linearized body within

* the learned latent space (z, through the decoder's coefficient map at rest: what the dynamics moves in), and
* the span of the decoder's basis fields (a, the linear space z maps into: an upper bound on what the latent
  could reach without retraining the fields),

as ratios to Euler-Bernoulli's first clamped frequency 1.875^2 sqrt(EI / (rho A L^4)) (for a strip, EI per width is
the plate's D). A ratio of 1 means the subspace bends as cleanly as the continuum; the sag under gravity goes as
its inverse square.

    .venv/bin/python benchmarks/subspace_stiffness.py [--weights FILE]
"""

import argparse
import math

import numpy as np
import torch

from model_runtime import cubature, elasticity, encoding
from model_runtime.dynamics import DTYPE, LatentMap
from model_runtime.lab.data.shapes import box_surface, grid_sheet
from model_runtime.mesh import bbox_diagonal, is_closed, sample_surface, validate
from model_runtime.model import Decoder
from model_runtime.potential import ElasticPotential
from model_runtime.weights import load_model

E, RHO = 1.0e6, 1100.0  # rubber, Pa and kg/m^3
THICKNESS = 2e-3  # a strip's, m


def encode(model, decoder64, vertices, faces, pins):
    """The decoder's displacement field (metres per unit coefficient) for this mesh with its pins held, and the
    shape code."""
    mesh = validate(vertices, faces)
    center = (vertices.min(0) + vertices.max(0)) / 2
    scale = bbox_diagonal(vertices)
    pin_mask = np.zeros(len(vertices), np.float32)
    pin_mask[pins] = 1.0
    pts, face, bary = sample_surface(mesh, encoding.ENCODER_POINTS, np.random.default_rng(0))
    flags = torch.as_tensor((bary * pin_mask[faces[face]]).sum(1), dtype=torch.float32)
    tokens, _, code = model.prior(torch.as_tensor((pts - center) / scale, dtype=torch.float32)[None], flags[None])
    tokens = tokens.double()

    def raw(points, pinned):
        x = torch.as_tensor((points - center) / scale, dtype=DTYPE)[None]
        return decoder64.basis(x, torch.full((1, len(points)), pinned, dtype=DTYPE), tokens)[0] * scale

    held = raw(vertices[pins], 1.0)

    def field(points):
        phi = raw(points, 0.0)
        # the simulator's pin hold: subtract each pinned vertex's field, faded out over PIN_RADIUS of the diagonal
        d, j = torch.cdist(torch.as_tensor(points), torch.as_tensor(vertices[pins])).min(dim=1)
        alpha = torch.exp(-(d / (encoding.PIN_RADIUS * scale)) ** 2)
        return phi - alpha[:, None, None] * held[j]

    return mesh, field, code[0].double()


def frequencies(model, decoder64, vertices, faces, pins, poisson, thickness):
    """Lowest angular frequency (rad/s) of the clamped body within the latent space and within the fields' span."""
    mesh, field, code = encode(model, decoder64, vertices, faces, pins)
    cub = cubature.solid_points(mesh) if is_closed(mesh) else cubature.sheet_points(mesh, np.random.default_rng(0))
    phi, grad, curv = cubature.field_derivatives(field, cub)
    n = len(cub.points)
    frame = torch.eye(3, dtype=DTYPE).expand(n, 3, 3) if cub.solid else torch.as_tensor(cub.tangents, dtype=DTYPE)
    weights = torch.as_tensor(cub.weights, dtype=DTYPE)
    elastic = ElasticPotential(grad, frame, weights, E, poisson, thickness, curv)
    K = elastic.stiffness(torch.zeros(phi.shape[-1], dtype=DTYPE)).numpy()
    mass = (RHO * weights * (1.0 if cub.solid else thickness)).repeat_interleave(3).numpy()
    span = phi.reshape(3 * n, -1).numpy()
    M = span.T @ (mass[:, None] * span)
    k = model.decoder.coeff.l1.in_features - len(code)
    G = LatentMap(model.decoder.coeff, code, torch.eye(k, dtype=DTYPE)).with_derivatives(np.zeros(k), np.zeros(k))[1]
    return _lowest(G.T @ K @ G, G.T @ M @ G), _lowest(K, M)


def _lowest(K: np.ndarray, M: np.ndarray) -> float:
    """sqrt of the smallest eigenvalue of K v = w^2 M v over the directions M does not leave singular."""
    lam, vec = np.linalg.eigh(M)
    active = lam > 1e-9 * lam.max()
    B = vec[:, active] / np.sqrt(lam[active])
    return float(np.sqrt(max(np.linalg.eigvalsh(B.T @ (0.5 * (K + K.T)) @ B)[0], 0.0)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weights", default=None, help="weights (.safetensors); default: the shipped ones")
    args = ap.parse_args(argv)
    model = load_model(args.weights)
    decoder64 = Decoder(model.cfg).double()
    decoder64.load_state_dict(model.decoder.state_dict())
    print("| body | L/thickness | Poisson | theory rad/s | latent / theory | fields' span / theory |")
    print("|---|---|---|---|---|---|")
    with torch.no_grad():
        for slender in (5, 10):
            length, side = 0.3, 0.3 / slender
            v, f = box_surface((4 * slender, 4, 4), (length, side, side))
            v[:, 0] += length / 2
            pins = np.nonzero(v[:, 0] < 1e-9)[0]
            theory = 1.875**2 * math.sqrt(E * side**4 / 12 / (RHO * side**2 * length**4))
            for nu in (0.0, 0.45):
                latent, span = frequencies(model, decoder64, v, f, pins, nu, THICKNESS)
                print(f"| box beam | {slender} | {nu} | {theory:.1f} | {latent / theory:.2f} | {span / theory:.2f} |")
        length, width = 0.3, 0.1
        v, f = grid_sheet(30, 10, length, width)
        v[:, 0] -= v[:, 0].min()
        pins = np.nonzero(v[:, 0] < 1e-9)[0]
        for nu in (0.0, 0.3):
            D = elasticity.bending_modulus(E, nu, THICKNESS)
            theory = 1.875**2 * math.sqrt(D / (RHO * THICKNESS * length**4))
            latent, span = frequencies(model, decoder64, v, f, pins, nu, THICKNESS)
            print(f"| strip (sheet) | {length / THICKNESS:.0f} | {nu} | {theory:.2f} | {latent / theory:.2f} | "
                  f"{span / theory:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
