"""Cyclone DDS set-up for the Go2's topics, shared by the client (`robot`, `motion_switcher`)
and the simulated Go2 (`sim`): the domain and its participant on a chosen network interface,
the topic names, readers and writers.

    domain, participant = open_domain(1, "lo")      # keep both alive
    writer = make_writer(participant, TOPIC_LOWCMD, messages.LowCmd_)
    reader = make_reader(participant, TOPIC_LOWSTATE, messages.LowState_)
    states = take(reader, messages.LowState_)      # oldest first
    serialized = take_serialized(reader)           # the same, as bytes (`packed` decodes them)
    write_serialized(writer, packer.pack(command))

Domains: the robot 0 (on the wired network card), `unitree_mujoco` 1 (`lo`), our simulated Go2
any. Readers are polled (`take`), never listeners. Cyclone DDS is imported when a function is
called (the `go2` extra).
"""

from __future__ import annotations

TOPIC_LOWCMD, TOPIC_LOWSTATE, TOPIC_SPORTSTATE = "rt/lowcmd", "rt/lowstate", "rt/sportmodestate"
TOPIC_STEP = "rt/diffloco/step"  # lockstep with our simulated Go2 only (`LockstepGo2Robot`)
MOTION_SWITCHER = "rt/api/motion_switcher"  # + "/request", "/response"


def dds_config(interface: str | None) -> str:
    """Cyclone DDS configuration XML: the named network interface (`lo`, `eth0`, ...) or, with
    None, the one Cyclone picks."""
    if interface is None:
        nic = '<NetworkInterface autodetermine="true" priority="default" multicast="default"/>'
    else:
        nic = f'<NetworkInterface name="{interface}" priority="default" multicast="default"/>'
    return (
        '<?xml version="1.0" encoding="UTF-8" ?><CycloneDDS><Domain Id="any"><General>'
        f"<Interfaces>{nic}</Interfaces></General></Domain></CycloneDDS>"
    )


def open_domain(domain: int, interface: str | None):
    """`(Domain, DomainParticipant)` on DDS domain `domain` over `interface` (keep both alive)."""
    from cyclonedds.domain import Domain, DomainParticipant

    return Domain(int(domain), dds_config(interface)), DomainParticipant(int(domain))


def make_writer(participant, topic: str, cls):
    from cyclonedds.pub import DataWriter
    from cyclonedds.topic import Topic

    return DataWriter(participant, Topic(participant, topic, cls))


def make_reader(participant, topic: str, cls, depth: int = 1, reliable: bool = False):
    """A reader keeping the newest `depth` samples; `take(reader, cls)` polls it.

    Polled, not a listener: Cyclone calls listeners from its own threads holding its locks,
    and a Python callback waiting for the GIL there deadlocked a process that was deleting
    an entity (seen once in the tests)."""
    from cyclonedds.qos import Policy, Qos
    from cyclonedds.sub import DataReader
    from cyclonedds.topic import Topic

    policies = [Policy.History.KeepLast(depth)]
    if reliable:  # only against reliable writers (Cyclone's default, and the SDK's)
        policies.append(Policy.Reliability.Reliable(max_blocking_time=0))
    qos = Qos(*policies)
    return DataReader(participant, Topic(participant, topic, cls), qos=qos)


def take(reader, cls, n: int = 64) -> list:
    """The samples waiting in `reader` (oldest first); dispose/unregister notices dropped."""
    return [s for s in reader.take(n) if isinstance(s, cls)]


def take_serialized(reader, n: int = 64) -> list:
    """The serialized samples (bytes: encapsulation header, then body) waiting in `reader`,
    oldest first, dispose/unregister notices dropped: what `take` would deserialize. Calls
    Cyclone's C layer on the reader's handle (`cyclonedds==0.10.2`, as `DataReader.take`)."""
    from cyclonedds._clayer import ddspy_take
    from cyclonedds.core import DDSException

    samples = ddspy_take(reader._ref, n)
    if isinstance(samples, int):
        raise DDSException(samples, f"Occurred while taking data in {reader!r}")
    return [data for data, info in samples if info.valid_data]


def write_serialized(writer, data: bytes) -> None:
    """Write a sample already serialized as `writer`'s type (header, body, padded to whole
    words: `DataWriter.write` does the same after serializing), through Cyclone's C layer on
    the writer's handle (`cyclonedds==0.10.2`)."""
    from cyclonedds._clayer import ddspy_write
    from cyclonedds.core import DDSException

    ret = ddspy_write(writer._ref, data)
    if ret < 0:
        raise DDSException(ret, f"Occurred while writing sample in {writer!r}")
