"""Hyperelastic material laws, in SI units, shared by the learned dynamics and the reference simulator.

One law, two discretizations: the latent dynamics evaluates these on deformations the decoder carries, the
reference on its own finite elements, so the two are compared on the same physics.

* Solids: stable Neo-Hookean (Smith, de Goes and Kim 2018, in the form of Kim and Eberle's "Dynamic Deformables"),
  well-posed through compression and inversion, with Lame parameters reparametrized so that its small-strain limit
  is linear elasticity with the user's E and Poisson ratio.
* Sheets: a plane-stress St Venant-Kirchhoff membrane on triangles plus discrete-shell bending on their hinges
  (Grinspun et al. 2003), with the plate's bending modulus D = E h^3 / (12 (1 - nu^2)).

Everything takes and returns torch tensors (float64), batched over leading dimensions; numpy callers wrap their
arrays with ``torch.from_numpy`` (no copy).
"""

import torch

# Cyclic Jacobi sweeps of a symmetric 3 x 3: its off-diagonals fall quadratically, to round-off after four.
JACOBI_SWEEPS = 5

# Levi-Civita symbol: the second derivative of det(F) is eps_ikm eps_jln F_mn.
_EPS = torch.zeros(3, 3, 3, dtype=torch.float64)
for _i, _j, _k in ((0, 1, 2), (1, 2, 0), (2, 0, 1)):
    _EPS[_i, _j, _k], _EPS[_i, _k, _j] = 1.0, -1.0


def lame(stiffness: float, poisson: float) -> tuple[float, float]:
    """Lame parameters (mu, lambda) in Pa from Young's modulus (Pa) and Poisson ratio."""
    mu = stiffness / (2.0 * (1.0 + poisson))
    lam = stiffness * poisson / ((1.0 + poisson) * (1.0 - 2.0 * poisson))
    return mu, lam


def _snh_constants(mu: float, lam: float) -> tuple[float, float]:
    """The law's (lambda', alpha): lambda' = lambda + mu matches linear elasticity at small strain, and
    alpha = 1 + mu / lambda' makes the rest state stress-free."""
    lam_s = lam + mu
    return lam_s, 1.0 + mu / lam_s


def cofactor(F: torch.Tensor) -> torch.Tensor:
    """dJ/dF = J F^-T, computed from cross products of F's columns so that it exists for singular F."""
    c0, c1, c2 = F[..., :, 0], F[..., :, 1], F[..., :, 2]
    return torch.stack([torch.linalg.cross(c1, c2), torch.linalg.cross(c2, c0), torch.linalg.cross(c0, c1)], -1)


def _det(F: torch.Tensor, cof: torch.Tensor | None = None) -> torch.Tensor:
    """det F as a triple product: a polynomial, so its higher derivatives (torch.func) stay finite at F = I, where
    torch.linalg.det's backward gave NaN under forward-mode differentiation."""
    cof = cofactor(F) if cof is None else cof
    return (F[..., :, 0] * cof[..., :, 0]).sum(-1)


def neo_hookean_energy(F: torch.Tensor, mu: float, lam: float) -> torch.Tensor:
    """Stable Neo-Hookean energy density (J/m^3) of deformation gradients F (..., 3, 3); zero at any rotation."""
    lam_s, alpha = _snh_constants(mu, lam)
    ic = (F * F).sum((-2, -1))
    J = _det(F)
    return 0.5 * mu * (ic - 3.0) + 0.5 * lam_s * ((J - alpha) ** 2 - (1.0 - alpha) ** 2)


def neo_hookean_stress(F: torch.Tensor, mu: float, lam: float) -> torch.Tensor:
    """First Piola-Kirchhoff stress P = dPsi/dF (Pa), (..., 3, 3)."""
    lam_s, alpha = _snh_constants(mu, lam)
    cof = cofactor(F)
    J = _det(F, cof)
    return mu * F + (lam_s * (J - alpha))[..., None, None] * cof


def neo_hookean_stress_derivative(F: torch.Tensor, mu: float, lam: float) -> torch.Tensor:
    """dP/dF (Pa), (..., 3, 3, 3, 3) indexed [i, j, k, l] = d P_ij / d F_kl. Indefinite under large compression;
    an implicit solver projects it (see ``project_psd``)."""
    lam_s, alpha = _snh_constants(mu, lam)
    cof = cofactor(F)
    J = _det(F, cof)
    eye = torch.eye(3, dtype=F.dtype)
    hess_j = torch.einsum("ikm,jln,...mn->...ijkl", _EPS.to(F.dtype), _EPS.to(F.dtype), F)
    return (mu * torch.einsum("ik,jl->ijkl", eye, eye)
            + lam_s * torch.einsum("...ij,...kl->...ijkl", cof, cof)
            + (lam_s * (J - alpha))[..., None, None, None, None] * hess_j)


def project_psd(H: torch.Tensor) -> torch.Tensor:
    """The nearest positive semi-definite matrices (negative eigenvalues clamped to zero), batched (..., n, n)."""
    w, V = torch.linalg.eigh(0.5 * (H + H.transpose(-1, -2)))
    return (V * w.clamp_min(0.0)[..., None, :]) @ V.transpose(-1, -2)


def neo_hookean_stress_derivative_eigensystem(F: torch.Tensor, mu: float, lam: float
                                              ) -> tuple[torch.Tensor, torch.Tensor]:
    """dP/dF's eigenvectors Q (..., 9, 9), as columns over row-major vec(F), and its eigenvalues (..., 9) clamped at
    zero: the positive semi-definite projection is Q diag(values) Q^T. From the law's own eigensystem (Smith, de
    Goes and Kim 2018) instead of a 9 x 9 eigendecomposition: with F = U diag(s) V^T (U, V rotations, s_2 negative
    when F is inverted), the pair (i, j) of axes, k the third, has twist and flip modes
    U (e_i e_j^T -/+ e_j e_i^T) V^T / sqrt(2) with eigenvalues mu +/- lambda' (J - alpha) s_k, and the scaling
    modes U diag(e) V^T come from the 3 x 3 Hessian of the energy in s."""
    lam_s, alpha = _snh_constants(mu, lam)
    U, s, V = rotation_svd(F)
    J = s[..., 0] * s[..., 1] * s[..., 2]
    others = torch.stack([s[..., 1] * s[..., 2], s[..., 0] * s[..., 2], s[..., 0] * s[..., 1]], -1)  # dJ/ds
    scaling = lam_s * (others[..., :, None] * others[..., None, :]) + mu * torch.eye(3, dtype=F.dtype)
    twist = lam_s * (J - alpha)[..., None] * s  # entry k: the off-diagonal d2J/ds_i ds_j = s_k, times lam' (J - a)
    pairs = ((1, 2), (0, 2), (0, 1))
    for k, (i, j) in enumerate(pairs):
        scaling[..., i, j] += twist[..., k]
        scaling[..., j, i] += twist[..., k]
    w, e = symmetric_eigh3(scaling)
    outer = U[..., :, None, :, None] * V[..., None, :, None, :]  # [a, b, i, j] = U_ai V_bj: U e_i e_j^T V^T
    modes = [torch.einsum("...abi,...ik->...abk", outer.diagonal(dim1=-2, dim2=-1), e)]
    values = [w]
    for k, (i, j) in enumerate(pairs):
        for sign in (-1.0, 1.0):  # twist (antisymmetric), then flip (symmetric)
            modes.append(((outer[..., i, j] + sign * outer[..., j, i]) / 2**0.5)[..., None])
            values.append((mu - sign * twist[..., k])[..., None])
    Q = torch.cat(modes, -1).reshape(*F.shape[:-2], 9, 9)
    return Q, torch.cat(values, -1).clamp_min(0.0)


def symmetric_eigh3(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eigenvalues (..., 3) and eigenvectors (..., 3, 3), as columns forming a rotation, of symmetric 3 x 3
    matrices by cyclic Jacobi rotations: whole-batch elementwise operations, 2.6x faster than torch.linalg.eigh's
    per-matrix LAPACK calls on a tet mesh's 12,000. Unordered."""
    a = [[A[..., i, j] for j in range(3)] for i in range(3)]
    one, zero = torch.ones_like(a[0][0]), torch.zeros_like(a[0][0])
    v = [[one, zero, zero], [zero, one, zero], [zero, zero, one]]  # v[row][col]
    for _ in range(JACOBI_SWEEPS):
        for p, q, r in ((0, 1, 2), (0, 2, 1), (1, 2, 0)):
            apq = a[p][q]
            small = apq.abs() <= 1e-300
            theta = (a[q][q] - a[p][p]) / torch.where(small, one, 2.0 * apq)
            t = torch.where(small, zero, torch.copysign(one, theta) / (theta.abs() + torch.sqrt(theta * theta + 1.0)))
            c = torch.rsqrt(t * t + 1.0)
            s = t * c
            app, aqq = a[p][p] - t * apq, a[q][q] + t * apq
            arp, arq = c * a[r][p] - s * a[r][q], s * a[r][p] + c * a[r][q]
            a[p][p], a[q][q], a[p][q], a[q][p] = app, aqq, zero, zero
            a[r][p] = a[p][r] = arp
            a[r][q] = a[q][r] = arq
            for k in range(3):
                vp, vq = v[k][p], v[k][q]
                v[k][p], v[k][q] = c * vp - s * vq, s * vp + c * vq
    return torch.stack([a[0][0], a[1][1], a[2][2]], -1), torch.stack([torch.stack(row, -1) for row in v], -2)


def rotation_svd(F: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """F = U diag(s) V^T with U and V rotations and s_0 >= s_1 >= |s_2|, s_2 negative when F is inverted (the
    convention of Smith, de Goes and Kim 2018), for batches of 3 x 3. V from the Jacobi eigenvectors of F^T F; U by
    Gram-Schmidt on F V's columns and their cross product, so it is a rotation even where F is singular."""
    w, V = symmetric_eigh3(F.transpose(-1, -2) @ F)
    w, order = torch.sort(w, dim=-1, descending=True)
    V = V.gather(-1, order[..., None, :].expand_as(V))
    flip = torch.where(_det(V) < 0, -1.0, 1.0)  # a sort's odd permutation
    V = torch.cat([V[..., :2], V[..., 2:] * flip[..., None, None]], -1)
    A = F @ V  # columns s_i u_i
    u0 = _unit(A[..., 0], _perpendicular(torch.zeros_like(A[..., 0])))
    a1 = A[..., 1] - (u0 * A[..., 1]).sum(-1, keepdim=True) * u0
    u1 = _unit(a1, _perpendicular(u0))
    u2 = torch.linalg.cross(u0, u1)
    U = torch.stack([u0, u1, u2], -1)
    s = torch.stack([(u0 * A[..., 0]).sum(-1), (u1 * A[..., 1]).sum(-1), (u2 * A[..., 2]).sum(-1)], -1)
    return U, s, V


def _unit(a: torch.Tensor, fallback: torch.Tensor) -> torch.Tensor:
    """a normalized, or ``fallback`` (a unit vector) where a is too short to have a direction."""
    n = a.norm(dim=-1, keepdim=True)
    return torch.where(n > 1e-150, a / n.clamp_min(1e-300), fallback)


def _perpendicular(u: torch.Tensor) -> torch.Tensor:
    """A unit vector perpendicular to the unit vectors u (e_x where u is zero)."""
    ex = torch.zeros_like(u)
    ex[..., 0] = 1.0
    ey = torch.zeros_like(u)
    ey[..., 1] = 1.0
    helper = torch.where((u[..., :1].abs() < 0.9), ex, ey)
    return _unit(helper - (helper * u).sum(-1, keepdim=True) * u, ey)


def plane_stress_moduli(stiffness: float, poisson: float, thickness: float) -> tuple[float, float]:
    """A sheet's membrane moduli per unit width (N/m): (mu h, E h nu / (1 - nu^2))."""
    mu, _ = lame(stiffness, poisson)
    return mu * thickness, stiffness * thickness * poisson / (1.0 - poisson**2)


def bending_modulus(stiffness: float, poisson: float, thickness: float) -> float:
    """A plate's bending modulus D = E h^3 / (12 (1 - nu^2)), N m."""
    return stiffness * thickness**3 / (12.0 * (1.0 - poisson**2))


def membrane_energy(F: torch.Tensor, mu_h: float, lam_h: float) -> torch.Tensor:
    """Plane-stress St Venant-Kirchhoff energy per unit rest area (J/m^2) of a sheet's in-plane deformation
    gradients F (..., 3, 2), with the moduli per unit width of ``plane_stress_moduli``."""
    E = 0.5 * (F.transpose(-1, -2) @ F - torch.eye(2, dtype=F.dtype))
    tr = E[..., 0, 0] + E[..., 1, 1]
    return mu_h * (E * E).sum((-2, -1)) + 0.5 * lam_h * tr**2


def membrane_stress(F: torch.Tensor, mu_h: float, lam_h: float) -> torch.Tensor:
    """First Piola-Kirchhoff stress per unit width P = dPsi/dF (N/m), (..., 3, 2): F S with S = 2 mu h E + lam h
    tr(E) I."""
    E = 0.5 * (F.transpose(-1, -2) @ F - torch.eye(2, dtype=F.dtype))
    tr = E[..., 0, 0] + E[..., 1, 1]
    return F @ (2.0 * mu_h * E + lam_h * tr[..., None, None] * torch.eye(2, dtype=F.dtype))


def membrane_stress_derivative(F: torch.Tensor, mu_h: float, lam_h: float, definite: bool = False) -> torch.Tensor:
    """dP/dF (N/m), (..., 3, 2, 3, 2) indexed [i, j, k, l] = d P_ij / d F_kl:
    delta_ik S_lj + mu h (F_il F_kj + (F F^T)_ik delta_jl) + lam h F_ij F_kl. All but the first (geometric) term
    are positive semi-definite; with ``definite`` the first takes S's positive part, which makes the whole so
    (exact wherever the membrane is in tension), as an implicit solver needs under compression."""
    E = 0.5 * (F.transpose(-1, -2) @ F - torch.eye(2, dtype=F.dtype))
    tr = E[..., 0, 0] + E[..., 1, 1]
    S = 2.0 * mu_h * E + lam_h * tr[..., None, None] * torch.eye(2, dtype=F.dtype)
    if definite:
        w, V = torch.linalg.eigh(S)
        S = (V * w.clamp_min(0.0)[..., None, :]) @ V.transpose(-1, -2)
    eye3, eye2 = torch.eye(3, dtype=F.dtype), torch.eye(2, dtype=F.dtype)
    return (torch.einsum("ik,...lj->...ijkl", eye3, S)
            + mu_h * torch.einsum("...il,...kj->...ijkl", F, F)
            + mu_h * torch.einsum("...ik,jl->...ijkl", F @ F.transpose(-1, -2), eye2)
            + lam_h * torch.einsum("...ij,...kl->...ijkl", F, F))


def hinges(faces) -> torch.Tensor:
    """(H, 4) hinges of a triangulation: the two vertices of each interior edge shared by exactly two triangles,
    then the vertex opposite it in each triangle."""
    faces = torch.as_tensor(faces, dtype=torch.int64)
    if not len(faces):
        return torch.zeros(0, 4, dtype=torch.int64)
    edges, opposite = [], []
    for a, b, c in ((0, 1, 2), (1, 2, 0), (2, 0, 1)):
        edges.append(torch.stack([faces[:, a], faces[:, b]], 1))
        opposite.append(faces[:, c])
    edges, opposite = torch.cat(edges), torch.cat(opposite)
    key = torch.sort(edges, 1).values
    _, inverse, counts = torch.unique(key, dim=0, return_inverse=True, return_counts=True)
    order = torch.argsort(inverse, stable=True)
    shared = counts[inverse[order]] == 2
    first = order[shared][0::2]
    second = order[shared][1::2]
    return torch.stack([edges[first, 0], edges[first, 1], opposite[first], opposite[second]], 1)


def _hinge_geometry(x: torch.Tensor, hinge: torch.Tensor):
    """Each hinge's opposite vertices relative to its edge's first end, its edge e and its triangles' normals n1, n2
    (each of length twice its triangle's area)."""
    x0, x1, x2, x3 = (x[..., hinge[:, k], :] for k in range(4))
    a2, a3, e = x2 - x0, x3 - x0, x1 - x0
    return a2, a3, e, torch.linalg.cross(e, a2), torch.linalg.cross(a3, e)


def _angles(e: torch.Tensor, n1: torch.Tensor, n2: torch.Tensor) -> torch.Tensor:
    unit_e = e / e.norm(dim=-1, keepdim=True).clamp_min(1e-300)
    return torch.atan2((torch.linalg.cross(n1, n2) * unit_e).sum(-1), (n1 * n2).sum(-1))


def _angle_gradients(a2, a3, e, n1, n2) -> torch.Tensor:
    length2 = (e * e).sum(-1, keepdim=True).clamp_min(1e-300)
    length = length2.sqrt()
    g2 = -length * n1 / (n1 * n1).sum(-1, keepdim=True).clamp_min(1e-300)
    g3 = -length * n2 / (n2 * n2).sum(-1, keepdim=True).clamp_min(1e-300)
    t2 = (a2 * e).sum(-1, keepdim=True) / length2
    t3 = (a3 * e).sum(-1, keepdim=True) / length2
    return torch.stack([-(1 - t2) * g2 - (1 - t3) * g3, -t2 * g2 - t3 * g3, g2, g3], -2)


def dihedral_angles(x: torch.Tensor, hinge: torch.Tensor) -> torch.Tensor:
    """Signed bending angle (rad) at each hinge (H, 4) of positions x (..., V, 3): 0 when flat."""
    _, _, e, n1, n2 = _hinge_geometry(x, hinge)
    return _angles(e, n1, n2)


def dihedral_angle_gradients(x: torch.Tensor, hinge: torch.Tensor) -> torch.Tensor:
    """d theta / dx at each hinge's four vertices (H, 4, 3), theta as in ``dihedral_angles``: an opposite vertex's is
    -|e| n / |n|^2 with n its triangle's normal as there (of length twice the area), and the edge's two ends take the
    opposite of it, shared by where that vertex projects onto the edge, so that moving the hinge rigidly leaves theta
    unchanged (Bridson, Marino and Fedkiw 2003)."""
    return _angle_gradients(*_hinge_geometry(x, hinge))


def dihedral_angles_and_gradients(x: torch.Tensor, hinge: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``dihedral_angles`` and ``dihedral_angle_gradients`` from one pass over the hinges."""
    geometry = _hinge_geometry(x, hinge)
    return _angles(*geometry[2:]), _angle_gradients(*geometry)


def hinge_weights(x: torch.Tensor, hinge: torch.Tensor) -> torch.Tensor:
    """Discrete-shell weights |e|^2 / A_e at rest (A_e: the two triangles' area), so that the bending energy
    sum D / 2 w (theta - theta_rest)^2 approximates the plate's D / 2 (2H)^2 per unit area (checked on a rolled
    plate; the often-quoted 3 |e|^2 / A_e is for A_e a third of that area)."""
    x0, x1, x2, x3 = (x[hinge[:, k]] for k in range(4))
    e = x1 - x0
    area = 0.5 * (torch.linalg.cross(e, x2 - x0).norm(dim=-1) + torch.linalg.cross(x3 - x0, e).norm(dim=-1))
    return (e * e).sum(-1) / area.clamp_min(1e-300)
