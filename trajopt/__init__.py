"""Trajectory optimisation (shooting solvers, costs, gait library)."""
