"""Contact: terrain, contact kinematics, contact solvers and the time-stepper.

`terrain`: terrains as pytrees (`flat`, `incline`, `plane`, `steps`, `heightfield`), their
`signed_distance`, `friction` and `contact_frame`.
`coulomb`: the disk-cone projection and the fixed-sweep prox solver for contact impulses.
"""

from .coulomb import project_disk_cone, solve_impulses
from .terrain import (
    Heightfield,
    Plane,
    Steps,
    contact_frame,
    flat,
    friction,
    height,
    heightfield,
    incline,
    plane,
    signed_distance,
    steps,
)

__all__ = [
    "Heightfield",
    "Plane",
    "Steps",
    "contact_frame",
    "flat",
    "friction",
    "height",
    "heightfield",
    "incline",
    "plane",
    "project_disk_cone",
    "signed_distance",
    "solve_impulses",
    "steps",
]
