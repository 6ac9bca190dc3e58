"""Material presets: physical defaults an artist picks by name.

Every value is in SI units. A preset fills stiffness, density and damping; explicit options override it.
``thickness`` applies only to open surfaces (cloth), which have no volume of their own.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Material:
    stiffness: float  # Young's modulus, Pa
    density: float  # kg/m^3
    damping: float  # internal (stiffness-proportional Rayleigh) damping, s
    poisson: float  # Poisson ratio
    thickness: float  # shell thickness for open surfaces, m
    description: str


MATERIALS: dict[str, Material] = {
    "cloth": Material(2.0e6, 300.0, 0.005, 0.3, 1.0e-3, "Cotton-like fabric: drapes, light"),
    "silk": Material(5.0e5, 150.0, 0.002, 0.3, 5.0e-4, "Thin, soft and very light fabric"),
    "rubber": Material(1.0e6, 1100.0, 0.01, 0.45, 2.0e-3, "Bouncy rubber: firm, keeps its shape"),
    "jelly": Material(5.0e4, 1000.0, 0.02, 0.45, 5.0e-3, "Soft gelatine: wobbles and sags"),
    "elastic_beam": Material(5.0e6, 1000.0, 0.005, 0.35, 2.0e-3, "Stiff elastic rod or plate: bends, springs back"),
}

DEFAULT_MATERIAL = "rubber"
