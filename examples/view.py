"""Open a saved trajectory in the browser (Meshcat), export an HTML replay, plot it.

    python examples/view.py results/trot_go2.npz                      # browser, Ctrl-C to stop
    python examples/view.py results/trot_go2.npz --speed 0.5 --loop
    python examples/view.py results/trot_go2.npz --headless --export-html replay.html --plots
    python examples/view.py results/trot_go2.npz --zmq-url tcp://127.0.0.1:6000

The viewer serves on 127.0.0.1 and prints its URL. With a browser it keeps serving until
Ctrl-C; with `--headless` (no browser) it shows the trajectory and exits unless `--hold`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import viz
from trajopt.trajectory import Trajectory


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("result", help="saved trajectory (path.npz or its stem)")
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

    traj = Trajectory.load(args.result)
    stem = args.result[:-4] if args.result.endswith(".npz") else args.result
    ghost = None if args.no_ghost else "reference"
    out = {"plots": [], "html": None, "url": None}
    if args.plots:
        folder, prefix = os.path.split(os.path.abspath(stem))
        out["plots"] = viz.plot_trajectory(traj, folder, prefix=prefix)
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


if __name__ == "__main__":
    main()
