"""Single rigid bodies with a free-flyer joint (spheres, boxes) as `Model`s, for physics checks.

Built through Pinocchio (`pinocchio.Model`, `Inertia.FromBox`/`FromSphere`) so the same
`model_from_pinocchio` path as for robots is exercised. Contact points are frames whose
"foot radius" is the sphere radius (0 for box corners).
"""

from __future__ import annotations

import itertools

import numpy as np

from .model import Model, model_from_pinocchio


def _free_body(name, inertia, points, radius, q_height) -> tuple[Model, object]:
    import pinocchio as pin

    pm = pin.Model()
    pm.name = name
    joint = pm.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "root_joint")
    pm.appendBodyToJoint(joint, inertia, pin.SE3.Identity())
    names = []
    for k, p in enumerate(points):
        names.append(f"contact_{k}")
        placement = pin.SE3(np.eye(3), np.asarray(p, dtype=float))
        pm.addFrame(pin.Frame(names[-1], joint, placement, pin.FrameType.OP_FRAME))
    q0 = np.array([0.0, 0.0, q_height, 0.0, 0.0, 0.0, 1.0])
    model = model_from_pinocchio(
        pm, name=name, foot_names=tuple(names), foot_radius=radius, q_standing=q0
    )
    return model, pm


def sphere(mass: float = 1.0, radius: float = 0.1) -> Model:
    """A solid sphere with one contact (its centre, foot radius = `radius`); rests at z = r."""
    import pinocchio as pin

    model, _ = _free_body(
        "sphere", pin.Inertia.FromSphere(mass, radius), [np.zeros(3)], radius, radius
    )
    return model


def box(mass: float = 1.0, size=(0.2, 0.1, 0.05)) -> Model:
    """A solid box with its 8 corners as point contacts; rests on its face at z = size_z / 2."""
    import pinocchio as pin

    sx, sy, sz = (float(s) for s in size)
    corners = [
        np.array([a * sx, b * sy, c * sz]) / 2 for a, b, c in itertools.product((-1, 1), repeat=3)
    ]
    model, _ = _free_body("box", pin.Inertia.FromBox(mass, sx, sy, sz), corners, 0.0, sz / 2)
    return model


def box_pinocchio_model(mass: float = 1.0, size=(0.2, 0.1, 0.05)):
    """The Pinocchio model behind `box` (for reference checks)."""
    import pinocchio as pin

    sx, sy, sz = (float(s) for s in size)
    corners = [
        np.array([a * sx, b * sy, c * sz]) / 2 for a, b, c in itertools.product((-1, 1), repeat=3)
    ]
    return _free_body("box", pin.Inertia.FromBox(mass, sx, sy, sz), corners, 0.0, sz / 2)[1]
