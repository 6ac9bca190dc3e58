"""Free solids (no pins): the continuum's own dynamics in a floating frame.

The lattice's nodes move as x = c + R (Y0 + U q): c the centre of mass, R a rotation, Y0 the nodes at rest about
their centre of mass and U the deforming subspace the pinned path builds (continuum_solid: lowest vibration modes,
now free-free, and their modal derivatives, with the six rigid motions taken off M-orthogonally). U then moves no
mass's centre, so c is exactly the centre of mass, and carries no angular momentum at first order (the mean-axis
frame).

The step is the variational midpoint integrator of this Lagrangian (Marsden and West 2001): the kinetic energy of
the nodes' chords, sum m |x_{k+1} - x_k|^2 / 2h^2, and the potential at the coordinates' midpoint, the cubature's
elastic energy and the colliders' penalty. Its discrete Euler-Lagrange equations give free flight and spin exactly,
conserve linear and angular momentum (to Newton's tolerance) without external forces, keep the energy bounded
without drift, and are implicit in the elastic force, so no stiff mode sets the step. Drag, Rayleigh damping and
the contacts' friction enter by the discrete Lagrange-d'Alembert principle, half at each end of a step. The mass
moments the chords need are summed over the nodes once (``Inertia``), so a step costs what the pinned path's does.
"""

import math
from collections.abc import Callable

import numpy as np
from scipy.spatial.transform import Rotation

from .contact import CONTACT_STIFFNESS, Collider, implicit_viscosity
from .continuum_solid import (
    CHORD_ITERATIONS,
    MAX_NEWTON,
    STEP_RATE,
    Progress,
    ReducedElasticity,
    Subspace,
    _Stiffness,
    build_subspace,
    contact_masses,
)
from .errors import Cancelled, SimulationError
from .frame_motion import FrameMotion
from .mesh import Mesh, is_closed
from .params import SimParams
from .tets import node_masses
from .wind import make_wind


def applies(mesh: Mesh, params: SimParams) -> bool:
    """Whether this path simulates the body: a closed solid without pins."""
    return is_closed(mesh) and len(params.pins) == 0


def build(mesh: Mesh, params: SimParams, progress: Progress | None = None,
          should_cancel: Callable[[], bool] | None = None) -> Subspace:
    """The free solid's lattice, deforming subspace and cubature (continuum_solid.build_subspace, nothing held)."""
    return build_subspace(mesh, params.pins, params.poisson, progress=progress, should_cancel=should_cancel)


def _axial(W: np.ndarray) -> np.ndarray:
    """sum a x b for W = sum a b^T (3, 3, ...): the cross product's sum from the outer products' sum."""
    return np.stack([W[1, 2] - W[2, 1], W[2, 0] - W[0, 2], W[0, 1] - W[1, 0]])


def _skew(v: np.ndarray) -> np.ndarray:
    """[v]_x for vectors v (..., 3): [v]_x y = v x y."""
    out = np.zeros(v.shape[:-1] + (3, 3))
    out[..., 0, 1], out[..., 0, 2], out[..., 1, 2] = -v[..., 2], v[..., 1], -v[..., 0]
    return out - np.swapaxes(out, -1, -2)


def centre_of_mass(sub: Subspace) -> np.ndarray:
    """The lattice's centre of mass at rest (3,), the same at any uniform density."""
    m = node_masses(sub.body.node_volume, 1.0)
    return (m[:, None] * sub.body.nodes.astype(np.float64)).sum(0) / m.sum()


class Inertia:
    """The nodes' mass moments about their centre of mass, with Y(q) = Y0 + U q the nodes in the body frame:
    total mass, A0 = sum m Y0 Y0^T (3, 3), A1[a, b, r] = sum m Y0_a U_br and A2[a, b, r, s] = sum m U_ar U_bs, from
    which every kinetic term below is exact at any q without a sum over the nodes."""

    def __init__(self, sub: Subspace, density: float):
        m = node_masses(sub.body.node_volume, density)
        x0 = sub.body.nodes.astype(np.float64)
        self.total = float(m.sum())
        self.centre = centre_of_mass(sub)
        Y0, U = x0 - self.centre, sub.basis.reshape(len(m), 3, -1)
        self.A0 = np.einsum("n,na,nb->ab", m, Y0, Y0)
        self.A1 = np.einsum("n,na,nbr->abr", m, Y0, U)
        mU = m[:, None, None] * U
        self.A2 = np.einsum("nar,nbs->abrs", mU, U)
        self.density, self.r = density, U.shape[2]

    def outer(self, q1: np.ndarray, q2: np.ndarray) -> np.ndarray:
        """sum m Y(q1) Y(q2)^T (3, 3)."""
        return self.A0 + self.A1 @ q2 + (self.A1 @ q1).T + np.einsum("abrs,r,s->ab", self.A2, q1, q2)

    def along(self, q: np.ndarray) -> np.ndarray:
        """T[a, b, r] = sum m U_ar Y(q)_b (3, 3, r)."""
        return self.A1.transpose(1, 0, 2) + self.A2 @ q

    def chords(self, R0, q0, R1, q1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The nodes' momentum chord sum m (x1 - x0), less the centre's, seen by each end's coordinates: its angular
        part (3,) (world axes; the same at both ends), and its elastic parts U^T R0^T M (x1 - x0) and
        U^T R1^T M (x1 - x0) (r,)."""
        turn = R0.T @ R1
        angular = R0 @ _axial(self.outer(q0, q1) @ turn.T)
        T0, T1 = self.along(q0), self.along(q1)
        trace0, trace1 = np.einsum("aar->r", T0), np.einsum("aar->r", T1)
        return (angular, np.einsum("ab,abr->r", turn, T1) - trace0, trace1 - np.einsum("ba,abr->r", turn, T0))

    def mass_matrix(self, R: np.ndarray, q: np.ndarray) -> np.ndarray:
        """The generalized mass (6 + r, 6 + r) in (centre, world rotation, q) at the configuration (R, q)."""
        C = self.outer(q, q)
        coupling = R @ _axial(self.along(q).transpose(1, 0, 2))  # sum m (R Y) x (R U_r), (3, r)
        M = np.zeros((6 + self.r, 6 + self.r))
        M[:3, :3] = self.total * np.eye(3)
        M[3:6, 3:6] = R @ (np.trace(C) * np.eye(3) - C) @ R.T
        M[3:6, 6:], M[6:, 3:6] = coupling, coupling.T
        M[6:, 6:] = self.density * np.eye(self.r)
        return M


class FrameContact:
    """The pinned path's penalty contact (continuum_solid.Contact's law and contact masses) on the surface's vertices
    in world space, x = c + R (X + B q), as generalized forces on (centre, world rotation, q)."""

    def __init__(self, sub: Subspace, mesh: Mesh, centre: np.ndarray, colliders: tuple[Collider, ...],
                 density: float):
        mass = contact_masses(sub, mesh, np.zeros(0, np.int64), density)
        keep = mass > 0.0
        self.X, self.B, self.m = mesh.vertices[keep] - centre, sub.vertex_basis[keep], mass[keep]
        self.colliders = colliders

    def _touching(self, c, R, q):
        """(indices, depths, normals, Jacobians (T, 3, 6 + r) of the touching vertices' world positions)."""
        x = c + (self.X + self.B @ q) @ R.T
        for collider in self.colliders:
            depth, normal = collider.penetration(x)
            idx = np.flatnonzero(depth > 0.0)
            if len(idx):
                J = np.concatenate([np.broadcast_to(np.eye(3), (len(idx), 3, 3)), -_skew(x[idx] - c),
                                    np.einsum("ab,tbr->tar", R, self.B[idx])], axis=2)
                yield idx, depth[idx], normal[idx], J

    def force_stiffness(self, c, R, q) -> tuple[np.ndarray, np.ndarray]:
        """The generalized contact force (6 + r,) and its Gauss-Newton stiffness (6 + r, 6 + r)."""
        n = 6 + len(q)
        Q, H = np.zeros(n), np.zeros((n, n))
        for idx, depth, normal, J in self._touching(c, R, q):
            w = CONTACT_STIFFNESS * self.m[idx]
            Jn = np.einsum("tdr,td->tr", J, normal)
            Q += (w * depth) @ Jn
            H += Jn.T @ (w[:, None] * Jn)
        return Q, H

    def viscosity(self, c, R, q, u) -> np.ndarray:
        """The contacts' generalized viscosity (6 + r, 6 + r) at generalized velocity u: friction along the surface,
        critical damping of the penalty along the normal (contact.implicit_viscosity)."""
        D = np.zeros((len(u), len(u)))
        for idx, depth, normal, J in self._touching(c, R, q):
            Jn = np.einsum("tdr,td->tr", J, normal)
            along = J - normal[:, :, None] * Jn[:, None, :]
            friction, normal_damping = implicit_viscosity(self.m[idx], depth, np.linalg.norm(along @ u, axis=1))
            D += np.einsum("t,tdr,tds->rs", friction, along, along) + Jn.T @ (normal_damping[:, None] * Jn)
        return D


def simulate(sub: Subspace, mesh: Mesh, params: SimParams, progress: Progress | None = None,
             should_cancel: Callable[[], bool] | None = None, colliders: tuple[Collider, ...] = ()) -> np.ndarray:
    """Vertex positions (frames + 1, V, 3) float32 from rest, with ``colliders`` in the mesh's coordinates."""
    return positions(sub, mesh, params.pins, integrate(sub, params, progress, should_cancel, colliders, mesh)[0])


def _split(state: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(centre (3,), rotation (3, 3), q (r,)) of a frame's row (12 + r,)."""
    return state[:3], state[3:12].reshape(3, 3), state[12:]


def positions(sub: Subspace, mesh: Mesh, pins: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Vertex positions (T, V, 3) float32 of the frames' states X (T, 12 + r): centre, rotation, q."""
    centre = centre_of_mass(sub)
    body = mesh.vertices[None] - centre + np.einsum("vdr,tr->tvd", sub.vertex_basis, X[:, 12:])
    out = (X[:, None, :3] + np.einsum("tvb,tab->tva", body, X[:, 3:12].reshape(-1, 3, 3))).astype(np.float32)
    if not np.isfinite(out).all():
        raise SimulationError("the simulation produced non-finite positions; try a stiffer material, a lower "
                              "gravity or more drag")
    return out


def energies(sub: Subspace, params: SimParams, X: np.ndarray, P: np.ndarray) -> dict[str, np.ndarray]:
    """Kinetic (from the discrete momenta P (T, 6 + r)), elastic (the cubature's) and gravitational energy (J)."""
    inertia, elastic = Inertia(sub, params.density), ReducedElasticity(sub, params)
    kinetic = []
    for state, p in zip(X, P):
        _, R, q = _split(state)
        kinetic.append(0.5 * p @ np.linalg.solve(inertia.mass_matrix(R, q), p))
    return {"kinetic": np.array(kinetic), "elastic": np.array([elastic.energy_and_force(s[12:])[0] for s in X]),
            "gravitational": -inertia.total * (X[:, :3] - X[0, :3]) @ np.asarray(params.gravity, np.float64)}


def integrate(sub: Subspace, params: SimParams, progress: Progress | None = None,
              should_cancel: Callable[[], bool] | None = None, colliders: tuple[Collider, ...] = (),
              mesh: Mesh | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The states (frames + 1, 12 + r: centre, rotation, q) and discrete momenta (frames + 1, 6 + r) at every frame
    from rest, STEP_RATE steps per simulated second at least; ``colliders`` act on ``mesh``'s vertices."""
    p = params
    inertia = Inertia(sub, p.density)
    elastic = ReducedElasticity(sub, p)
    stiffness = _Stiffness(elastic)
    contact = FrameContact(sub, mesh, inertia.centre, colliders, p.density) if colliders else None
    forces = _Push(sub, inertia, p)
    steps = max(1, math.ceil(STEP_RATE / p.fps - 1e-9))
    h = 1.0 / (p.fps * steps)
    c, R, q = inertia.centre.copy(), np.eye(3), np.zeros(sub.dims)
    # momentum of the velocity field v + w x (x - centre), the deforming part M-orthogonal to it
    momentum = np.concatenate([inertia.total * np.asarray(p.initial_velocity, np.float64),
                               inertia.mass_matrix(R, q)[3:6, 3:6] @ np.asarray(p.angular_velocity, np.float64),
                               np.zeros(sub.dims)])
    states, momenta = [np.concatenate([c, R.ravel(), q])], [momentum]
    for frame_index in range(p.frames):
        if should_cancel is not None and should_cancel():
            raise Cancelled("simulation cancelled")
        for k in range(steps):
            t = (frame_index * steps + k) * h
            c, R, q, momentum = _step(inertia, elastic, stiffness, contact, p, forces, t, c, R, q, momentum, h)
        states.append(np.concatenate([c, R.ravel(), q]))
        momenta.append(momentum)
        if progress is not None:
            progress((frame_index + 1) / p.frames, f"frame {frame_index + 1} of {p.frames}")
    return np.stack(states), np.stack(momenta)


class _Push:
    """The generalized external force of gravity, wind and an animated object's inertial forces (explicit at a
    step's start): uniform gravity moves only the centre; the rest is summed over the nodes."""

    def __init__(self, sub: Subspace, inertia: Inertia, p: SimParams):
        self.wind = make_wind(p.wind)
        self.frame = None if p.frame_motion is None else FrameMotion(p.frame_motion, p.fps)
        self.gravity = np.asarray(p.gravity, np.float64)
        self.m = node_masses(sub.body.node_volume, p.density)
        self.Y0 = sub.body.nodes.astype(np.float64) - inertia.centre
        self.U = sub.basis.reshape(len(self.m), 3, -1)
        self.steady = np.concatenate([inertia.total * self.gravity, np.zeros(3 + sub.dims)])

    def __call__(self, t: float, c, R, q, u) -> np.ndarray:
        if self.wind is None and self.frame is None:
            return self.steady
        y = self.Y0 + self.U @ q
        x = c + y @ R.T
        xd = u[:3] + np.cross(u[3:6], x - c) + (self.U @ u[6:]) @ R.T
        a = np.broadcast_to(self.gravity, x.shape) if self.wind is None else self.gravity + self.wind.acceleration(t, x)
        if self.frame is not None:
            felt, turn = self.frame.acceleration(t, x, xd)
            a = a @ turn - felt
        f = self.m[:, None] * a
        return np.concatenate([f.sum(0), np.cross(x - c, f).sum(0), np.einsum("ndr,nd->r", self.U, f @ R)])


def _turn(theta: np.ndarray) -> np.ndarray:
    return Rotation.from_rotvec(theta).as_matrix()


def _step(inertia: Inertia, elastic: ReducedElasticity, stiffness: _Stiffness, contact: FrameContact | None,
          p: SimParams, push: _Push, t: float, c, R, q, momentum, h):
    """One variational midpoint step from (c, R, q) with discrete momentum ``momentum``: the step
    D = (dc, theta, dq), with R' = exp(theta) R, solves

        (1 + c_d h/2) J^T M (x' - x) = h p + h^2/2 Q(midpoint)

    (J^T M (x' - x) the chords seen at the start, Inertia.chords; Q the generalized force: the push, minus the
    elastic gradient and Rayleigh's beta K dq / h, plus the contacts with their viscosity), by Newton on the
    start's mass matrix plus h^2/4 the stiffnesses, with backtracking on the residual; then
    p' = (1 - c_d h/2) J'^T M (x' - x) / h + h/2 Q. Returns (c', R', q', p')."""
    r = len(q)
    M = inertia.mass_matrix(R, q)
    u = np.linalg.solve(M, momentum)
    K = stiffness.at(q)
    drag = p.drag
    D = np.zeros((6 + r, 6 + r))
    D[6:, 6:] = p.damping * K
    if contact is not None:
        D += contact.viscosity(c, R, q, u)
    push_force = push(t, c, R, q, u)
    no_contact = (0.0, 0.0)

    def residual(step):
        dc, theta, dq = step[:3], step[3:6], step[6:]
        R1, q1, qm = _turn(theta) @ R, q + dq, q + 0.5 * dq
        angular, elastic0, _ = inertia.chords(R, q, R1, q1)
        chord = np.concatenate([inertia.total * dc, angular, elastic0])
        Q = push_force - D @ step / h
        Q[6:] -= elastic.energy_and_force(qm)[1]
        Q_c, H_c = no_contact if contact is None else contact.force_stiffness(c + 0.5 * dc, _turn(0.5 * theta) @ R,
                                                                               qm)
        return (1.0 + 0.5 * drag * h) * chord - h * momentum - 0.5 * h * h * (Q + Q_c), H_c, Q + Q_c

    step = h * u + np.concatenate([0.5 * h * h * push_force[:3] / inertia.total, np.zeros(3 + r)])
    res, H_c, Q = residual(step)
    base = (1.0 + 0.5 * drag * h) * M + 0.5 * h * D
    Kq = np.zeros_like(M)
    reach = np.concatenate([np.ones(3), np.full(3, np.sqrt(np.trace(inertia.A0) / inertia.total)), elastic.reach])
    for iteration in range(MAX_NEWTON):
        if iteration and iteration % CHORD_ITERATIONS == 0:
            K = stiffness.at(q + 0.5 * step[6:], retake=True)
        Kq[6:, 6:] = K
        A = base + 0.25 * h * h * (Kq + H_c)
        delta = -np.linalg.solve(A, res)
        norm = res @ np.linalg.solve(A, res)
        s = 1.0
        while True:
            new, H_new, Q_new = residual(step + s * delta)
            if new @ np.linalg.solve(A, new) <= (1.0 - 1e-4 * s) * norm or s < 1e-6:
                break
            s *= 0.5
        step, res, H_c, Q = step + s * delta, new, H_new, Q_new
        if s * float(np.abs(delta) @ reach) <= elastic.tolerance:
            R1, q1 = _turn(step[3:6]) @ R, q + step[6:]
            angular, _, elastic1 = inertia.chords(R, q, R1, q1)
            chord = np.concatenate([inertia.total * step[:3], angular, elastic1])
            return c + step[:3], R1, q1, (1.0 - 0.5 * drag * h) * chord / h + 0.5 * h * Q
    raise SimulationError("the solid's step did not converge; try a stiffer material, a lower gravity or more drag")

