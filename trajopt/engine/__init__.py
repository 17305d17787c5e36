"""The engine behind `trajopt.solve`: what a user of the toolkit does not call directly.

    knot_model        the `KnotModel` contract: what a shooting solver calls on the knots of one
                      problem structure (Crocoddyl's action models: calc, calcDiff, and the
                      passes over the horizon)
    jax_knots         its JAX implementation (jitted, vmappable, differentiable)
    compiled_knots    its C implementation (CasADi-generated code, gcc-built), with
    compiled_iteration, compiled_riccati, c_kernels, *.c   the hand-written C kernels
    casadi_model, casadi_knots, generated_code   the symbolic knots, their code and its build
    knot_backends     the backend of a problem structure, chosen and cached
    shooting, riccati, fddp_step, fddp   the shooting model, the Riccati pass, one FDDP
                      iteration and the solver loop with its typed result
    compile_cache, program_cache, fingerprint   on-disk caches and the keys they use

The user's surface stays in `trajopt`: problems (`trajopt.problem`, `trajopt.gaits`, terms),
`trajopt.solve`, trajectories, replays and the batched and IPOPT solvers.
"""
