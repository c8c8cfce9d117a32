"""Publishes COUNT services through avahi-daemon's D-Bus API from one process (in entry groups
of 30: avahi allows 32 entries per group by default), then waits for SIGTERM/SIGINT. Run it inside a lab host with Tools/lab avahi exec, using the
system python (python3-dbus):  avahi_mass_publish.py COUNT TYPE [--prefix "Mass "] [--hosts ADDRESS]

--prefix names the instances PREFIX1 .. PREFIXCOUNT (default "Mass ").
--hosts ADDRESS gives each service a host of its own, as an SRP registrar's registrations have:
service i on host PREFIX-i.local (lower case, spaces as dashes) with an A record ADDRESS (no
reverse PTR, so the hosts may share it); a service and its address are two entries, so 15
services to a group."""
import signal
import sys

import dbus

arguments = sys.argv[1:]
prefix, host_address = "Mass ", None
while "--prefix" in arguments or "--hosts" in arguments:
    for option in ("--prefix", "--hosts"):
        if option in arguments:
            at = arguments.index(option)
            value = arguments[at + 1]
            del arguments[at:at + 2]
            if option == "--prefix":
                prefix = value
            else:
                host_address = value
count, service_type = int(arguments[0]), arguments[1]
per_group = 15 if host_address else 30
NO_REVERSE = 16  # AVAHI_PUBLISH_NO_REVERSE
bus = dbus.SystemBus()
server = dbus.Interface(bus.get_object("org.freedesktop.Avahi", "/"), "org.freedesktop.Avahi.Server")
groups = []
for start in range(1, count + 1, per_group):
    group = dbus.Interface(bus.get_object("org.freedesktop.Avahi", server.EntryGroupNew()), "org.freedesktop.Avahi.EntryGroup")
    for index in range(start, min(start + per_group, count + 1)):
        host = ""
        if host_address:
            host = f"{prefix.strip().lower().replace(' ', '-')}-{index}.local"
            group.AddAddress(-1, -1, dbus.UInt32(NO_REVERSE), host, host_address)
        # interface -1 and protocol -1: all of them; flags 0; no TXT.
        group.AddService(-1, -1, dbus.UInt32(0), f"{prefix}{index}", service_type, "", host, dbus.UInt16(10000 + index % 50000), [])
    group.Commit()
    groups.append(group)
print(f"committed {count} in {len(groups)} groups", flush=True)
signal.sigwait({signal.SIGTERM, signal.SIGINT})
for group in groups:
    group.Free()
