"""Robot models and rigid-body dynamics in JAX and CasADi, matching Pinocchio.

Importing this package turns on JAX float64 (`jax_enable_x64`): reference checks need it, and
robotics users expect it. Use float32 explicitly (arrays and `model.astype`) where speed matters.
"""

import jax

jax.config.update("jax_enable_x64", True)

from . import actuator  # noqa: E402  (the joint PD actuator model)
from .configuration import (  # noqa: E402
    State,
    difference,
    integrate,
    neutral,
    normalize,
    random_configuration,
)
from .functions import (  # noqa: E402
    LOCAL,
    LOCAL_WORLD_ALIGNED,
    WORLD,
    ReferenceFrame,
    bias_forces,
    center_of_mass,
    centroidal_momentum,
    centroidal_momentum_matrix,
    forward_dynamics,
    forward_dynamics_cholesky,
    forward_kinematics,
    frame_jacobian,
    frame_jacobians,
    frame_placement,
    frame_placements,
    frame_velocity,
    gravity_forces,
    mass_matrix,
    rnea,
)
from .model import Model  # noqa: E402
from .robot_record import RobotRecord  # noqa: E402
from .robots import (  # noqa: E402
    available_robots,
    load_pinocchio,
    load_robot,
    record_of,
    robot_record,
)

__all__ = [
    "actuator",
    "LOCAL",
    "LOCAL_WORLD_ALIGNED",
    "WORLD",
    "Model",
    "RobotRecord",
    "ReferenceFrame",
    "State",
    "available_robots",
    "bias_forces",
    "center_of_mass",
    "centroidal_momentum",
    "centroidal_momentum_matrix",
    "difference",
    "forward_dynamics",
    "forward_dynamics_cholesky",
    "forward_kinematics",
    "frame_jacobian",
    "frame_jacobians",
    "frame_placement",
    "frame_placements",
    "frame_velocity",
    "gravity_forces",
    "integrate",
    "load_pinocchio",
    "load_robot",
    "mass_matrix",
    "neutral",
    "normalize",
    "random_configuration",
    "record_of",
    "rnea",
    "robot_record",
]
