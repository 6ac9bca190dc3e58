"""Blender's own Wind force fields and Collision objects, as the runtime's wind sources and static colliders.

Wind: a visible object with a Wind force field pushes along its +Z axis with an acceleration of ``strength`` scene
units per s^2 (what Blender's wind gives a particle of unit mass), times the scene's unit scale into m/s^2 like
gravity, and in world axes like gravity (an animated object turns through it); its Noise is the gust strength (the
same 0-10 range). Falloff, shape and flow are not modelled: the wind is uniform everywhere.

Colliders: a visible mesh with an enabled Collision modifier, as evaluated at the start frame and held still. Flat
meshes become infinite planes (solid behind their face normals), box-like meshes boxes, sphere-like meshes spheres,
anything else its convex hull (concave parts are filled). The Collision modifier's thickness, damping and friction
are not used: the runtime's contact is the ground's.
"""

from dataclasses import dataclass

import bpy
import numpy as np

from .motion import SimulationSpace

FLAT = 1e-5  # thickness relative to the size below which a mesh is a plane
ON_BOX = 1e-3  # distance from a bounding-box face, relative to the box, that still counts as on it
ON_SPHERE = 1e-2  # distance from the fitted sphere, relative to its radius, that still counts as on it
HULL_POINTS = 2000  # a convex collider travels as at most this many points (its support points in many directions)


@dataclass
class Collider:
    name: str
    spec: dict  # the runtime's collider description, in the simulated space (m)

    @property
    def shape(self) -> str:
        return self.spec["shape"]


def _visible(obj: bpy.types.Object, view_layer: bpy.types.ViewLayer) -> bool:
    return obj.visible_get(view_layer=view_layer)


def wind(scene: bpy.types.Scene, view_layer) -> tuple[list[dict], list[str]]:
    """The runtime's wind sources (world axes, m/s^2) from the scene's visible Wind fields, and the fields'
    names."""
    sources, names = [], []
    for obj in scene.objects:
        field = obj.field
        if field is None or field.type != "WIND" or field.strength == 0.0 or not _visible(obj, view_layer):
            continue
        axis = np.array(obj.matrix_world)[:3, 2]
        push = axis / np.linalg.norm(axis) * field.strength * scene.unit_settings.scale_length
        sources.append({"acceleration": push.tolist(), "noise": float(field.noise)})
        names.append(obj.name)
    return sources, names


def colliders(context: bpy.types.Context, space: SimulationSpace, exclude: bpy.types.Object) -> list[Collider]:
    """The runtime's colliders from the scene's visible meshes with an enabled Collision modifier."""
    depsgraph = context.evaluated_depsgraph_get()
    out = []
    for obj in context.scene.objects:
        if obj == exclude or obj.type != "MESH" or not _visible(obj, context.view_layer):
            continue
        if not (obj.collision and obj.collision.use and any(m.type == "COLLISION" and m.show_viewport
                                                            for m in obj.modifiers)):
            continue
        obj_eval = obj.evaluated_get(depsgraph)
        mesh = obj_eval.to_mesh()
        try:
            local = np.empty(len(mesh.vertices) * 3, np.float32)
            mesh.vertices.foreach_get("co", local)
            normals = np.empty(len(mesh.polygons) * 3, np.float32)
            mesh.polygons.foreach_get("normal", normals)
            areas = np.empty(len(mesh.polygons), np.float32)
            mesh.polygons.foreach_get("area", areas)
        finally:
            obj_eval.to_mesh_clear()
        if len(local) < 9:
            continue
        transform = space.from_world @ np.array(obj.matrix_world)
        normal = (areas[:, None] * normals.reshape(-1, 3)).sum(0) if len(areas) else np.zeros(3)
        out.append(Collider(obj.name, classify(local.reshape(-1, 3).astype(np.float64), transform, normal)))
    return out


def classify(local: np.ndarray, transform: np.ndarray, normal: np.ndarray) -> dict:
    """A collider for a mesh with object coordinates ``local`` (N, 3), placed by ``transform`` (4, 4, object to
    simulated space in metres), with area-weighted face normal ``normal`` (object space, for planes' solid side)."""
    linear, offset = transform[:3, :3], transform[:3, 3]
    points = local @ linear.T + offset
    center = points.mean(0)
    _, singular, axes = np.linalg.svd(points - center, full_matrices=False)
    if singular[-1] <= FLAT * singular[0]:
        # Flat: solid behind the faces (a default Plane's +Z normal: solid below). Normals map by the inverse
        # transpose; with no face normal to go by, the flat direction points up.
        n = np.linalg.solve(linear.T, normal) if np.linalg.norm(normal) > 0 else axes[-1]
        return {"shape": "plane", "point": center.tolist(), "normal": (n / np.linalg.norm(n)).tolist()}
    if (box := _box(local, linear, offset)) is not None:
        return box
    if (sphere := _sphere(points)) is not None:
        return sphere
    return {"shape": "convex", "points": _support_points(points).tolist()}


def _box(local: np.ndarray, linear: np.ndarray, offset: np.ndarray) -> dict | None:
    """A box when every vertex lies on the faces of the object-space bounding box and all its corners are vertices
    (a cube, subdivided or not), and the object's axes stay perpendicular in the simulated space (no shear)."""
    lo, hi = local.min(0), local.max(0)
    extent = hi - lo
    tol = ON_BOX * float(extent.max())
    on_face = np.minimum(np.abs(local - lo), np.abs(local - hi)).min(1) <= tol
    corners = np.where(np.array(list(np.ndindex(2, 2, 2)), bool), hi, lo)
    has_corners = all(np.linalg.norm(local - c, axis=1).min() <= tol for c in corners)
    lengths = np.linalg.norm(linear, axis=0)
    axes = linear / lengths
    if not (on_face.all() and has_corners and np.abs(axes.T @ axes - np.eye(3)).max() < 1e-4):
        return None
    if np.linalg.det(axes) < 0:  # a mirrored object: flip one axis (a box is symmetric) to keep a rotation
        axes[:, 0] = -axes[:, 0]
    matrix = np.eye(4)
    matrix[:3, :3] = axes
    matrix[:3, 3] = linear @ ((lo + hi) / 2) + offset
    return {"shape": "box", "matrix": matrix.tolist(), "size": (extent * lengths).tolist()}


def _sphere(points: np.ndarray) -> dict | None:
    """A sphere when the vertices fit one (least squares) within ON_SPHERE of its radius and spread all round it
    (their mean near its centre: a hemisphere's is not); a UV or ico sphere's faces lie up to a few percent inside
    the fitted sphere, so the collider is that much rounder and larger."""
    if len(points) < 12:
        return None
    a = np.column_stack([2.0 * points, np.ones(len(points))])
    solution = np.linalg.lstsq(a, (points**2).sum(1), rcond=None)[0]
    center = solution[:3]
    radius = float(np.sqrt(max(solution[3] + center @ center, 0.0)))
    distance = np.linalg.norm(points - center, axis=1)
    if radius <= 0 or np.abs(distance - radius).max() > ON_SPHERE * radius:
        return None
    if np.linalg.norm(points.mean(0) - center) > 0.05 * radius:
        return None
    return {"shape": "sphere", "center": center.tolist(), "radius": radius}


def _support_points(points: np.ndarray) -> np.ndarray:
    """The points, or for large meshes the farthest point in each of HULL_POINTS directions (a Fibonacci sphere):
    their hull is the mesh's hull up to a sliver, and the request stays small."""
    if len(points) <= HULL_POINTS:
        return points
    k = np.arange(HULL_POINTS) + 0.5
    z = 1.0 - 2.0 * k / HULL_POINTS
    phi = np.pi * (1.0 + 5**0.5) * k
    r = np.sqrt(1.0 - z * z)
    directions = np.column_stack([r * np.cos(phi), r * np.sin(phi), z])
    return points[np.unique((points @ directions.T).argmax(0))]
