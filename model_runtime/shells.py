"""Linear triangles of a thin shell: a plane-stress membrane on each triangle plus discrete-shell bending on each
hinge, the sheet law of ``elasticity``, with their energy, forces and positive semi-definite stiffness. The
product's sheets (continuum_sheet.py) discretize the law with these."""

import numpy as np
import scipy.sparse as sp
import torch

from . import elasticity


def _rest_frames(nodes: np.ndarray, triangles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rest areas (T,) and the shape coefficients (T, 3, 2) of each triangle's linear functions in its own
    orthonormal in-plane frame: the in-plane deformation gradient is F = sum_a x_a c_a^T (3, 2)."""
    a, b, c = (nodes[triangles[:, k]] for k in range(3))
    e1, e2 = b - a, c - a
    normal = np.cross(e1, e2)
    area = 0.5 * np.linalg.norm(normal, axis=1)
    t1 = e1 / np.linalg.norm(e1, axis=1, keepdims=True)
    t2 = np.cross(normal / (2.0 * area[:, None]), t1)
    rest = np.stack([np.stack([(e1 * t1).sum(1), (e2 * t1).sum(1)], 1),
                     np.stack([(e1 * t2).sum(1), (e2 * t2).sum(1)], 1)], 1)  # (T, 2, 2): columns the rest edges
    inv = np.linalg.inv(rest)
    return area, np.concatenate([-inv.sum(1, keepdims=True), inv], 1)


class ShellElasticity:
    """Membrane (plane-stress St Venant-Kirchhoff) and bending (dihedral angles about their rest values) energy of
    a triangulated sheet of Young's modulus E, Poisson ratio nu and thickness h, in joules."""

    def __init__(self, nodes: np.ndarray, triangles: np.ndarray, stiffness: float, poisson: float, thickness: float):
        nodes = np.asarray(nodes, np.float64)
        self.triangles = np.asarray(triangles, np.int64)
        self.hinges = elasticity.hinges(self.triangles).numpy()
        self.area, self.coeff = _rest_frames(nodes, self.triangles)
        self.moduli = elasticity.plane_stress_moduli(stiffness, poisson, thickness)
        rest = torch.from_numpy(nodes)
        hinge = torch.from_numpy(self.hinges)
        self.rest_angle = elasticity.dihedral_angles(rest, hinge).numpy()
        # each hinge's bending stiffness D |e|^2 / A_e (N m): energy k / 2 (theta - theta_rest)^2
        self.hinge_stiffness = (elasticity.bending_modulus(stiffness, poisson, thickness)
                                * elasticity.hinge_weights(rest, hinge).numpy())
        self.n = len(nodes)
        # sums the triangles' (T, 3, 3) and hinges' (H, 4, 3) per-corner gradients onto the nodes
        corners = np.concatenate([self.triangles.ravel(), self.hinges.ravel()])
        self.scatter = sp.csr_matrix((np.ones(len(corners)), (corners, np.arange(len(corners)))),
                                     shape=(self.n, len(corners)))
        self.hinge_index = torch.from_numpy(self.hinges)

    @property
    def elements(self) -> list[np.ndarray]:
        """The node sets the stiffness blocks belong to: triangles, then hinges."""
        return [self.triangles, self.hinges]

    def deformation(self, x: np.ndarray) -> np.ndarray:
        """In-plane deformation gradients (T, 3, 2) at positions x (N, 3)."""
        return np.matmul(x[self.triangles].transpose(0, 2, 1), self.coeff)

    def _deformation(self, x: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(self.deformation(x))

    def energy(self, x: np.ndarray) -> float:
        return self.energy_and_gradient(x)[0]

    def energy_and_gradient(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        """The energy (J) and dPsi/dx (N, 3), minus the elastic forces."""
        F = self._deformation(x)
        membrane = elasticity.membrane_energy(F, *self.moduli).numpy()
        P = elasticity.membrane_stress(F, *self.moduli).numpy()
        per_triangle = self.area[:, None, None] * np.matmul(self.coeff, P.transpose(0, 2, 1))
        angle, turn = elasticity.dihedral_angles_and_gradients(torch.from_numpy(x), self.hinge_index)
        bend = angle.numpy() - self.rest_angle
        per_hinge = (self.hinge_stiffness * bend)[:, None, None] * turn.numpy()
        grad = self.scatter @ np.concatenate([per_triangle.reshape(-1, 3), per_hinge.reshape(-1, 3)])
        return float(self.area @ membrane + 0.5 * self.hinge_stiffness @ bend**2), grad

    def hessian_blocks(self, x: np.ndarray) -> list[np.ndarray]:
        """Element stiffness, in ``elements``' order: (T, 9, 9) from the membrane's dP/dF made positive semi-definite
        by its stress's positive part, and (H, 12, 12) Gauss-Newton k grad(theta) grad(theta)^T for bending (positive
        semi-definite; it leaves out k (theta - theta_rest) times theta's own curvature)."""
        dP = elasticity.membrane_stress_derivative(self._deformation(x), *self.moduli, definite=True).numpy()
        # block [a, i, b, k] = A c_a^T dP[i, :, k, :] c_b, as batched 3 x 2 . 2 x 2 . 2 x 3 products per (i, k)
        weighted = (self.area[:, None, None] * self.coeff)[:, None, None]
        blocks = weighted @ dP.transpose(0, 1, 3, 2, 4) @ self.coeff[:, None, None].transpose(0, 1, 2, 4, 3)
        membrane = blocks.transpose(0, 3, 1, 4, 2).reshape(-1, 9, 9)
        xt = torch.from_numpy(x)
        g = elasticity.dihedral_angle_gradients(xt, self.hinge_index).numpy().reshape(-1, 12)
        bending = self.hinge_stiffness[:, None, None] * g[:, :, None] * g[:, None, :]
        return [membrane, bending]
