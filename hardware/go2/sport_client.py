"""Clients of the Go2's services (JSON over `unitree_api` Request_ / Response_), and the sport
service's StandDown.

    client = ServiceClient(participant, "rt/api/sport")      # any service
    code, data = client.call(API_STAND_DOWN)
    SportClient(participant).stand_down()                    # 0: the robot lies down

A service listens on `<service>/request` and answers on `<service>/response`: a request carries
an identity (a fresh id, the API id), a lease and a policy, and a JSON `parameter`; the answer
carries the same identity, a status code (0 on success) and JSON `data`. Unitree SDK 2 calls
this `Client::_Call`; its codes are in `RPC_*` below (`unitree_sdk2py/rpc/internal.py`).

The sport service (`rt/api/sport`, Unitree's "sport" service) runs the robot's own locomotion
controller while the motion switcher has a mode active (`motion_switcher`); StandDown (API id
1005) makes it lay the robot down, which Unitree's low-level examples do before releasing the
mode. Once released, the service is gone and nothing answers: the call then ends with
`RPC_ERR_CLIENT_API_TIMEOUT` (3104), the code Unitree's client returns for a request nobody
answered.
"""

from __future__ import annotations

import itertools
import json
import time

from . import messages as msgs
from .dds import make_reader, make_writer, take

SPORT = "rt/api/sport"  # + "/request", "/response"
API_STAND_DOWN = 1005  # SPORT_API_ID_STANDDOWN
RPC_OK = 0
RPC_ERR_CLIENT_API_TIMEOUT = 3104  # no answer within the client's timeout
RPC_ERR_SERVER_API_NOT_IMPL = 3203  # the service does not know the API id


class ServiceClient:
    """Requests to one service (`service` + "/request") and its answers (+ "/response").

    timeout: [s] how long `call` waits for the answer to its request."""

    _ids = itertools.count(int(time.time() * 1e3))  # unique across clients of this process

    def __init__(self, participant, service: str, timeout: float = 1.0):
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0 s, got {timeout}")
        self.service = service
        self.timeout = float(timeout)
        self._writer = make_writer(participant, f"{service}/request", msgs.Request_)
        # reliable (against the services' reliable writers): no answer lost to discovery
        self._reader = make_reader(participant, f"{service}/response", msgs.Response_, 8, True)
        self._matched = False  # discovery found the service's reader and writer

    def call(self, api_id: int, parameter: dict | None = None) -> tuple[int, dict | None]:
        """`(status code, decoded data or None)` of the answer to a fresh request; raises
        TimeoutError when none came within `timeout`."""
        rid = next(self._ids)
        header = msgs.RequestHeader_(
            msgs.RequestIdentity_(rid, api_id), msgs.RequestLease_(0), msgs.RequestPolicy_(0, False)
        )
        deadline = time.perf_counter() + self.timeout
        self._wait_for_service(deadline)
        self._writer.write(msgs.Request_(header, json.dumps(parameter or {}), []))
        while time.perf_counter() < deadline:
            for response in take(self._reader, msgs.Response_):
                if int(response.header.identity.id) == rid:
                    data = json.loads(response.data) if response.data else None
                    return int(response.header.status.code), data
            time.sleep(0.005)
        raise TimeoutError(f"no answer from {self.service} to API {api_id} in {self.timeout} s")

    def _wait_for_service(self, deadline: float) -> None:
        """Wait until the request writer and the response reader have matched the service's
        (DDS discovery takes a moment after they are created: a request written before it
        is lost), at most until `deadline` (then the call times out unanswered)."""
        from cyclonedds.core import DDSStatus

        while not self._matched and time.perf_counter() < deadline:
            writer = self._writer.get_status_changes() & DDSStatus.PublicationMatched
            reader = self._reader.get_status_changes() & DDSStatus.SubscriptionMatched
            self._matched = bool(writer and reader)
            if not self._matched:
                time.sleep(0.002)

    def call_code(self, api_id: int, parameter: dict | None = None) -> int:
        """The status code of `call`, `RPC_ERR_CLIENT_API_TIMEOUT` when nothing answered (as
        Unitree's client returns it)."""
        try:
            return self.call(api_id, parameter)[0]
        except TimeoutError:
            return RPC_ERR_CLIENT_API_TIMEOUT


class SportClient(ServiceClient):
    """The sport service's client; only what releasing the sport mode needs."""

    def __init__(self, participant, timeout: float = 1.0):
        super().__init__(participant, SPORT, timeout)

    def stand_down(self) -> int:
        """StandDown (1005): the sport controller lays the robot down. 0 on success, the
        service's error code, or `RPC_ERR_CLIENT_API_TIMEOUT` without a sport service."""
        return self.call_code(API_STAND_DOWN)
