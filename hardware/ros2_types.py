"""ROS 2 messages on DDS without ROS: `geometry_msgs/Twist` as ROS 2 puts it on the wire, the
ROS 2 topic naming rule, and a `cmd_vel` reader feeding `hardware.steering.CmdVelSource`.

    domain, participant = dds.open_domain(0, "eth0")
    reader = CmdVelReader(participant, CmdVelSource(box))      # ROS 2 topic /cmd_vel
    command = reader(t)                                        # polls, then the source's command

How ROS 2 maps onto DDS (its design article "Topic and Service name mapping to DDS", and
rmw_cyclonedds / rmw_fastrtps, which implement it):
- topics: the fully qualified ROS name with the prefix "rt" (`ros2_topic`: "cmd_vel" in the
  root namespace is "/cmd_vel", the DDS topic "rt/cmd_vel"; "rq"/"rr" are service requests and
  replies, not used here);
- types: `pkg/msg/Type` is the DDS type `pkg::msg::dds_::Type_` (rosidl's IDL: a module
  `dds_`, a trailing underscore), so `geometry_msgs::msg::dds_::Twist_`, fields in the .msg
  order, `float64` a double, plain CDR. The dataclasses below declare exactly that (Cyclone DDS's
  Python binding writes `typename`'s dots as "::"), @final with sequential ids like the Unitree
  types in `hardware.go2.messages` (the same rosidl-generated layout);
- the domain is `ROS_DOMAIN_ID` (default 0); since ROS 2 Dashing namespaces are in the topic
  name, not in DDS partitions.
So a `ros2 topic pub /cmd_vel geometry_msgs/msg/Twist ...` (or teleop_twist_keyboard, or Nav2's
controller) on the same domain and network reaches `CmdVelReader`, and our writer reaches
ROS 2 subscribers. The reader is best-effort, keep-last: it matches reliable and best-effort
publishers (ROS 2's default publisher is reliable).

Needs `cyclonedds` (the go2 extra). No `from __future__ import annotations` here: Cyclone DDS
reads the field types at run time.
"""

import re
from dataclasses import dataclass

from cyclonedds.idl import IdlStruct, types
from cyclonedds.idl import annotations as annotate

from .go2.dds import make_reader, take

ROS_TOPIC_PREFIX = "rt"  # DDS topic of a ROS 2 topic: "rt" + its fully qualified name
_ROS_NAME = re.compile(r"^/?[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*$")


@dataclass
@annotate.final
@annotate.autoid("sequential")
class Vector3_(IdlStruct, typename="geometry_msgs.msg.dds_.Vector3_"):
    """geometry_msgs/msg/Vector3: x, y, z (float64)."""

    x: types.float64
    y: types.float64
    z: types.float64


@dataclass
@annotate.final
@annotate.autoid("sequential")
class Twist_(IdlStruct, typename="geometry_msgs.msg.dds_.Twist_"):
    """geometry_msgs/msg/Twist: `linear` [m/s], `angular` [rad/s], in the body frame (REP 103:
    x forward, y left, z up)."""

    linear: Vector3_
    angular: Vector3_


def twist(vx=0.0, vy=0.0, yaw_rate=0.0) -> Twist_:
    """A Twist_ of a planar base velocity: linear (vx, vy, 0) [m/s], angular (0, 0, yaw_rate)
    [rad/s]."""
    return Twist_(Vector3_(float(vx), float(vy), 0.0), Vector3_(0.0, 0.0, float(yaw_rate)))


def ros2_topic(name: str, namespace: str = "/") -> str:
    """The DDS topic of ROS 2 topic `name` in `namespace`: "rt" + the fully qualified name
    (`ros2_topic("cmd_vel") == ros2_topic("/cmd_vel") == "rt/cmd_vel"`,
    `ros2_topic("cmd_vel", "/go2") == "rt/go2/cmd_vel"`). An absolute `name` ignores
    `namespace`. ValueError for a name ROS 2 would refuse (empty, a trailing or doubled "/",
    characters other than letters, digits and "_", a token starting with a digit; "~" and
    substitutions are not supported)."""
    for label, value in (("name", name), ("namespace", namespace)):
        if not isinstance(value, str):
            raise ValueError(f"ROS 2 topic {label} must be a string, got {value!r}")
    if namespace != "/" and not (namespace.startswith("/") and _ROS_NAME.match(namespace)):
        raise ValueError(f"ROS 2 namespace must be '/' or like '/robot', got {namespace!r}")
    if not _ROS_NAME.match(name):
        raise ValueError(f"not a valid ROS 2 topic name: {name!r} (e.g. 'cmd_vel', '/a/b')")
    if name.startswith("/"):
        full = name
    else:
        full = f"{namespace.rstrip('/')}/{name}"
    return ROS_TOPIC_PREFIX + full


class CmdVelReader:
    """ROS 2 `cmd_vel` (geometry_msgs/Twist on `ros2_topic(topic)`) into a
    `hardware.steering.CmdVelSource`: each call polls the DDS reader (`poll`) and feeds every
    Twist that arrived to `source.submit` with its local receive time, then returns
    `source(t)`. A command source itself (`reader(t)`, `reset()`, `counters`, `command`).

    Receive times are on `source.clock` (the clock of its timeout). A sample taken at a poll
    arrived after the previous poll (or this reader's creation): it is stamped with that
    earlier time, the oldest it can be, so Twists that waited in the reader while nobody
    polled (a stalled loop) count as old, never as fresh; polled at each controller call
    (20 ms) the stamps are at most that much too old.

    participant: a Cyclone DDS DomainParticipant (e.g. `Go2Robot.participant`: the robot's
    domain and network interface); topic: the ROS 2 topic name; depth: samples kept between
    polls."""

    def __init__(self, participant, source, topic: str = "cmd_vel", depth: int = 8):
        self.topic = ros2_topic(topic)
        self.source = source
        self.reader = make_reader(participant, self.topic, Twist_, depth=int(depth))
        self.polls = 0
        self.polled_at = source.clock()  # the earliest receive time of the next samples

    def poll(self) -> int:
        """Feed the Twists waiting in the reader to the source (oldest first); returns how
        many. Nothing after `close`."""
        if self.reader is None:
            return 0
        now = self.source.clock()
        samples = take(self.reader, Twist_)
        self.polls += 1
        for s in samples:
            linear = (s.linear.x, s.linear.y, s.linear.z)
            angular = (s.angular.x, s.angular.y, s.angular.z)
            self.source.submit(linear, angular, self.polled_at)
        self.polled_at = now
        return len(samples)

    def __call__(self, t: float):
        self.poll()
        return self.source(t)

    def reset(self) -> None:
        self.source.reset()

    @property
    def counters(self) -> dict:
        return dict(self.source.counters)

    @property
    def command(self):
        return self.source.command

    def close(self) -> None:
        """Drop the DDS reader (Cyclone deletes it with its last reference)."""
        self.reader = None
