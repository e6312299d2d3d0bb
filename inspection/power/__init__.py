"""Power and boot control of nodes through their BMC (hardware types ``redfish``, ``ipmi``).

:mod:`.drivers` picks a node's BMC client (:mod:`.redfish` on sushy, :mod:`.ipmi` on pyghmi),
:mod:`.pool` bounds and retries the calls, :mod:`.tasks` records pending work on the node
itself, and :mod:`.actor` does that work where inspection data is processed.
"""
