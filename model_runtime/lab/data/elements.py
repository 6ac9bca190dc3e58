"""Finite-element helpers the reference engines share (implicit_fem, mujoco_engine, newton_engine, reference,
validate): tetrahedron volumes, lumped masses, a mesh's mean edge length. The material laws are the runtime's
(model_runtime.elasticity), so the reference and the learned model use one law."""

import numpy as np

from ...mesh import Mesh, face_areas
from ...tets import signed_tet_volumes


def fill_loose_masses(mass: np.ndarray) -> None:
    """In place: vertices of no triangle/tet carry no mass; give them a typical one so they fall freely."""
    loose = mass <= 0.0
    mass[loose] = float(np.mean(mass[~loose])) if (~loose).any() else 1.0


def lumped_tet_masses(nodes: np.ndarray, tets: np.ndarray, density) -> np.ndarray:
    """Each tetrahedron gives rho * V_tet / 4 to each of its four vertices (``density``: one value or one per tet)."""
    m = np.zeros(len(nodes))
    np.add.at(m, tets.reshape(-1), np.repeat(density * np.abs(signed_tet_volumes(nodes, tets)) / 4.0, 4))
    return m


def lumped_triangle_masses(vertices: np.ndarray, faces: np.ndarray, areal_density: float) -> np.ndarray:
    """Each triangle gives rho_A * A / 3 to each of its three vertices."""
    m = np.zeros(len(vertices))
    np.add.at(m, faces.reshape(-1), np.repeat(areal_density * face_areas(Mesh(vertices, faces)) / 3.0, 3))
    return m


def mean_edge_length(vertices: np.ndarray, faces: np.ndarray) -> float:
    e = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]])
    return float(np.linalg.norm(vertices[e[:, 0]] - vertices[e[:, 1]], axis=1).mean())
