"""Publishes COUNT services through avahi-daemon's D-Bus API from one process (in entry groups
of 30: avahi allows 32 entries per group by default), then waits for SIGTERM/SIGINT. Run it inside a lab host with Tools/lab avahi exec, using the
system python (python3-dbus):  avahi_mass_publish.py COUNT TYPE"""
import signal
import sys

import dbus

count, service_type = int(sys.argv[1]), sys.argv[2]
bus = dbus.SystemBus()
server = dbus.Interface(bus.get_object("org.freedesktop.Avahi", "/"), "org.freedesktop.Avahi.Server")
groups = []
for start in range(1, count + 1, 30):
    group = dbus.Interface(bus.get_object("org.freedesktop.Avahi", server.EntryGroupNew()), "org.freedesktop.Avahi.EntryGroup")
    for index in range(start, min(start + 30, count + 1)):
        # interface -1 and protocol -1: all of them; flags 0; no TXT.
        group.AddService(-1, -1, dbus.UInt32(0), f"Mass {index}", service_type, "", "", dbus.UInt16(10000 + index % 50000), [])
    group.Commit()
    groups.append(group)
print(f"committed {count} in {len(groups)} groups", flush=True)
signal.sigwait({signal.SIGTERM, signal.SIGINT})
for group in groups:
    group.Free()
