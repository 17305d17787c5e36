"""Contact: terrain, contact kinematics, contact solvers and the time-stepper.

`step(model, params, state, tau, contact="hard"|"smooth"|"penalty") -> (state, info)`: one
time step with the chosen contact model (`ContactModel`, the choices `CONTACT_MODELS`; see
`step.py` for the equations); `rollout` and `simulate` scan it. `StepParams` holds the traced
physical parameters, including the terrain.
`terrain`: terrains as pytrees (`flat`, `incline`, `plane`, `steps`, `heightfield`; and from
`terraces`, `terraces` and `flight`: stairs up, a landing, down), their `signed_distance`,
`friction` and `contact_frame`.
`coulomb`: the disk-cone projection and the fixed-sweep prox solver for contact impulses.
`checks`: parameter validation at construction, and the bad-state flags of `StepInfo`;
`first_bad_step(infos)` finds the first step of a rollout that received or produced a NaN,
an infinity or a non-unit base quaternion.
"""

from .checks import first_bad_step
from .coulomb import project_disk_cone, solve_impulses
from .foot_contacts import FootContacts, compute_foot_contacts
from .params import StepParams
from .rollout import rollout, simulate
from .step import (
    CONTACT_MODELS,
    ContactModel,
    StepInfo,
    activation,
    generalized_forces,
    impulse_problem,
    make_step,
    step,
)
from .terraces import Terraces, flight, terraces
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
    terrain_from_dict,
    terrain_to_dict,
)

__all__ = [
    "CONTACT_MODELS",
    "ContactModel",
    "FootContacts",
    "Heightfield",
    "Plane",
    "StepInfo",
    "StepParams",
    "Steps",
    "Terraces",
    "activation",
    "compute_foot_contacts",
    "contact_frame",
    "first_bad_step",
    "flat",
    "flight",
    "friction",
    "generalized_forces",
    "height",
    "heightfield",
    "impulse_problem",
    "incline",
    "make_step",
    "plane",
    "project_disk_cone",
    "rollout",
    "signed_distance",
    "simulate",
    "solve_impulses",
    "step",
    "steps",
    "terrain_from_dict",
    "terrain_to_dict",
    "terraces",
]
