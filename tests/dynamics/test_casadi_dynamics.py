"""CasADi dynamics (built from the same generic algorithms) against Pinocchio and against JAX."""

import casadi as ca
import jax
import numpy as np
import pinocchio as pin

import dynamics
from dynamics.casadi_functions import (
    casadi_center_of_mass,
    casadi_forward_dynamics,
    casadi_frame_kinematics,
    casadi_inverse_dynamics,
    casadi_mass_matrix,
)

N = 100


def _rel(ours, ref):
    ours, ref = np.asarray(ours, dtype=float), np.asarray(ref)
    return np.max(np.abs(ours - ref) / (1.0 + np.abs(ref)))


def test_casadi_matches_pinocchio(model, pin_model, random_states):
    q, v, tau = random_states
    data = pin_model.createData()
    # Evaluate all states in one call with CasADi's map (columns are samples).
    fd = casadi_forward_dynamics(model).map(N)
    idyn = casadi_inverse_dynamics(model).map(N)
    qdd = np.asarray(fd(q.T, v.T, tau.T)).T
    tau_id = np.asarray(idyn(q.T, v.T, tau.T)).T
    mass = casadi_mass_matrix(model)
    com = casadi_center_of_mass(model)
    feet = casadi_frame_kinematics(model, model.foot_names)
    for k in range(N):
        assert _rel(qdd[k], pin.aba(pin_model, data, q[k], v[k], tau[k])) < 1e-9
        assert _rel(tau_id[k], pin.rnea(pin_model, data, q[k], v[k], tau[k])) < 1e-9
    for k in range(10):
        m_ref = pin.crba(pin_model, data, q[k])
        m_ref = np.triu(m_ref) + np.triu(m_ref, 1).T
        assert _rel(mass(q[k]), m_ref) < 1e-9
        assert _rel(np.asarray(com(q[k])).ravel(), pin.centerOfMass(pin_model, data, q[k])) < 1e-9
        pos, jac = feet(q[k])
        pin.computeJointJacobians(pin_model, data, q[k])
        pin.updateFramePlacements(pin_model, data)
        for j, f in enumerate(model.foot_names):
            fid = pin_model.getFrameId(f)
            assert _rel(np.asarray(pos)[j], data.oMf[fid].translation) < 1e-9
            ref_j = pin.getFrameJacobian(pin_model, data, fid, pin.LOCAL_WORLD_ALIGNED)
            assert _rel(np.asarray(jac)[6 * j : 6 * j + 6], ref_j) < 1e-9


def test_casadi_jacobians_match_jax(model, random_states):
    """d qdd / d(q, v, tau) in raw coordinates: CasADi's symbolic AD vs JAX's jacfwd (the three
    Jacobians from one compiled program and one CasADi function)."""
    q, v, tau = (x[:5] for x in random_states)
    fd = casadi_forward_dynamics(model)
    sym = [ca.SX.sym("q", model.nq), ca.SX.sym("v", model.nv), ca.SX.sym("tau", model.nv)]
    jac_fn = ca.Function("dqdd", sym, [ca.jacobian(fd(*sym), s) for s in sym])
    jax_jac = jax.jit(
        jax.vmap(jax.jacfwd(lambda *a: dynamics.forward_dynamics(model, *a), argnums=(0, 1, 2)))
    )
    ours = [np.asarray(j) for j in jax_jac(q, v, tau)]
    for k in range(len(q)):
        for argument, cas in enumerate(jac_fn(q[k], v[k], tau[k])):
            cas = np.asarray(cas)
            scale = np.max(np.abs(ours[argument][k]))
            assert np.max(np.abs(cas - ours[argument][k])) / scale < 1e-9, argument
