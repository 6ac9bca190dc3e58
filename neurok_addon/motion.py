"""The object's own animated transform, sampled per frame, and the space NeuROK simulates it in.

A still object is simulated in world space (metres). An object whose transform is animated (keys, parents,
constraints, drivers) is simulated in its own moving frame: the rigid part of its matrix_world (rotation and
translation), with its scale baked into the vertices. The runtime adds the frame's acceleration as inertial forces,
so pinned vertices follow the animation exactly and the NeuROK shape keys stay in local space.
"""

import contextlib
from dataclasses import dataclass

import bpy
import numpy as np

MOVE_TOLERANCE = 1e-6  # relative change of matrix_world below which an object counts as still (float noise)


@contextlib.contextmanager
def at_frame(scene: bpy.types.Scene, frame: int):
    """Go to ``frame`` for the block, then back to the frame (and subframe) the artist was on."""
    current, subframe = scene.frame_current, scene.frame_subframe
    if frame != current or subframe:
        scene.frame_set(frame)
    try:
        yield
    finally:
        if scene.frame_current != current or scene.frame_subframe != subframe:
            scene.frame_set(current, subframe=subframe)


def may_move(obj: bpy.types.Object) -> bool:
    """Whether anything could animate the object's transform (sampling every frame costs a scene evaluation each).
    Constraints and parents other than plain objects may follow anything, so they count as moving."""
    while obj is not None:
        if obj.animation_data is not None or obj.constraints or obj.rigid_body is not None:
            return True
        if obj.parent_type != "OBJECT":
            return True
        obj = obj.parent
    return False


def sample_matrices(obj: bpy.types.Object, scene: bpy.types.Scene, start: int, frames: int) -> np.ndarray:
    """matrix_world at start, start + 1, ..., start + frames (frames + 1, 4, 4), the current frame restored."""
    out = np.empty((frames + 1, 4, 4))
    with at_frame(scene, start):
        for k in range(frames + 1):
            if k:
                scene.frame_set(start + k)
            out[k] = np.array(obj.matrix_world)
    return out


def polar(matrix3: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """matrix3 = R @ P with R a rotation and P symmetric (the scale, a mirror included), through the SVD."""
    u, _, vt = np.linalg.svd(matrix3)
    flip = np.diag([1.0, 1.0, np.sign(np.linalg.det(u @ vt))])
    rotation = u @ flip @ vt
    return rotation, rotation.T @ matrix3


@dataclass
class SimulationSpace:
    """Where the simulation runs: ``from_local`` (4, 4) maps object coordinates to the simulated space in metres,
    ``from_world`` (4, 4) maps world coordinates (scene units) to it; ``frame_motion`` (frames + 1, 4, 4), the
    simulated space's rigid transforms (metres) for an animated object, else None."""

    from_local: np.ndarray
    from_world: np.ndarray
    frame_motion: np.ndarray | None = None
    scale_animated: bool = False

    def to_local(self, positions: np.ndarray) -> np.ndarray:
        """Simulated positions (..., 3) back in object coordinates."""
        inverse = np.linalg.inv(self.from_local)
        return positions @ inverse[:3, :3].T + inverse[:3, 3]

    def vector(self, world_vector) -> np.ndarray:
        """A world vector in scene units (velocity, acceleration) in the simulated space's axes, in metres."""
        return self.from_world[:3, :3] @ np.asarray(world_vector, np.float64)

    def points(self, world_points: np.ndarray) -> np.ndarray:
        return world_points @ self.from_world[:3, :3].T + self.from_world[:3, 3]


def simulation_space(matrices: np.ndarray, unit: float) -> SimulationSpace:
    """The space for an object whose matrix_world at each simulated frame is ``matrices`` (the first at the start
    frame): world space when it does not move, else its moving rigid frame."""
    m0 = matrices[0]
    scale = np.eye(4) * unit
    scale[3, 3] = 1.0
    if np.abs(matrices - m0).max() <= MOVE_TOLERANCE * max(1.0, np.abs(m0).max()):
        return SimulationSpace(scale @ m0, scale)
    rotations, stretches = zip(*(polar(m[:3, :3]) for m in matrices))
    motion = np.repeat(np.eye(4)[None], len(matrices), axis=0)
    motion[:, :3, :3] = rotations
    # Only the frame's accelerations and turning matter, so its path starts at the origin (the runtime bounds how
    # far a frame may travel; a scene far from its origin would otherwise be refused).
    motion[:, :3, 3] = (matrices[:, :3, 3] - m0[:3, 3]) * unit
    from_local = np.eye(4)
    from_local[:3, :3] = stretches[0] * unit
    world_to_frame = np.eye(4)
    world_to_frame[:3, :3] = rotations[0].T
    world_to_frame[:3, 3] = -rotations[0].T @ m0[:3, 3]
    scale_animated = max(np.abs(s - stretches[0]).max() for s in stretches) > 1e-4 * np.abs(stretches[0]).max()
    return SimulationSpace(from_local, scale @ world_to_frame, motion, scale_animated)
