"""Linear tetrahedra of the continuum: volumes, shape gradients, lumped masses, the stable Neo-Hookean energy,
forces and PSD-projected stiffness of a tet mesh, and the sparsity pattern that stiffness is assembled into. The
reference's implicit solids (lab/data/implicit_fem.py) and the product's pinned solids (continuum_solid.py) both
discretize the law of ``elasticity`` with these."""

import numpy as np
import scipy.sparse as sp
import torch

from . import elasticity
from .params import SimParams

MASS_FLOOR = 0.02  # nodes barely inside the body keep this fraction of the mean node mass (keeps M positive)


def signed_tet_volumes(nodes: np.ndarray, tets: np.ndarray) -> np.ndarray:
    """Volume of each tetrahedron (M,), positive when its vertices are positively oriented."""
    a, b, c, d = (nodes[tets[:, k]] for k in range(4))
    return np.einsum("ij,ij->i", b - a, np.cross(c - a, d - a)) / 6.0


def node_masses(node_volume: np.ndarray, density: float) -> np.ndarray:
    """Lumped node masses (kg) from lumped volumes (m^3), floored at MASS_FLOOR x their mean and scaled back to the
    body's exact total mass."""
    volume = np.asarray(node_volume, np.float64)
    mass = np.maximum(density * volume, MASS_FLOOR * density * float(volume.mean()))
    return mass * density * float(volume.sum()) / float(mass.sum())


def _shape_gradients(nodes: np.ndarray, tets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rest volumes (M,) and gradients (M, 4, 3) of each tet's four linear shape functions: F = sum_a x_a G_a^T."""
    rest = np.stack([nodes[tets[:, k]] - nodes[tets[:, 0]] for k in (1, 2, 3)], -1)  # columns: edges from node 0
    inv = np.linalg.inv(rest)
    return np.abs(signed_tet_volumes(nodes, tets)), np.concatenate([-inv.sum(1, keepdims=True), inv], 1)


class TetElasticity:
    """Stable Neo-Hookean energy, forces and PSD-projected stiffness of a tet mesh, ``weight`` x volume per tet."""

    def __init__(self, nodes: np.ndarray, tets: np.ndarray, params: SimParams, weight: np.ndarray | None = None):
        self.tets = np.asarray(tets, np.int64)
        self.volume, self.grad = _shape_gradients(np.asarray(nodes, np.float64), self.tets)
        self.weight = self.volume * (1.0 if weight is None else np.asarray(weight, np.float64))
        self.mu, self.lam = elasticity.lame(params.stiffness, params.poisson)
        self._grad_t = torch.from_numpy(self.grad)
        self._weight_t = torch.from_numpy(self.weight)
        self.n = len(nodes)

    def deformation(self, x: np.ndarray) -> torch.Tensor:
        """Deformation gradients (M, 3, 3) at positions x (N, 3)."""
        return torch.from_numpy(x[self.tets]).transpose(1, 2) @ self._grad_t

    def energy(self, x: np.ndarray) -> float:
        return float((self._weight_t * elasticity.neo_hookean_energy(self.deformation(x), self.mu, self.lam)).sum())

    def energies(self, positions: np.ndarray) -> np.ndarray:
        """Energy (J) per frame of positions (T, N, 3)."""
        return np.array([self.energy(np.asarray(x, np.float64)) for x in positions])

    def element_energy_and_gradients(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        """The energy (J) and each tet's dPsi/dx at its four nodes (M, 4, 3), from one evaluation of F."""
        F = self.deformation(x)
        energy = float((self._weight_t * elasticity.neo_hookean_energy(F, self.mu, self.lam)).sum())
        P = elasticity.neo_hookean_stress(F, self.mu, self.lam)
        return energy, (self._grad_t @ (self._weight_t[:, None, None] * P).transpose(1, 2)).numpy()

    def energy_and_gradient(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        """The energy (J) and dPsi/dx (N, 3), minus the elastic forces, from one evaluation of F."""
        energy, per_node = self.element_energy_and_gradients(x)
        idx = self.tets.ravel()
        return energy, np.stack([np.bincount(idx, per_node[:, :, i].ravel(), self.n) for i in range(3)], 1)

    def hessian_blocks(self, x: np.ndarray) -> np.ndarray:
        """(M, 12, 12) element stiffness, each from dP/dF projected to positive semi-definite: W diag(w) W^T with
        W the law's eigenmodes carried to the nodes (dF_kj / dx_ak = G_aj)."""
        Q, w = elasticity.neo_hookean_stress_derivative_eigensystem(self.deformation(x), self.mu, self.lam)
        W = torch.einsum("taj,tkjm->takm", self._grad_t, Q.view(-1, 3, 3, 9)).reshape(-1, 12, 9).numpy()
        return (W * (self.weight[:, None] * w.numpy())[:, None, :]) @ W.transpose(0, 2, 1)  # numpy's: 1.6x torch's


class StiffnessPattern:
    """The sparsity pattern of the free DOFs' stiffness, built once: element blocks are summed into it by bincount.
    ``elements``: one (M, k) array of node indices (tets, k = 4) or a list of them (a sheet's triangles and hinges),
    whose (M, 3k, 3k) blocks ``assemble`` takes in the same order."""

    def __init__(self, elements: np.ndarray | list[np.ndarray], free_dof: np.ndarray):
        rows, cols = [], []
        for nodes in elements if isinstance(elements, list) else [elements]:
            size = 3 * nodes.shape[1]
            dof = free_dof[(3 * nodes[:, :, None] + np.arange(3)).reshape(-1, size)]  # (M, 3k), -1 where held
            rows.append(np.broadcast_to(dof[:, :, None], (len(nodes), size, size)).ravel())
            cols.append(np.broadcast_to(dof[:, None, :], (len(nodes), size, size)).ravel())
        rows, cols = np.concatenate(rows), np.concatenate(cols)
        self.keep = (rows >= 0) & (cols >= 0)
        self.size = int(free_dof.max()) + 1
        diag = np.arange(self.size)
        key = np.concatenate([rows[self.keep] * self.size + cols[self.keep], diag * self.size + diag])
        unique, inverse = np.unique(key, return_inverse=True)
        self.slot, self.diag_slot = inverse[: self.keep.sum()], inverse[self.keep.sum():]
        self.indices = (unique % self.size).astype(np.int32)
        self.indptr = np.searchsorted(unique // self.size, np.arange(self.size + 1)).astype(np.int32)
        self.nnz = len(unique)

    def assemble(self, blocks: np.ndarray | list[np.ndarray]) -> np.ndarray:
        flat = np.concatenate([b.ravel() for b in blocks]) if isinstance(blocks, list) else blocks.ravel()
        return np.bincount(self.slot, weights=flat[self.keep], minlength=self.nnz)

    def matrix(self, data: np.ndarray, diagonal: np.ndarray) -> sp.csr_matrix:
        data = data.copy()
        data[self.diag_slot] += diagonal
        return sp.csr_matrix((data, self.indices, self.indptr), shape=(self.size, self.size))
