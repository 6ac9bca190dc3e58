"""``simulate``: mesh + physical parameters -> per-frame vertex positions, through the learned latent space.

Pipeline: validate the mesh -> encode it once (shape tokens, decoder basis fields at query points and at every
vertex; cached per mesh and pin set, so re-simulating after a parameter tweak skips it) -> build the reduced
Lagrangian body for the parameters -> integrate with torchdiffeq.odeint frame chunk by frame chunk (progress and
cancel between chunks) -> decode every frame at every vertex with one matrix product per chunk.
"""

import hashlib
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from torchdiffeq import odeint
from torchdiffeq._impl.odeint import SOLVERS  # torchdiffeq's table of methods; it exports none
from torchdiffeq._impl.solvers import FixedGridODESolver

from . import contact, statics
from . import mesh as meshlib
from .contact import make_colliders
from .dynamics import DTYPE, Body, BudgetSpent, Dynamics, LatentMap, State, quat_to_matrix, skew
from .errors import Cancelled, MeshError, SimulationError
from .frame_motion import FrameMotion
from .model import CoefficientMLP, NeuROK
from .params import STANDARD_GRAVITY, SimParams, make_params
from .weights import load_model
from .wind import make_wind

ENCODER_POINTS = 2048
QUERY_POINTS = 256
# Pinned vertices joined to the spring network as fixed, massless points: without them nothing resisted a band
# between the pins and the nearest query points stretching without bound (a 1 m cloth grid of 50k vertices fell
# 5 m from its pinned edge, strain ~100x in the first 2 cm).
ANCHOR_POINTS = 32
VERTEX_CHUNK = 8192
NEIGHBOURS = 10
# A sheet's points join fewer neighbours (a flat triangulation has six): its springs also carry the stretch inertia
# (Body.stretch_inertia), whose Jacobian costs an evaluation in proportion to their number. On v2's cloth and
# cut-outs (rollout over 2 s, mean error in diagonals, seq 0-74 / 75-157) 10 gave 0.0915 / 0.0899, 7 gave
# 0.0923 / 0.0922 and 6 gave 0.0939 / 0.0954; 7 took a 10,000-vertex pinned cloth's 100 frames from 2.2 to 1.7 s.
SHEET_NEIGHBOURS = 7
PIN_RADIUS = 0.05  # fraction of the diagonal over which the pin correction fades out
# omega * frame time above which modes are slowed (a period shorter than 6 frames): a solid's by modal mass, a sheet's
# towards it by stretch inertia (build_body)
MODE_CUT = 2 * math.pi / 6
STABLE_STEP = 0.3  # omega * step for RK4: stable to 2.8, but it loses ~(omega step)^6 / 72 of the energy per step
MAX_SUBSTEPS = 16  # only strong drag needs more than ceil(MODE_CUT / STABLE_STEP) = 4
# Nominal self-weight strain (rho g diagonal / E) a shell's membrane is softened to (see _stiffness_factor). First
# chosen at 0.3 against the validated reference on v2's pinned and grounded cloth and cut-outs (median rest/model over
# 2 s on the first 49 sequences' 18: 0.1: 1.97, 0.2: 2.32, 0.3: 2.64, 0.5: 2.89; beyond 0.3 each point of fidelity
# cost twice the stretch). Once sheets stopped resisting compression (SHEET_COMPRESSION) that reversed: chosen
# jointly with it on the 31 cloth and cut-outs among seq 0-74 and checked on the 30 among seq 75-157 (mean error over
# 2 s, in diagonals; 2026-12-04): 0.3 with 0.1: 0.1153 / 0.1288; 0.2 with 0.03: 0.1097 / 0.1177 (20 of 31 better
# and 8 worse, 23 of 30 better and 3 worse; grid: docs/decisions.md); compression 0 shrank cloth on the ground. Stretch
# went down (95th percentile over the second second of seq 116, an edge-pinned cloth: 0.38 -> 0.27).
MEMBRANE_STRAIN = 0.2
# A sheet's springs resist shortening with this fraction of their stiffness in stretch. A real sheet buckles out of
# its plane under almost any in-plane compression, but the decoder's smooth fields cannot wrinkle, so the shapes
# it gives a swinging sheet shorten some springs as much as they stretch others (-43% to +43%, 5th-95th percentile,
# on a cotton square fitted past the bottom of its swing), and at full stiffness that barrier held pinned cloth
# hanging where the reference swings back up. First chosen at 0.1 (median rest/model on the v2 cloth and cut-outs
# among seq 0-74: 1: 2.54, 0.3: 2.96, 0.1: 3.12, 0.03: 3.09, 0: 3.01), then 0.03 with MEMBRANE_STRAIN (see there).
# Not 0: with no resistance at all a cloth lying on the ground shrank by ~20% (median edge strain -0.18 to -0.21),
# against -5% at 0.03 and -2% at 0.1.
SHEET_COMPRESSION = 0.03
# Bounds on the stiffness scale of a pinned solid: a body whose decoded deformations barely load it (a latent
# direction the springs do not see) must not end up arbitrarily stiff or soft.
MIN_STIFFNESS_FACTOR, MAX_STIFFNESS_FACTOR = 1e-3, 10.0
# Error-controlled steps by default: they follow the stiffening of large deformations (the learned map's curvature
# lifts a deformed body's fastest mode from the capped 25 rad/s at rest to 100-600 rad/s, measured), where
# fixed-step RK4 at the same cost lost 3-16% of the energy. The method is the Dormand-Prince 5(4) pair at rtol 5e-5,
# in scipy's implementation (RK45), which torchdiffeq runs through its scipy_solver: torchdiffeq's own dopri5 takes
# the same steps, but its torch bookkeeping cost ~100 us per evaluation on this CPU, as much as the right-hand side
# (10k-vertex pinned cloth, 100 frames: 2.0 s of integration with dopri5, 1.5 s with RK45, measured while the other
# core was busy). The tolerance, measured 2026-12-04 on the total energy over 5 s without drag or damping (cloth
# strip and soft box of evaluate._test_bodies) and on that cloth: rtol 3e-5: 0.16% / 0.39%, 6,050 evaluations;
# 5e-5: 0.17% / 0.47%, 5,174 (the rollout median over the 131 v2 sequences: 2.865 -> 2.874, only two ground
# impacts moving by more than 2%); 1e-4: 0.61% / 1.35%, 4,310, too close to the 2% target. DOP853 at 1e-4 conserved
# energy best (0.10% / 0.13%) but took 24,458 evaluations on that cloth: the kink of the sheets' compression
# (Body.compression) breaks the smoothness its order relies on, as ground contact does.
RTOL, ATOL = 5e-5, 1e-7  # adaptive methods: state error per step
# Sheets, whose mass scaling follows their springs (Body.stretch_inertia), at 1e-4: over 5 s without drag or damping
# the cloth strip drifted 0.49% at 5e-5, 1.0% at 1e-4 and 1.9% at 2e-4, a pinned 0.5 m square 0.19%, 0.15% and 2.1%
# (2026-12-05); at 1e-4 the v2 cloth and cut-outs' rollout error was unchanged (0.0920 / 0.0923 of the diagonal on
# seq 0-74 / 75-157, against 0.0923 / 0.0922) for 15% fewer evaluations on the 10k-vertex cloth.
SHEET_RTOL = 1e-4
DEFAULT_METHOD = "rk45"
SCIPY_METHODS = {"rk45": "RK45", "dop853": "DOP853"}  # run by torchdiffeq's scipy_solver
# Methods that take a step size and no tolerances, from torchdiffeq's own table so none (heun3...) passes as adaptive
FIXED_STEP_METHODS = frozenset(name for name, solver in SOLVERS.items() if issubclass(solver, FixedGridODESolver))
GROUND_SAG = 5e-4  # resting depth g / k of a unit mass on the ground penalty, as a fraction of the body's size
MAX_GROUND_RATE = 150.0  # cap on sqrt(k) * frame time: ~30 adaptive steps a frame while touching the ground
CONTACT_STEP = 2.0  # sqrt(k) * step for fixed steps: RK4 is stable to 2.8 on the critically damped contact
SMALL_OBJECT = 0.02  # m across: failures of smaller bodies explain the size (see _size_hint)
# Right-hand side evaluations a frame before an adaptive method gives way to the planned RK4 steps: free and pinned
# bodies take 10-40, ground contact 100-400 (RK45 takes 6 a step), a 0.01 mm cloth needed more than 300.
MAX_EVALUATIONS_PER_FRAME = 1200

Progress = Callable[[float, str], None]


@dataclass
class Encoding:
    """What the network says about one mesh with one pin set; independent of the physical parameters."""

    vertices: np.ndarray  # (V, 3) float64 input vertices
    axes: np.ndarray  # (3, 3) the mesh's own axes (mesh.principal_frame), in which the network sees it
    scale: float  # diagonal of the bounding box in those axes
    queries: np.ndarray  # (N, 3) physical query positions on the surface
    centroid: np.ndarray  # area-weighted surface centroid: the centre of mass of the surface-mass model
    phi_q: torch.Tensor  # (N, 3, P) normalized basis at queries, pins corrected
    phi_v: torch.Tensor  # (V, 3, P) float32 normalized basis at vertices, pins corrected
    code: torch.Tensor
    springs: tuple[np.ndarray, np.ndarray]
    pinned: bool
    closed: bool
    area: float
    volume: float
    faces: np.ndarray  # (F, 3) int64
    pins: np.ndarray  # pinned vertex indices
    anchors: int = 0  # the last `anchors` queries are pinned vertices: held still, massless, joined by springs
    sag: dict = field(default_factory=dict)  # Poisson ratio -> the solid's static sag at the queries (_solid_sag)

    @property
    def surface_queries(self) -> np.ndarray:
        """The queries sampled on the surface (without the pinned anchors)."""
        return self.queries[:len(self.queries) - self.anchors]


@dataclass
class Plan:
    """A body ready to integrate, with what decoding needs to reproduce its kinematics at the vertices."""

    body: Body
    substeps: int  # RK4 steps per frame
    stiffness_factor: float  # scale on the spring network's nominal stiffness (_stiffness_factor)
    rigid: torch.Tensor | None  # (6, P) rigid part projected off each basis field (free bodies)
    rtol: float  # adaptive methods' relative tolerance


class Simulator:
    """Holds a loaded model and the encoding of the last mesh, so a warm worker re-simulates quickly."""

    def __init__(self, weights: str | None = None):
        self.model: NeuROK = load_model(weights)
        self.coeff = self.model.decoder.coeff
        self.locking = self.model.calibration.get("locking")
        self._cache: tuple[str, Encoding] | None = None

    @torch.no_grad()
    def simulate(self, vertices, faces, params: SimParams, progress: Progress | None = None,
                 should_cancel: Callable[[], bool] | None = None, method: str = DEFAULT_METHOD) -> np.ndarray:
        mesh = meshlib.validate(vertices, faces)
        if len(params.pins) and params.pins.max() >= len(mesh.vertices):
            raise SimulationError("pin indices do not fit this mesh")
        meshlib.check_pins(mesh, params.pins)
        progress = progress or (lambda fraction, message: None)
        progress(0.0, "encoding mesh")
        enc = self.encode(mesh, params.pins, params.gravity)
        plan = build_body(enc, params, self.coeff, self.locking)
        progress(0.05, "integrating latent dynamics")
        states = integrate(plan, params, method, progress, should_cancel)
        progress(0.95, "decoding frames")
        positions = decode_frames(enc, plan, states)
        positions[0] = mesh.vertices
        if not np.isfinite(positions).all():
            raise SimulationError("the simulation produced non-finite positions; try a stiffer material, a lower "
                                  "gravity or more drag")
        progress(1.0, "done")
        return positions

    @torch.no_grad()
    def encode(self, mesh: meshlib.Mesh, pins: np.ndarray, gravity=(0.0, 0.0, 0.0)) -> Encoding:
        axes = meshlib.principal_frame(mesh, pins, gravity)
        key = hashlib.sha1(mesh.vertices.tobytes() + mesh.faces.tobytes() + pins.tobytes() + axes.tobytes())
        if self._cache and self._cache[0] == key.hexdigest():
            return self._cache[1]
        enc = encode_mesh(self.model, mesh, pins, axes)
        self._cache = (key.hexdigest(), enc)
        return enc


def encode_mesh(model: NeuROK, mesh: meshlib.Mesh, pins: np.ndarray, axes: np.ndarray) -> Encoding:
    """What the network says about the mesh, seen in its own ``axes`` (mesh.principal_frame), so that it turns
    with the scene: physics does not depend on which way the scene faces."""
    rng = np.random.default_rng(0)  # fixed: the same mesh always gets the same samples
    own = mesh.vertices @ axes
    lo, hi = own.min(0), own.max(0)
    center, scale = (lo + hi) / 2, float(np.linalg.norm(hi - lo))
    pin_mask = np.zeros(len(mesh.vertices), np.float32)
    pin_mask[pins] = 1.0

    def normalized(x):
        return torch.as_tensor((x @ axes - center) / scale, dtype=torch.float32)[None]

    def to_world(phi):  # fields (N, 3, P) from the mesh's own axes to world axes
        return torch.einsum("ij,njp->nip", torch.as_tensor(axes, dtype=phi.dtype), phi)

    def surface(n):
        pts, face, bary = meshlib.sample_surface(mesh, n, rng)
        flags = (bary * pin_mask[mesh.faces[face]]).sum(1)
        return pts, torch.as_tensor(flags, dtype=torch.float32)[None]

    enc_pts, enc_pin = surface(ENCODER_POINTS)
    tokens, _, code = model.prior(normalized(enc_pts), enc_pin)
    queries, q_pin = surface(QUERY_POINTS)
    phi_q = to_world(model.decoder.basis(normalized(queries), q_pin, tokens)[0].double())
    vertex_pin = torch.as_tensor(pin_mask)[None]
    phi_v = torch.cat([  # float32: at ~0.8 kB a vertex it is the largest thing kept per mesh
        to_world(model.decoder.basis(normalized(mesh.vertices[i:i + VERTEX_CHUNK]),
                                     vertex_pin[:, i:i + VERTEX_CHUNK], tokens)[0])
        for i in range(0, len(mesh.vertices), VERTEX_CHUNK)])
    if len(pins):
        phi_q, phi_v = _hold_pins(mesh.vertices, pins, queries, phi_q, phi_v, scale)
    anchors = _spread(mesh.vertices[pins] @ axes, ANCHOR_POINTS) @ axes.T  # in its own axes: their order turns too
    queries = np.vstack([queries, anchors])
    phi_q = torch.cat([phi_q, phi_q.new_zeros(len(anchors), *phi_q.shape[1:])])
    closed = meshlib.is_closed(mesh)
    areas = meshlib.face_areas(mesh)
    centroid = (mesh.vertices[mesh.faces].mean(1) * areas[:, None]).sum(0) / areas.sum()
    return Encoding(vertices=mesh.vertices, axes=axes, scale=scale, queries=queries, centroid=centroid,
                    phi_q=phi_q, phi_v=phi_v,
                    code=code[0].double(), springs=_spring_graph(queries / scale, rng, closed),
                    pinned=bool(len(pins)), closed=closed, area=meshlib.total_area(mesh),
                    volume=meshlib.enclosed_volume(mesh) if closed else 0.0, faces=mesh.faces, pins=pins,
                    anchors=len(anchors))


def _spread(points: np.ndarray, count: int) -> np.ndarray:
    """Up to ``count`` distinct points among ``points``, spread over them (farthest-point sampling)."""
    # to a nanometre: coordinates that differ by round-off alone must sort alike, or the spread depends on it
    points = np.unique(np.round(points, 9), axis=0)
    if len(points) <= count:
        return points
    chosen = [0]
    distance = np.linalg.norm(points - points[0], axis=1)
    for _ in range(count - 1):
        chosen.append(int(distance.argmax()))
        distance = np.minimum(distance, np.linalg.norm(points - points[chosen[-1]], axis=1))
    return points[chosen]


def _hold_pins(vertices, pins, queries, phi_q, phi_v, scale):
    """Make every basis field vanish at pinned vertices, fading the correction out within PIN_RADIUS.

    phi'(x) = phi(x) - alpha(x) phi(p(x)), with p(x) the nearest pinned vertex and alpha(x) = exp(-(|x-p|/r)^2):
    alpha = 1 at a pinned vertex, so its displacement is exactly zero for every latent.
    """
    pinned_pos = torch.as_tensor(vertices[pins])
    pinned_phi = phi_v[pins].clone()
    r = PIN_RADIUS * scale

    def correct(points, phi):
        out = []
        for i in range(0, len(points), VERTEX_CHUNK):
            d, j = torch.cdist(torch.as_tensor(points[i:i + VERTEX_CHUNK]), pinned_pos).min(dim=1)
            alpha = torch.exp(-(d / r) ** 2).to(phi.dtype)
            out.append(phi[i:i + VERTEX_CHUNK] - alpha[:, None, None] * pinned_phi[j].to(phi.dtype))
        return torch.cat(out)

    return correct(queries, phi_q), correct(vertices, phi_v)


def _spring_graph(points: np.ndarray, rng: np.random.Generator, solid: bool) -> tuple[np.ndarray, np.ndarray]:
    """Undirected edges: each point to its NEIGHBOURS nearest (SHEET_NEIGHBOURS on open surfaces) and, for solids, a
    few longer ones so they resist bending through their interior rather than acting as hollow shells. Open surfaces
    get no long springs: a chord across a sheet shortens when the sheet bends, which would make cloth stiff as a
    board."""
    d = np.linalg.norm(points[:, None] - points[None], axis=-1)
    np.fill_diagonal(d, np.inf)
    count = NEIGHBOURS if solid else SHEET_NEIGHBOURS
    near = np.argsort(d, axis=1)[:, :count]
    i = np.repeat(np.arange(len(points)), count)
    j = near.reshape(-1)
    far_i, far_j = [], []
    for a in range(len(points) if solid else 0):
        band = np.nonzero((d[a] > 0.1) & (d[a] < 0.4))[0]
        if len(band):
            far_j.append(rng.choice(band, size=min(3, len(band)), replace=False))
            far_i.append(np.full(len(far_j[-1]), a))
    if far_i:
        i, j = np.concatenate([i, *far_i]), np.concatenate([j, *far_j])
    edges = np.unique(np.sort(np.stack([i, j], 1), axis=1), axis=0)
    edges = edges[d[edges[:, 0], edges[:, 1]] > 0]  # a pinned vertex may coincide with a sample: no direction
    return edges[:, 0], edges[:, 1]


@torch.no_grad()
def build_body(enc: Encoding, p: SimParams, coeff: CoefficientMLP, locking: dict | None = None) -> Plan:
    """Physical body for the parameters, its reduced latent basis and the RK4 substeps per frame; ``coeff`` is the
    decoder's coefficient MLP and ``locking`` the weights' stiffness correction for solids (None: none)."""
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
        rigid = torch.linalg.lstsq(w * fields, w * phi.reshape(3 * n, -1)).solution  # mass-weighted projection
        phi = phi.reshape(3 * n, -1) - fields @ rigid
    phi = phi.reshape(3 * n, -1)
    si, sj = (torch.as_tensor(a) for a in enc.springs)
    d = rest[sj] - rest[si]
    length = d.norm(dim=1)
    # Uniform strain e along a random direction stores sum k L^2 e^2 / 10 in the springs (mean cos^4 = 1/5);
    # equating it with the continuum's E e^2 V / 2 gives the spring constant for Young's modulus E.
    k_spring = 5.0 * p.stiffness * volume / float((length**2).sum())
    code = enc.code
    dt = 1.0 / p.fps
    U, omega, shapes = _reduced_basis(coeff, code, phi, mass, d / length[:, None], si, sj, k_spring)
    factor = _stiffness_factor(enc, p, rest, mass, shapes, omega, locking)
    k_spring, omega = k_spring * factor, omega * math.sqrt(factor)  # the mode shapes do not depend on a scale of K
    # Mass scaling: modes faster than the frame rate can show get extra inertia that slows them to about omega_cut.
    # Static deflection (which depends only on stiffness) is kept exactly; only unseeable high-frequency ringing is
    # slowed, and the steps stay affordable. A solid, which deforms little, gets modal mass at rest that slows
    # exactly the modes above omega_cut. A sheet's large swing runs through latent directions that are stiff modes
    # at rest, and that constant modal mass held it back; a sheet gets inertia k / omega_cut^2 on each spring's rate
    # of change of length instead, which slows a mode as omega / sqrt(1 + (omega / omega_cut)^2) in any
    # configuration and leaves motion that stretches no spring alone. Measured on v2's pinned cloth and cut-outs
    # (rollout over 2 s, mean error in diagonals, seq 0-74 / 75-157): modal mass 0.110 / 0.118, stretch inertia
    # 0.092 / 0.090. On solids the stretch inertia slowed their slower modes too and fit the reference worse (19
    # of the first 24 pinned or grounded ones, 4 better).
    omega_cut = MODE_CUT / dt
    if enc.closed:
        added_mass, stretch_inertia = ((omega / omega_cut) ** 2 - 1.0).clamp_min(0.0), None
        omega_max = min(float(omega.max()), omega_cut)
    else:
        added_mass, stretch_inertia = torch.zeros_like(omega), 1.0 / omega_cut**2
        omega_max = float((omega / (1.0 + (omega / omega_cut) ** 2).sqrt()).max())
    colliders = make_colliders(p.colliders) + (() if p.ground is None else (contact.ground(p.ground),))
    ground_omega = 2.0 * omega_cut if colliders else 0.0
    rate = max(omega_max, p.drag, ground_omega, p.damping * omega_max**2)
    substeps = int(min(MAX_SUBSTEPS, max(1, math.ceil(rate * dt / STABLE_STEP))))
    step = dt / substeps
    # Stiffness-proportional damping of the fastest kept mode is capped at what an explicit step can resolve.
    damping = min(p.damping, STABLE_STEP / max(omega_max**2 * step, 1e-12))
    contact_k = (0.5 / step) ** 2
    if colliders:
        # the steady push a contact holds: gravity and the wind at full strength
        push = float(np.linalg.norm(p.gravity)) + sum(float(np.linalg.norm(w["acceleration"])) for w in p.wind)
        contact_k = _ground_stiffness(contact_k, float(rest.norm(dim=1).max()), push, dt)
        # Fixed-step methods (and the RK4 fallback) need steps short enough for the contact as well.
        substeps = max(substeps, math.ceil(math.sqrt(contact_k) * dt / CONTACT_STEP))
    body = Body(rest=rest, center=com, phi=phi, latent=LatentMap(coeff, code, U), added_mass=added_mass, mass=mass,
                spring_i=si, spring_j=sj, spring_rest=length, spring_k=torch.full_like(length, k_spring),
                damping=damping, drag=p.drag, gravity=torch.as_tensor(p.gravity, dtype=DTYPE), colliders=colliders,
                contact_k=contact_k, free=not enc.pinned, compression=1.0 if enc.closed else SHEET_COMPRESSION,
                stretch_inertia=stretch_inertia,
                frame=None if p.frame_motion is None else FrameMotion(p.frame_motion, p.fps), wind=make_wind(p.wind))
    return Plan(body, substeps, factor, rigid, RTOL if enc.closed else SHEET_RTOL)


def _ground_stiffness(base: float, size: float, gravity: float, dt: float) -> float:
    """Ground penalty stiffness per unit mass (1/s^2) for a body of ``size`` m: at least ``base``, and enough that a
    unit mass rests at most GROUND_SAG x size deep, up to (MAX_GROUND_RATE / dt)^2.

    A stiffness that ignores size sinks every body by the same g / k: ~1.4 mm at 24 fps, nothing for a 1 m box but
    twice the size of a millimetre one. A body rests deeper than g / k when only part of its mass touches (a
    face-down box by ~10x, a sphere more, on its small contact cap); GROUND_SAG keeps both at a few percent of their
    size (measured from 5 mm to 0.5 m: a box ~0.5% of its edge, a coarse sphere ~4% of its diameter). While touching,
    sqrt(k) sets the adaptive step, so it is capped to stay well within MAX_EVALUATIONS_PER_FRAME; only bodies under
    ~3 mm across (at 24 fps) get the capped, softer contact.
    """
    k = max(base, gravity / (GROUND_SAG * max(size, 1e-12)))
    return min(k, max(base, (MAX_GROUND_RATE / dt) ** 2))


def _stiffness_factor(enc: Encoding, p: SimParams, rest: torch.Tensor, mass: torch.Tensor, shapes: torch.Tensor,
                      omega: torch.Tensor, locking: dict | None) -> float:
    """Scale on the spring network's stiffness (calibrated to Young's modulus for uniform strain) for this body.

    Solids: the network resists bending through its stiffest fibres, and the decoder's bending deformations carry a
    little spurious axial strain, by amounts that depend on the shape (at full stiffness a slender cantilever sagged
    ~2% of Euler-Bernoulli, base-pinned blocks 20-40% of the reference's lean). A pinned solid is matched to the
    continuum itself (_continuum_factor); a free one, which has no static equilibrium to match, takes the weights'
    slenderness law, fitted to the continuum factors of pinned beams and blocks (_locking_factor,
    model_runtime.lab.calibrate), and so does a pinned one too thin for the continuum's lattice.

    Open surfaces: a cloth's real strain under its own weight is ~0.1%, while the decoder is isometric only to a few
    percent; at full membrane stiffness a pinned cotton sheet stayed flat. As with under-integrated shell elements,
    the membrane is softened until the nominal self-weight strain reaches MEMBRANE_STRAIN, so that the decoder's
    bending deformations, which stretch a little, are not held back by stiffness the sheet does not show.
    """
    if not enc.closed:
        return min(1.0, p.density * STANDARD_GRAVITY * enc.scale / (MEMBRANE_STRAIN * p.stiffness))
    if enc.pinned and (solid := _solid_sag(enc, p.poisson, float(mass.sum()))) is not None:
        return _continuum_factor(p, mass, shapes, omega, solid)
    return _locking_factor(rest, p.gravity, locking) if locking is not None else 1.0


def _continuum_factor(p: SimParams, mass: torch.Tensor, shapes: torch.Tensor, omega: torch.Tensor,
                      solid: np.ndarray) -> float:
    """The ratio of the linearized body's compliance under its own weight, g^T C g, to that of the same solid in
    linear elasticity (``solid``, from _solid_sag), both weighted by the query points' masses: the scale that gives
    the body the continuum's mean sag along gravity (without gravity, the mean over directions)."""
    g = np.asarray(p.gravity, float)
    loads = g / np.linalg.norm(g) if g @ g > 0 else np.eye(3)
    model = np.einsum("ab,...a,...b", _compliance(mass, shapes, omega), loads, loads)
    continuum = np.einsum("iab,i,...a,...b", solid, mass.numpy(), loads, loads) / p.stiffness
    return float(np.clip(model.sum() / continuum.sum(), MIN_STIFFNESS_FACTOR, MAX_STIFFNESS_FACTOR))


def _locking_factor(rest: torch.Tensor, gravity, locking: dict) -> float:
    """min(1, c s2^p)^w: s2 the squared thickness over the length (bending_shape) and w = sin^2 of the angle between
    the length and gravity, blended towards 1 as the body gets stubby (w + (1 - w) s2), where its length has no
    direction. A free body bends across its length and is compressed along it, and compression does not lock
    (uncorrected, columns under their own weight shortened within 2x of rho g h^2 / 2E)."""
    s2, axis = bending_shape(rest)
    g = torch.as_tensor(gravity, dtype=DTYPE)
    transverse = 1.0 - float((axis @ g) ** 2 / (g @ g)) if float(g @ g) > 0 else 1.0
    law = min(1.0, locking["coefficient"] * s2 ** locking["exponent"])
    return law ** (transverse + (1.0 - transverse) * s2)


def _compliance(mass: torch.Tensor, shapes: torch.Tensor, omega: torch.Tensor) -> np.ndarray:
    """(3, 3) static compliance of the linearized body: C[a, b] = sum_i m_i u_b(x_i)[a], u_b its sag under a unit
    body force along b; ``shapes`` (3N, r) are its M-orthonormal modes at the points, ``omega`` their frequencies."""
    force = torch.einsum("i,ibr->rb", mass, shapes.view(len(mass), 3, -1))  # modal force, (r, 3)
    w2 = omega**2
    kept = w2 > 1e-12 * w2.max().clamp_min(1e-300)  # directions the springs do not resist carry no static load
    return (force[kept].T @ (force[kept] / w2[kept, None])).numpy()


def _solid_sag(enc: Encoding, poisson: float, total: float) -> np.ndarray | None:
    """statics.self_weight_sag of the encoded solid at its query points, for a body of ``total`` kg at E = 1 Pa;
    None when the lattice cannot represent the body. Cached per Poisson ratio: the sag is proportional to the mass,
    so it is solved once at 1 kg."""
    if poisson not in enc.sag:
        try:
            # in the mesh's own axes, whose lattice turns with it, then back to world axes
            own = statics.self_weight_sag(meshlib.Mesh(enc.vertices @ enc.axes, enc.faces), enc.pins, poisson,
                                          enc.queries @ enc.axes, 1.0)
            enc.sag[poisson] = np.einsum("ia,pab,jb->pij", enc.axes, own, enc.axes)
        except MeshError:
            enc.sag[poisson] = None
    sag = enc.sag[poisson]
    return None if sag is None else sag * total


def bending_shape(points: torch.Tensor) -> tuple[float, torch.Tensor]:
    """(thickness / length)^2 of a body as the ratio of its smallest to largest principal variance, and its long
    axis."""
    centred = points - points.mean(0)
    variances, axes = torch.linalg.eigh(centred.T @ centred / len(points))
    return float(variances[0] / variances[-1]), axes[:, -1]


def _point_masses(points: torch.Tensor, centroid: torch.Tensor, total: float) -> torch.Tensor:
    """Near-equal masses on area-uniform samples, nudged linearly so their centre of mass is the surface's exact
    centroid (a few hundred random samples miss it by ~1% of the size, enough to wobble a spinning body)."""
    n = len(points)
    offset = points - points.mean(0)
    lam = torch.linalg.pinv(offset.T @ offset / n) @ (centroid - points.mean(0))
    weights = (1.0 + offset @ lam).clamp_min(0.25)
    return total * weights / weights.sum()


def _rigid_fields(points: torch.Tensor) -> torch.Tensor:
    """(3N, 6) velocity fields of rigid translation and rotation about the origin at the given points.

    Free bodies project these off every basis field (the mean-axis frame condition): deformation then carries no
    linear or angular momentum at first order, so rigid and latent coordinates stay independent and the mass
    matrix well conditioned.
    """
    n = len(points)
    return torch.cat([torch.eye(3, dtype=DTYPE).expand(n, 3, 3), -skew(points)], dim=2).reshape(3 * n, 6)


def _reduced_basis(coeff, code, phi, mass, directions, si, sj, k_spring):
    """Reduced latent basis U (k, r) in vibration modes of the linearized body, their frequencies (rad/s) and their
    shapes at the points (3N, r).

    Directions of z that barely move the decoded shape are dropped (the mass matrix is singular along them): the
    active subspace of the decoder at rest. The rest are split into modes K v = omega^2 M v; U's columns are
    M-orthonormal, so q are modal coordinates at rest.
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
        raise SimulationError("the model sees no way for this mesh to deform (its latent space is degenerate)")
    B = vec[:, active] / lam[active].sqrt()
    n = len(mass)
    Jb = (J @ B).view(n, 3, -1)
    stretch = (directions[:, :, None] * (Jb[sj] - Jb[si])).sum(1)  # (E, a): spring length change per coordinate
    K = k_spring * stretch.T @ stretch
    w2, modes = torch.linalg.eigh(K)
    return B @ modes, w2.clamp_min(0.0).sqrt(), Jb.view(3 * n, -1) @ modes


@torch.no_grad()
def integrate(plan: Plan, p: SimParams, method: str, progress: Progress,
              should_cancel: Callable[[], bool] | None) -> torch.Tensor:
    """States at every frame time (frames+1, state size), integrated in chunks so progress works.

    ``method``: a torchdiffeq method (dopri5, rk4...) or one of SCIPY_METHODS, which torchdiffeq runs through
    scipy. Cancel is checked between chunks and, through Dynamics, within them; Cancelled passes through every
    fallback.
    """
    body, substeps = plan.body, plan.substeps
    dyn = Dynamics(body, should_cancel)
    y0 = _initial_state(dyn, p)
    dt = 1.0 / p.fps
    atol = ATOL * _state_scale(body)

    def solve(y, t, method, rtol=plan.rtol, atol=atol):
        if method in FIXED_STEP_METHODS:
            return odeint(dyn, y, t, method=method, options={"step_size": dt / substeps})[1:]
        dyn.budget = dyn.evaluations + MAX_EVALUATIONS_PER_FRAME * (len(t) - 1)
        try:
            if method not in SCIPY_METHODS:
                return odeint(dyn, y, t, method=method, rtol=rtol, atol=atol)[1:]
            with warnings.catch_warnings():  # torchdiffeq passes min_step, which only LSODA takes, to every solver
                warnings.filterwarnings("ignore", "The following arguments have no effect", UserWarning)
                ys = odeint(dyn, y, t, method="scipy_solver", rtol=rtol, atol=atol,
                            options={"solver": SCIPY_METHODS[method]})[1:]
            if len(ys) != len(t) - 1:  # scipy stopped early (a step size underflow); torchdiffeq passes it on
                raise AssertionError(f"{method} stopped after {len(ys)} of {len(t) - 1} frames")
            return ys
        finally:
            dyn.budget = None

    chunk = max(1, min(24, p.frames // 10 or 1))
    states = [y0]
    limit = 10.0 * body.size + 1e-9
    threads = torch.get_num_threads()
    # The ODE is hundreds of tiny ops per step: threading only adds synchronization (3-10x slower measured).
    torch.set_num_threads(1)
    try:
        for start in range(0, p.frames, chunk):
            if should_cancel and should_cancel():
                raise Cancelled("simulation cancelled")
            stop = min(p.frames, start + chunk)
            t = torch.arange(start, stop + 1, dtype=DTYPE) * dt
            try:
                try:
                    ys = solve(states[-1], t, method)
                except BudgetSpent:  # far stiffer than the plan expected
                    # Bounded fallback (never an endless run that cannot even be cancelled): the planned RK4 steps.
                    ys = solve(states[-1], t, "rk4")
                if not _sane(body, ys, limit) and method in FIXED_STEP_METHODS:
                    # Large deformations stiffen the body beyond the rest-state estimate the step was chosen for:
                    # redo this chunk with error-controlled steps rather than give up.
                    ys = solve(states[-1], t, DEFAULT_METHOD, rtol=0.1 * plan.rtol, atol=0.1 * atol)
            # A singular mass matrix, a step size underflow (torchdiffeq asserts), a spent budget.
            except (np.linalg.LinAlgError, AssertionError, BudgetSpent) as exc:
                raise SimulationError(f"the simulation broke down between frames {start} and {stop} (the body "
                                      "deformed past what the model can represent); try a stiffer material, more "
                                      "damping or drag, or a smaller gravity" + _size_hint(body)) from exc
            if not _sane(body, ys, limit):
                raise SimulationError(f"the simulation diverged between frames {start} and {stop}; try a softer "
                                      "material, more damping or drag, or a smaller gravity" + _size_hint(body))
            states.extend(ys)
            progress(0.05 + 0.9 * stop / p.frames, f"frame {stop}/{p.frames}")
    finally:
        torch.set_num_threads(threads)
    return torch.stack(states)


def _size_hint(body: Body) -> str:
    """What to tell the user when a small object fails. In the fuzz of valid input (seed 0, cases 0-425), 19 of the
    25 failures were bodies under 2 cm across (a 0.2 mm sheet swings on its pins with a period of ~20 ms, faster
    than any frame rate); the likely cause is a scene modelled in the wrong unit, not a wish to simulate a crumb."""
    across = 2.0 * body.size
    if across >= SMALL_OBJECT:
        return ""
    return (f". The object is only {across * 1000:.2g} mm across: NeuROK works in real units (1 unit = 1 m), and "
            "at this size it moves faster than the frames can follow; scale the object up if it is meant to be "
            "larger, or raise the frame rate")


def _state_scale(body: Body) -> float:
    """Factor on ATOL for small or light bodies, whose state is tiny in SI units.

    Modal coordinates are sqrt(kg) m: a 0.1 mm cloth has q ~ 1e-10, far below ATOL, so an absolute tolerance would
    accept any step and the run diverged (measured). The tolerance follows sqrt(mass) * size below 0.1 sqrt(kg) m;
    bodies above that (every ~1 m test scene) keep ATOL unchanged.
    """
    return min(1.0, math.sqrt(float(body.mass.sum())) * body.size / 0.1, body.size)


def _sane(body: Body, ys: torch.Tensor, limit: float) -> bool:
    """Finite, and no deformation larger than `limit` metres (a diverging run grows without bound)."""
    if not torch.isfinite(ys).all():
        return False
    _, _, q, _, _, _ = State(body).split(ys[-1])
    a = body.latent(q)
    return float((body.phi @ a).abs().max()) <= limit


def _initial_state(dyn: Dynamics, p: SimParams) -> torch.Tensor:
    """Rest configuration with the requested linear and angular velocity (least squares onto the coordinates)."""
    body = dyn.body
    r = body.n_latent
    pos = torch.cat([torch.zeros(3, dtype=DTYPE), torch.tensor([1.0, 0, 0, 0], dtype=DTYPE), torch.zeros(r,
                     dtype=DTYPE)]) if body.free else torch.zeros(r, dtype=DTYPE)
    y = torch.cat([pos, torch.zeros(len(pos) - (1 if body.free else 0), dtype=DTYPE)])
    v0 = torch.as_tensor(p.initial_velocity, dtype=DTYPE)
    w0 = torch.as_tensor(p.angular_velocity, dtype=DTYPE)
    if not (v0.any() or w0.any()):
        return y
    x, _, A, _ = dyn.kinematics(y)
    target = v0 + torch.linalg.cross(w0.expand_as(x), x - body.center)
    m3 = body.mass.repeat_interleave(3)[:, None]
    u = torch.linalg.solve(A.T @ (m3 * A), A.T @ (m3[:, 0] * target.reshape(-1)))
    # A mode slowed by mass scaling (added modal mass a, so it runs at omega / sqrt(1 + a)) would turn its velocity
    # into an amplitude sqrt(1 + a) times too large, and 1 + a times the energy: a stiff pinned body thrown at 1 m/s
    # swung 10x further than the reference (v2 seq 20). Scaling its velocity by 1 / sqrt(1 + a) keeps both. At rest
    # the modal coordinates are M-orthonormal and the added inertia is diagonal in them (a stretch inertia too: it
    # and the stiffness are both J_L^T J_L times a constant), so 1 + a is the mass matrix's diagonal.
    if r:
        u[-r:] = u[-r:] / torch.from_numpy(np.diag(dyn.latent_mass(np.zeros(r))).copy()).sqrt()
    y[len(pos):] = u
    return y


@torch.no_grad()
def decode_frames(enc: Encoding, plan: Plan, states: torch.Tensor) -> np.ndarray:
    """Vertex positions (T, V, 3) float32 for every integrated state: x = c + t + R (X - c + Phi_v a).

    Vertices are decoded in chunks so that memory beyond the output itself stays bounded for any mesh size.
    """
    body = plan.body
    st = State(body)
    T, V = len(states), len(enc.vertices)
    parts = [st.split(y) for y in states]
    A = body.latent(torch.stack([q for _, _, q, _, _, _ in parts]))
    if body.free:
        R = torch.from_numpy(np.stack([quat_to_matrix(quat.numpy()) for _, quat, *_ in parts]))
        shift = body.center + torch.stack([t for t, *_ in parts])
    else:
        R, shift = torch.eye(3, dtype=DTYPE).expand(T, 3, 3), body.center.expand(T, 3)
    out = np.empty((T, V, 3), np.float32)
    for v0 in range(0, V, VERTEX_CHUNK):
        rest = torch.as_tensor(enc.vertices[v0:v0 + VERTEX_CHUNK], dtype=DTYPE) - body.center
        phi = enc.phi_v[v0:v0 + VERTEX_CHUNK].to(DTYPE).reshape(-1, A.shape[1]) * enc.scale
        if plan.rigid is not None:
            phi = phi - _rigid_fields(rest) @ plan.rigid
        y_body = rest + (A @ phi.T).reshape(T, -1, 3)
        out[:, v0:v0 + VERTEX_CHUNK] = (torch.einsum("tvj,tij->tvi", y_body, R) + shift[:, None]).numpy()
    return out


def simulate(vertices, faces, *, weights: str | None = None, method: str = DEFAULT_METHOD,
             progress: Progress | None = None, should_cancel: Callable[[], bool] | None = None,
             **physics) -> np.ndarray:
    """One-shot simulation (loads the model each call; the worker keeps a Simulator instead)."""
    params = make_params(num_vertices=len(np.asarray(vertices)), **physics)
    return Simulator(weights).simulate(vertices, faces, params, progress, should_cancel, method)

