"""Checks of a solved plan shared by the example and gait tests."""


def assert_contact_converged(traj):
    """Every knot of the plan's last linearisation solved its impulses to the problem's
    tolerance (`Problem.contact_tolerance`), and the solve named no knot as unconverged."""
    meta = traj.meta
    assert meta["unconverged_knots"] == [], meta["unconverged_knots"]
    assert max(meta["knot_contact_residuals"]) <= meta["contact_tolerance"]
