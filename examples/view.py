"""Open a saved trajectory or a deployment log in the browser (Meshcat), export an HTML replay,
plot it.

    python examples/view.py results/trot_go2.npz                      # browser, Ctrl-C to stop
    python examples/view.py results/trot_go2.npz --speed 0.5 --loop
    python examples/view.py results/trot_go2.npz --headless --export-html replay.html --plots
    python examples/view.py results/trot_go2.npz --zmq-url tcp://127.0.0.1:6000
    python examples/view.py --log runs/deploy_go2_mpc_<time>          # a deployment's log
    python examples/view.py --log runs/deploy_go2_mpc_<time> --truth --no-viewer

`--log FOLDER` (`hardware.deployment_log`, written by `examples/deploy_go2.py`) replays the run
with the base pose from the estimate (`--truth`: the simulator's ground truth) and writes its
plots into the folder (`viz.deployment_plots`: estimated against true base velocity and
height with the RMS errors in the titles, the foot forces); it prints the RMS errors.

The viewer serves on 127.0.0.1 and prints its URL. With a browser it keeps serving until
Ctrl-C; with `--headless` (no browser) it shows the trajectory and exits unless `--hold`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import viz
from hardware.deployment_log import DeploymentLog
from trajopt.trajectory import Trajectory
from viz import deployment_plots


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("result", nargs="?", help="saved trajectory (path.npz or its stem)")
    parser.add_argument("--log", metavar="FOLDER", help="a deployment log folder instead")
    parser.add_argument(
        "--truth",
        action="store_true",
        help="--log: replay the ground-truth base pose, not the estimate",
    )
    parser.add_argument("--every", type=int, default=10, help="--log: ticks per replay frame")
    parser.add_argument("--export-html", metavar="PATH", help="write a self-contained replay")
    parser.add_argument("--plots", action="store_true", help="save PNG plots next to the result")
    parser.add_argument("--speed", type=float, default=1.0, help="playback speed (0.5: half)")
    parser.add_argument("--loop", action="store_true", help="repeat the replay for ever")
    parser.add_argument("--no-ghost", action="store_true", help="hide the reference motion")
    parser.add_argument("--headless", "--no-browser", action="store_true", dest="headless")
    parser.add_argument("--no-viewer", action="store_true", help="no Meshcat server at all")
    parser.add_argument("--hold", action="store_true", help="keep serving until Ctrl-C")
    parser.add_argument("--zmq-url", help="draw into a running Meshcat server")
    parser.add_argument("--port", type=int, default=None, help="web port (0: any free port)")
    parser.add_argument("--zmq-port", type=int, default=None, help="zmq port (0: any free)")
    args = parser.parse_args(argv)
    if (args.result is None) == (args.log is None):
        parser.error("give a saved trajectory or --log FOLDER (one of them)")

    out = {"plots": [], "html": None, "url": None, "errors": None}
    ghost = None if args.no_ghost else "reference"
    if args.log is not None:
        traj = view_log(args.log, out, truth=args.truth, every=args.every)
    else:
        traj = Trajectory.load(args.result)
        stem = args.result[:-4] if args.result.endswith(".npz") else args.result
        if args.plots:
            folder, prefix = os.path.split(os.path.abspath(stem))
            out["plots"] = viz.plot_trajectory(traj, folder, prefix=prefix)
    if out["plots"]:
        print(f"plots: {', '.join(out['plots'])}")
    if args.export_html:
        out["html"] = viz.export_html(
            traj, args.export_html, ghost=ghost, speed=args.speed, loop=args.loop
        )
        size = os.path.getsize(out["html"]) / 1e6
        print(
            f"HTML replay: {os.path.abspath(out['html'])} ({size:.1f} MB, opens without a server)"
        )
    if args.no_viewer:
        return out
    try:
        viewer = viz.view(
            traj,
            zmq_url=args.zmq_url,
            port=args.port,
            zmq_port=args.zmq_port,
            ghost=ghost,
            speed=args.speed,
            loop=args.loop,
        )
    except viz.MeshcatServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    out["url"] = viewer.url
    browser = False if args.headless else viewer.open_browser()
    hold = args.hold or (browser and args.zmq_url is None)
    try:
        if hold:
            print("serving; Ctrl-C to stop")
            while True:
                time.sleep(1.0)
    except KeyboardInterrupt:
        pass
    finally:
        viewer.close()
    return out


def view_log(folder: str, out: dict, *, truth: bool, every: int) -> Trajectory:
    """The plots of a deployment log (into `out`), its RMS errors printed; returns the run as
    a trajectory to replay (the base from the estimate, or the truth with `truth`)."""
    run = DeploymentLog.load(folder)
    out["plots"] = deployment_plots.plot_deployment(run, folder, prefix="deployment")
    out["errors"] = deployment_plots.base_state_errors(run)
    state = "complete" if run.complete else "interrupted (what was written)"
    print(f"log {folder}: {len(run)} ticks, {state}, controller {run.header.get('controller')}")
    if out["errors"]:
        print(
            "estimate against the truth, RMS: "
            + ", ".join(
                f"{k} {v:.4f} {'m' if k == 'height' else 'm/s'}" for k, v in out["errors"].items()
            )
        )
    else:
        print("no estimate against a ground truth in this log")
    return deployment_plots.log_trajectory(run, "truth" if truth else "estimate", every)


if __name__ == "__main__":
    main()
