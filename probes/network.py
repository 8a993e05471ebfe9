"""network: IB/RoCE ports and their error, pause and discard counters, and TCP retransmits.

A port that went down or keeps retraining drops NCCL's RDMA connections; a lossy cable shows as
symbol errors long before that; on RoCE a slow receiver floods the fabric with PFC pauses. One
script reads the port state and rate (``ibstat``, or ``ibv_devinfo -v`` where ibstat is not
installed), which netdev backs each RDMA device (``ibdev2netdev``, or sysfs), and then takes the
counters TWICE, ``network_sample_interval_s`` apart (params ``interval_s`` or
``network_sample_interval_s`` override it): the IB port counters from
``/sys/class/infiniband/*/ports/*/counters`` (plus ``hw_counters/out_of_buffer``), ``ethtool
-S`` of the netdevs of Ethernet (RoCE) RDMA devices (PFC/global pause, discards, pause-storm
events) and ``TcpRetransSegs`` from /proc/net/snmp. Checks judge the deltas, never the totals
since boot; a counter that went down between the samples was reset and counts from 0.

Which ports must be up: every port that is not Active counts as down, with one exception: an
Ethernet (RoCE) port whose netdev is administratively down (``ip link set down``; IFF_UP clear
in ``/sys/class/net/*/flags``). That is how unused front-end ports sit, and nodes ship that way
(the real 12-CA H100 node in fixtures/real has three such CX6-DX ports, Down/Disabled). A RoCE
port whose netdev is up but has no carrier shows the same Down/Disabled and does count. Where
the flags could not be read, an Ethernet port in physical state Disabled is given the benefit
of the doubt. An InfiniBand port counts as down too (the real B300 node whose seven
ConnectX-8 ports are Down/Disabled), with one exception: the spare port of a multi-port
adapter (``spare_port``): Down/Polling or Down/Disabled, never linked since its counters were
cleared (link_downed, link_error_recovery, port_xmit_data and port_rcv_data all 0) while
another port of the same adapter (the same CA, or the same System image GUID, which the two
functions of a dual-port ConnectX share) is Active: the uncabled second port of a dual-port
HCA (ArchWiki's ibstat example), unless another card of the same type and port count on the
host has the port at that position Active (the host's design uses it: a rail never cabled;
probes/network_spare.py). Two more are excused there: an SR-IOV VF (mlx5 VF device id as its
CA type) not Active on the host that holds its PF (``idle_vf``: unassigned; inside a guest,
with no PF, it counts), and a port never linked that the training processes' NCCL_IB_HCA leaves
out (``job_unused``: no rail of this job). A port with any trace of a past link, or whose
counters were not read, counts. Ports named by the params ``hcas`` (NCCL_IB_HCA syntax) always
count, and a port left out above is still raised when the same port is Active on most hosts of
the fleet.
``ports_down`` counts the ports that are down by this rule, ``ports_admin_down`` the ports
excused.

Rates: an Active port below the fastest port of the same card type, link layer and adapter
form (``adapter_ports``: single-port or dual-port card, since a DGX H100's single-port rails and
dual-port storage cards are the same MT4129 chip) and, for InfiniBand, the same subnet (``SM
lid``: a storage fabric has its own subnet manager) on the host is degraded; a port spared only
by its subnet is compared with the same port on the other hosts; with
``ib_expected_rate_gbit_s`` set, any Active InfiniBand port below it is;
with it at 0, a host whose fastest fabric port is below the majority of the hosts with the same
cards is.
``link_layer`` and ``min_rate_gbit_s`` describe the host's fabric: the link layer most of its
Active ports use, and the slowest Active port of that link layer.

Beyond the counters the checks read, ``port_counters`` holds every IBA counter, every
hw_counters file and every aggregate ethtool counter of every fabric port, as the rise during
the sample and the value at its end, so the fault catalogue can name any counter of NVIDIA's
counter documentation (probes/network_counters.py). An IB error counter at its IBA width
(``saturated``: symbol_error 65535, link_downed 255, ...) cannot show a rise: not measured; so
is a host total whose counter no port has (EFA has hw_counters only, no IBA PortCounters), and
the retransmits of an Active port whose driver publishes none (probes/rdma_counters.py).
"""

from __future__ import annotations

from probes.base import Probe
from probes.network_checks import check, check_fleet
from probes.network_facts import NAME, command, parse

PROBE = Probe(NAME, command, parse, check, check_fleet, timeout_s=60.0)
