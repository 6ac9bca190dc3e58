"""The reduced Lagrangian body for one encoding and one set of physical parameters: point masses on
the query points, the spring network's stiffness calibrated to Young's modulus (and to the continuum
for pinned solids, softened for sheets), the reduced latent basis in vibration modes, mass scaling,
contact stiffness and the planned RK4 substeps and tolerance.
"""

import math
from dataclasses import dataclass

import numpy as np
import torch

from . import contact, statics
from . import mesh as meshlib
from .dynamics import DTYPE, Body, LatentMap, skew
from .encoding import Encoding
from .errors import MeshError, SimulationError
from .frame_motion import FrameMotion
from .model import CoefficientMLP
from .params import STANDARD_GRAVITY, SimParams
from .wind import make_wind

# omega * frame time above which modes are slowed (a period shorter than 6 frames): a solid's by
# modal mass, a sheet's towards it by stretch inertia (build_body)
MODE_CUT = 2 * math.pi / 6
# omega * step for RK4: stable to 2.8, but it loses ~(omega step)^6 / 72 of the energy per step
STABLE_STEP = 0.3
MAX_SUBSTEPS = 16  # only strong drag needs more than ceil(MODE_CUT / STABLE_STEP) = 4
# self-weight strain rho g diagonal / E a shell's membrane is softened to (_stiffness_factor)
MEMBRANE_STRAIN = 0.2
# fraction of its stretch stiffness a sheet's spring keeps when shortened: the decoder's smooth
# fields cannot wrinkle
SHEET_COMPRESSION = 0.03
# Bounds on the stiffness scale of a pinned solid: a body whose decoded deformations barely load it
# (a latent direction the springs do not see) must not end up arbitrarily stiff or soft.
MIN_STIFFNESS_FACTOR, MAX_STIFFNESS_FACTOR = 1e-3, 10.0
# adaptive methods' relative error per step: ~0.2% energy drift over 5 s (docs/decisions.md)
RTOL = 5e-5
# sheets, whose stretch inertia keeps the drift ~1% at it, for 15% fewer evaluations
SHEET_RTOL = 1e-4
# resting depth g / k of a unit mass on the ground penalty, as a fraction of the body's size
GROUND_SAG = 5e-4
# cap on sqrt(k) * frame time: ~30 adaptive steps a frame while touching the ground
MAX_GROUND_RATE = 150.0
# sqrt(k) * step for fixed steps: RK4 is stable to 2.8 on the critically damped contact
CONTACT_STEP = 2.0


@dataclass
class Plan:
    """A body ready to integrate, with what decoding needs to reproduce its kinematics at the
    vertices."""

    body: Body
    substeps: int  # RK4 steps per frame
    stiffness_factor: float  # scale on the spring network's nominal stiffness (_stiffness_factor)
    rigid: torch.Tensor | None  # (6, P) rigid part projected off each basis field (free bodies)
    rtol: float  # adaptive methods' relative tolerance


@torch.no_grad()
def build_body(enc: Encoding, p: SimParams, coeff: CoefficientMLP,
               locking: dict | None = None) -> Plan:
    """Physical body for the parameters, its reduced latent basis and the RK4 substeps per frame;
    ``coeff`` is the decoder's coefficient MLP and ``locking`` the weights' stiffness correction for
    solids (None: none)."""
    n = len(enc.queries)
    volume = enc.volume if enc.closed else enc.area * p.thickness
    rest = torch.as_tensor(enc.queries, dtype=DTYPE)
    surface = torch.as_tensor(enc.surface_queries, dtype=DTYPE)
    mass = torch.cat([_point_masses(surface, torch.as_tensor(enc.centroid), p.density * volume),
                      torch.zeros(enc.anchors, dtype=DTYPE)])
    phi = enc.phi_q * enc.scale
    com = (mass[:, None] * rest).sum(0) / mass.sum()
    rest = rest - com
    rigid = None
    if not enc.pinned:
        fields, w = _rigid_fields(rest), mass.repeat_interleave(3).sqrt()[:, None]
        # mass-weighted projection
        rigid = torch.linalg.lstsq(w * fields, w * phi.reshape(3 * n, -1)).solution
        phi = phi.reshape(3 * n, -1) - fields @ rigid
    phi = phi.reshape(3 * n, -1)
    si, sj = (torch.as_tensor(a) for a in enc.springs)
    d = rest[sj] - rest[si]
    length = d.norm(dim=1)
    # Uniform strain e along a random direction stores sum k L^2 e^2 / 10 in the springs
    # (mean cos^4 = 1/5); equating it with the continuum's E e^2 V / 2 gives the spring constant for
    # Young's modulus E.
    k_spring = 5.0 * p.stiffness * volume / float((length**2).sum())
    code = enc.code
    dt = 1.0 / p.fps
    U, omega, shapes = _reduced_basis(coeff, code, phi, mass, d / length[:, None], si, sj, k_spring)
    factor = _stiffness_factor(enc, p, rest, mass, shapes, omega, locking)
    # the mode shapes do not depend on a scale of K
    k_spring, omega = k_spring * factor, omega * math.sqrt(factor)
    # Mass scaling slows modes faster than the frame rate can show to about omega_cut, keeping
    # static deflection: a solid by modal mass at rest, a sheet by stretch inertia (history:
    # docs/decisions.md).
    omega_cut = MODE_CUT / dt
    if enc.closed:
        added_mass, stretch_inertia = ((omega / omega_cut) ** 2 - 1.0).clamp_min(0.0), None
        omega_max = min(float(omega.max()), omega_cut)
    else:
        added_mass, stretch_inertia = torch.zeros_like(omega), 1.0 / omega_cut**2
        omega_max = float((omega / (1.0 + (omega / omega_cut) ** 2).sqrt()).max())
    colliders = contact.scene_colliders(p.ground, p.colliders)
    ground_omega = 2.0 * omega_cut if colliders else 0.0
    rate = max(omega_max, p.drag, ground_omega, p.damping * omega_max**2)
    substeps = int(min(MAX_SUBSTEPS, max(1, math.ceil(rate * dt / STABLE_STEP))))
    step = dt / substeps
    # Stiffness-proportional damping of the fastest kept mode is capped at what an explicit step can
    # resolve.
    damping = min(p.damping, STABLE_STEP / max(omega_max**2 * step, 1e-12))
    contact_k = (0.5 / step) ** 2
    if colliders:
        # the steady push a contact holds: gravity and the wind at full strength
        push = float(np.linalg.norm(p.gravity)) + sum(float(np.linalg.norm(w["acceleration"]))
                                                      for w in p.wind)
        contact_k = _ground_stiffness(contact_k, float(rest.norm(dim=1).max()), push, dt)
        # Fixed-step methods (and the RK4 fallback) need steps short enough for the contact as well.
        substeps = max(substeps, math.ceil(math.sqrt(contact_k) * dt / CONTACT_STEP))
    body = Body(rest=rest, center=com, phi=phi, latent=LatentMap(coeff, code, U),
                added_mass=added_mass, mass=mass, spring_i=si, spring_j=sj, spring_rest=length,
                spring_k=torch.full_like(length, k_spring), damping=damping, drag=p.drag,
                gravity=torch.as_tensor(p.gravity, dtype=DTYPE), colliders=colliders,
                contact_k=contact_k, free=not enc.pinned,
                compression=1.0 if enc.closed else SHEET_COMPRESSION,
                stretch_inertia=stretch_inertia,
                frame=None if p.frame_motion is None else FrameMotion(p.frame_motion, p.fps),
                wind=make_wind(p.wind))
    return Plan(body, substeps, factor, rigid, RTOL if enc.closed else SHEET_RTOL)


def _ground_stiffness(base: float, size: float, gravity: float, dt: float) -> float:
    """Ground penalty stiffness per unit mass (1/s^2) for a body of ``size`` m: at least ``base``,
    and enough that a unit mass rests at most GROUND_SAG x size deep, up to
    (MAX_GROUND_RATE / dt)^2.

    A stiffness that ignores size sinks every body by the same g / k: ~1.4 mm at 24 fps, nothing for
    a 1 m box but twice the size of a millimetre one. A body rests deeper than g / k when only part
    of its mass touches (a face-down box by ~10x, a sphere more, on its small contact cap);
    GROUND_SAG keeps both at a few percent of their size (measured from 5 mm to 0.5 m: a box ~0.5%
    of its edge, a coarse sphere ~4% of its diameter). While touching, sqrt(k) sets the adaptive
    step, so it is capped to stay well within integration.MAX_EVALUATIONS_PER_FRAME; only bodies
    under ~3 mm across (at 24 fps) get the capped, softer contact.
    """
    k = max(base, gravity / (GROUND_SAG * max(size, 1e-12)))
    return min(k, max(base, (MAX_GROUND_RATE / dt) ** 2))


def _stiffness_factor(enc: Encoding, p: SimParams, rest: torch.Tensor, mass: torch.Tensor,
                      shapes: torch.Tensor, omega: torch.Tensor, locking: dict | None) -> float:
    """Scale on the spring network's stiffness (calibrated to Young's modulus for uniform strain)
    for this body.

    Solids: the network resists bending through its stiffest fibres, and the decoder's bending
    deformations carry a little spurious axial strain, by amounts that depend on the shape (at full
    stiffness a slender cantilever sagged ~2% of Euler-Bernoulli, base-pinned blocks 20-40% of the
    reference's lean). A pinned solid is matched to the continuum itself (_continuum_factor); a free
    one, which has no static equilibrium to match, takes the weights' slenderness law, fitted to the
    continuum factors of pinned beams and blocks (_locking_factor, model_runtime.lab.calibrate), and
    so does a pinned one too thin for the continuum's lattice.

    Open surfaces: a cloth's real strain under its own weight is ~0.1%, while the decoder is
    isometric only to a few percent; at full membrane stiffness a pinned cotton sheet stayed flat.
    As with under-integrated shell elements, the membrane is softened until the nominal self-weight
    strain reaches MEMBRANE_STRAIN, so that the decoder's bending deformations, which stretch a
    little, are not held back by stiffness the sheet does not show.
    """
    if not enc.closed:
        return min(1.0, p.density * STANDARD_GRAVITY * enc.scale / (MEMBRANE_STRAIN * p.stiffness))
    if enc.pinned and (solid := _solid_sag(enc, p.poisson, float(mass.sum()))) is not None:
        return _continuum_factor(p, mass, shapes, omega, solid)
    return _locking_factor(rest, p.gravity, locking) if locking is not None else 1.0


def _continuum_factor(p: SimParams, mass: torch.Tensor, shapes: torch.Tensor, omega: torch.Tensor,
                      solid: np.ndarray) -> float:
    """The ratio of the linearized body's compliance under its own weight, g^T C g, to that of the
    same solid in linear elasticity (``solid``, from _solid_sag), both weighted by the query points'
    masses: the scale that gives the body the continuum's mean sag along gravity (without gravity,
    the mean over directions)."""
    g = np.asarray(p.gravity, float)
    loads = g / np.linalg.norm(g) if g @ g > 0 else np.eye(3)
    model = np.einsum("ab,...a,...b", _compliance(mass, shapes, omega), loads, loads)
    continuum = np.einsum("iab,i,...a,...b", solid, mass.numpy(), loads, loads) / p.stiffness
    return float(np.clip(model.sum() / continuum.sum(), MIN_STIFFNESS_FACTOR, MAX_STIFFNESS_FACTOR))


def _locking_factor(rest: torch.Tensor, gravity, locking: dict) -> float:
    """min(1, c s2^p)^w: s2 the squared thickness over the length (bending_shape) and w = sin^2 of
    the angle between the length and gravity, blended towards 1 as the body gets stubby
    (w + (1 - w) s2), where its length has no direction. A free body bends across its length and is
    compressed along it, and compression does not lock (uncorrected, columns under their own weight
    shortened within 2x of rho g h^2 / 2E)."""
    s2, axis = bending_shape(rest)
    g = torch.as_tensor(gravity, dtype=DTYPE)
    transverse = 1.0 - float((axis @ g) ** 2 / (g @ g)) if float(g @ g) > 0 else 1.0
    law = min(1.0, locking["coefficient"] * s2 ** locking["exponent"])
    return law ** (transverse + (1.0 - transverse) * s2)


def _compliance(mass: torch.Tensor, shapes: torch.Tensor, omega: torch.Tensor) -> np.ndarray:
    """(3, 3) static compliance of the linearized body: C[a, b] = sum_i m_i u_b(x_i)[a], u_b its sag
    under a unit body force along b; ``shapes`` (3N, r) are its M-orthonormal modes at the points,
    ``omega`` their frequencies."""
    force = torch.einsum("i,ibr->rb", mass, shapes.view(len(mass), 3, -1))  # modal force, (r, 3)
    w2 = omega**2
    # directions the springs do not resist carry no static load
    kept = w2 > 1e-12 * w2.max().clamp_min(1e-300)
    return (force[kept].T @ (force[kept] / w2[kept, None])).numpy()


def _solid_sag(enc: Encoding, poisson: float, total: float) -> np.ndarray | None:
    """statics.self_weight_sag of the encoded solid at its query points, for a body of ``total`` kg
    at E = 1 Pa; None when the lattice cannot represent the body. Cached per Poisson ratio: the sag
    is proportional to the mass, so it is solved once at 1 kg."""
    if poisson not in enc.sag:
        try:
            # in the mesh's own axes, whose lattice turns with it, then back to world axes
            own = statics.self_weight_sag(meshlib.Mesh(enc.vertices @ enc.axes, enc.faces),
                                          enc.pins, poisson, enc.queries @ enc.axes, 1.0)
            enc.sag[poisson] = np.einsum("ia,pab,jb->pij", enc.axes, own, enc.axes)
        except MeshError:
            enc.sag[poisson] = None
    sag = enc.sag[poisson]
    return None if sag is None else sag * total


def bending_shape(points: torch.Tensor) -> tuple[float, torch.Tensor]:
    """(thickness / length)^2 of a body as the ratio of its smallest to largest principal variance,
    and its long axis."""
    centred = points - points.mean(0)
    variances, axes = torch.linalg.eigh(centred.T @ centred / len(points))
    return float(variances[0] / variances[-1]), axes[:, -1]


def _point_masses(points: torch.Tensor, centroid: torch.Tensor, total: float) -> torch.Tensor:
    """Near-equal masses on area-uniform samples, nudged linearly so their centre of mass is the
    surface's exact centroid (a few hundred random samples miss it by ~1% of the size, enough to
    wobble a spinning body)."""
    n = len(points)
    offset = points - points.mean(0)
    lam = torch.linalg.pinv(offset.T @ offset / n) @ (centroid - points.mean(0))
    weights = (1.0 + offset @ lam).clamp_min(0.25)
    return total * weights / weights.sum()


def _rigid_fields(points: torch.Tensor) -> torch.Tensor:
    """(3N, 6) velocity fields of rigid translation and rotation about the origin at the given
    points.

    Free bodies project these off every basis field (the mean-axis frame condition): deformation
    then carries no linear or angular momentum at first order, so rigid and latent coordinates stay
    independent and the mass matrix well conditioned.
    """
    n = len(points)
    translation = torch.eye(3, dtype=DTYPE).expand(n, 3, 3)
    return torch.cat([translation, -skew(points)], dim=2).reshape(3 * n, 6)


def _reduced_basis(coeff, code, phi, mass, directions, si, sj, k_spring):
    """Reduced latent basis U (k, r) in vibration modes of the linearized body, their frequencies
    (rad/s) and their shapes at the points (3N, r).

    Directions of z that barely move the decoded shape are dropped (the mass matrix is singular
    along them): the active subspace of the decoder at rest. The rest are split into modes
    K v = omega^2 M v; U's columns are M-orthonormal, so q are modal coordinates at rest.
    """
    k = coeff.l1.in_features - len(code)
    z0 = np.zeros(k)
    _, G, _ = LatentMap(coeff, code, torch.eye(k, dtype=DTYPE)).with_derivatives(z0, z0)
    J = phi @ torch.from_numpy(G)  # (3N, k)
    m3 = mass.repeat_interleave(3)
    M = J.T @ (m3[:, None] * J)
    lam, vec = torch.linalg.eigh(M)
    active = lam > 1e-9 * lam.max().clamp_min(1e-300)
    if not active.any():
        raise SimulationError("the model sees no way for this mesh to deform "
                              "(its latent space is degenerate)")
    B = vec[:, active] / lam[active].sqrt()
    n = len(mass)
    Jb = (J @ B).view(n, 3, -1)
    # (E, a): spring length change per coordinate
    stretch = (directions[:, :, None] * (Jb[sj] - Jb[si])).sum(1)
    K = k_spring * stretch.T @ stretch
    w2, modes = torch.linalg.eigh(K)
    return B @ modes, w2.clamp_min(0.0).sqrt(), Jb.view(3 * n, -1) @ modes
