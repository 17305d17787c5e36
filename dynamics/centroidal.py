"""Centre of mass and centroidal momentum (backend-generic).

    com = sum_i m_i (o_R_i c_i + o_p_i) / sum_i m_i
    h_G = sum_i  shift_to_G( o_M_i . (I_i v_i) )        (world axes, about the com)

`h_G = [linear momentum; angular momentum about the com]`, Pinocchio's `data.hg`.
"""

from __future__ import annotations

from . import spatial
from .kinematics import Kinematics
from .model import Model
from .newton_euler import body_inertias


def center_of_mass(ops, model: Model, kin: Kinematics):
    """World position `(3,)` of the centre of mass."""
    total = 0.0
    weighted = ops.zeros(3)
    for i in range(model.njoints):
        r, p = kin.world_placement[i]
        m = model.body_mass[i]
        weighted = weighted + (ops.mm(r, ops.const(model.body_com[i])) + p) * m
        total = total + m
    return weighted * (1.0 / total)


def centroidal_momentum(ops, model: Model, kin: Kinematics, joint_vel: list):
    """`h_G (6,)`: linear and angular momentum about the com, world axes."""
    inertia = body_inertias(ops, model)
    h_world = ops.zeros(6)
    for i in range(model.njoints):
        h_local = ops.mm(inertia[i], joint_vel[i])
        h_world = h_world + spatial.act_force(ops, kin.world_placement[i], h_local)
    com = center_of_mass(ops, model, kin)
    lin = h_world[0:3]
    return ops.vcat([lin, h_world[3:6] - ops.cross(com, lin)])
