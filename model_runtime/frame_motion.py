"""The object's own animated motion: the body is simulated in its moving frame (object space), where the frame's
acceleration enters as inertial forces, the same way gravity does, and pinned vertices follow the animation
exactly because they do not move in object space.

For a frame x_world = R(t) x + p(t) with body-frame angular velocity w and acceleration w', a point at object-space
position x with object-space velocity x' feels, per unit mass, gravity and wind (given in world axes) turned into
object space, R^T g, and the fictitious acceleration

    -(R^T p'' + w' x x + w x (w x x) + 2 w x x')

(translation, Euler, centrifugal and Coriolis terms). The transforms are given per frame and interpolated by
C2 splines (positions cubic, rotations scipy's RotationSpline), so the accelerations exist between frames.
"""

import numpy as np
from scipy.interpolate import CubicSpline
from scipy.spatial.transform import Rotation, RotationSpline


class FrameMotion:
    """Object-to-world rigid transforms at the frame times 0, 1/fps, ... (T, 4, 4), as functions of time."""

    def __init__(self, matrices: np.ndarray, fps: float):
        times = np.arange(len(matrices)) / fps
        self.rotation = RotationSpline(times, Rotation.from_matrix(matrices[:, :3, :3]))
        self.position = CubicSpline(times, matrices[:, :3, 3], axis=0)

    def state(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """R (3, 3), the origin's acceleration in object axes R^T p'' (3,), and the body-frame angular velocity and
        acceleration (3,) at time t."""
        R = self.rotation(t).as_matrix()
        return R, R.T @ self.position(t, 2), self.rotation(t, 1), self.rotation(t, 2)

    def acceleration(self, t: float, x: np.ndarray, xd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The frame's acceleration felt at object-space points x (N, 3) moving at xd (N, 3), to be subtracted, and
        the rotation R (3, 3) that takes world vectors (gravity) to object space as v @ R."""
        R, origin, w, wd = self.state(t)
        return origin + np.cross(wd, x) + np.cross(w, np.cross(w, x)) + 2.0 * np.cross(w, xd), R
