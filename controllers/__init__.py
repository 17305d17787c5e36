"""Controllers: joint PD (and, later, MPC, policies and the hardware interface)."""

from .pd import DEFAULT_GAINS, default_gains, joint_state, pd_torque, standing_controller

__all__ = ["DEFAULT_GAINS", "default_gains", "joint_state", "pd_torque", "standing_controller"]
