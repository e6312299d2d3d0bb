"""ironic-pxe-filter: keeps dnsmasq's --dhcp-hostsdir allow/deny files in step with the database."""
