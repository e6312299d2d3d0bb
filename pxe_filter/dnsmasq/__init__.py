"""The dnsmasq that serves inspection PXE: its options, configuration rendering and control.

``ironic-pxe-filter render-dnsmasq-config`` writes dnsmasq's configuration from
``[dnsmasq]`` (:mod:`~pxe_filter.dnsmasq.config`); the daemon never rewrites it, it only
starts, reloads and restarts dnsmasq (:mod:`~pxe_filter.dnsmasq.control`).
"""
