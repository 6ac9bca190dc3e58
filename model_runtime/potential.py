"""The latent Lagrangian's elastic potential: the continuum's own hyperelastic energy on decoded deformations.

V(a) = sum_k w_k Psi(F_k(a)), summed over the body's cubature points (model_runtime.cubature), with the decoder's
basis coefficients a. The deformation gradient is affine in a, F_k = F_rest_k + dPhi_k a, so the energy's only
nonlinearity is the material law's: stable Neo-Hookean for solids, a plane-stress membrane plus Koiter-style
bending (from the decoded surface's second derivatives) for sheets (model_runtime.elasticity). No calibration:
E, nu and the thickness enter only through the law.
"""

import torch

from . import elasticity

DTYPE = torch.float64


class ElasticPotential:
    """V(a) in joules for basis coefficients a (P,), with its gradient and stiffness through torch.func.

    ``gradients``: (N, 3, d, P) derivative of the displacement per unit coefficient along the d rest directions of
    ``frame`` (N, 3, d): the identity's three axes for a solid, a sheet's two tangents. ``curvature``: (N, 3, 3, P)
    second derivatives along (t1 t1, t1 t2, t2 t2) for sheets, None for solids. ``weights``: rest volume (m^3) of a
    solid's points, rest area (m^2) of a sheet's.
    """

    def __init__(self, gradients: torch.Tensor, frame: torch.Tensor, weights: torch.Tensor, stiffness: float,
                 poisson: float, thickness: float, curvature: torch.Tensor | None = None):
        n, _, d, p = gradients.shape
        self.gradients = gradients.reshape(n * 3 * d, p).to(DTYPE)
        self.frame, self.weights, self.shape = frame.to(DTYPE), weights.to(DTYPE), (n, 3, d)
        self.solid = curvature is None
        if self.solid:
            self.moduli = elasticity.lame(stiffness, poisson)
        else:
            self.moduli = elasticity.plane_stress_moduli(stiffness, poisson, thickness)
            self.bending = elasticity.bending_modulus(stiffness, poisson, thickness)
            self.poisson = poisson
            self.curvature = curvature.reshape(n * 9, p).to(DTYPE)
        self._grad = torch.func.grad(self.energy)

    def energy(self, a: torch.Tensor) -> torch.Tensor:
        F = self.frame + (self.gradients @ a).view(self.shape)
        if self.solid:
            return self.weights @ elasticity.neo_hookean_energy(F, *self.moduli)
        density = elasticity.membrane_energy(F, *self.moduli)
        normal = torch.linalg.cross(F[..., 0], F[..., 1])
        normal = normal / normal.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        ii = torch.einsum("nc,nck->nk", normal, (self.curvature @ a).view(-1, 3, 3))  # (II_11, II_12, II_22)
        nu = self.poisson
        bend = 0.5 * self.bending * ((1 - nu) * (ii[:, 0] ** 2 + 2 * ii[:, 1] ** 2 + ii[:, 2] ** 2)
                                     + nu * (ii[:, 0] + ii[:, 2]) ** 2)
        return self.weights @ (density + bend)

    def force(self, a: torch.Tensor, rate: torch.Tensor, damping: float) -> torch.Tensor:
        """dV/da + damping K(a) a': the elastic force on the coefficients (sign: it opposes a) with
        stiffness-proportional (Rayleigh) damping of ``damping`` seconds."""
        if damping == 0.0:
            return self._grad(a)
        grad, k_rate = torch.func.jvp(self._grad, (a,), (rate,))
        return grad + damping * k_rate

    def stiffness(self, a: torch.Tensor) -> torch.Tensor:
        """K(a) = d2V/da2, (P, P)."""
        return torch.func.jacfwd(self._grad)(a)
