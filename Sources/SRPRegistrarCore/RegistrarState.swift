import DNSWire
import NearbyBasics

// The registrar's state in a file, so that a restart keeps first come, first served: a name
// whose key lease has not run out must not be taken by another key because the registrar
// restarted (issue 48). Only the text is made and read here; the shell writes it safely (a
// temporary file renamed over the old one) and reads it at start.
//
// The format is lines of space-separated fields, names and bytes in hexadecimal so that any
// byte of a label (spaces, dots, UTF-8) survives, times as seconds left at `saved`:
//
//     nearby-srp-registrar 1
//     saved <seconds since 1970>
//     host <name> zone <zone> key <KEY RDATA> ttl <s> lease <s left or -> keylease <s left>
//     address <IPv4 or IPv6 text>
//     service <instance> type <type> port <n> priority <n> weight <n> txt <RDATA> ttl <s> [sub <name>]…
//     held <instance>
//     end
//
// Times cross the restart through the wall clock: the machine's own time (a Duration since the
// shell's origin) means nothing to the next process, so the shell passes the wall-clock
// seconds both when saving and when restoring, and the time that passed in between is taken off
// every lease.

extension RegistrarStateMachine {
    /// The first line of a saved state; the number changes with the format.
    public static let stateHeader = "nearby-srp-registrar 1"

    /// The registrations as text, to be restored with ``restore(_:now:wallClock:)``.
    /// - Parameters:
    ///   - now: the machine's time.
    ///   - wallClock: seconds since 1970 at `now`.
    public func savedState(now: Duration, wallClock: UInt64) -> String {
        var lines = [Self.stateHeader, "saved \(wallClock)"]
        for entry in entries.values.sorted(by: { $0.host.name.description < $1.host.name.description }) {
            let host = entry.host
            let lease = entry.leaseExpiry.map { String(Self.secondsLeft(until: $0, now: now)) } ?? "-"
            lines.append(
                "host \(Self.hex(host.name)) zone \(Self.hex(host.zone)) key \(hexString(host.key.rdata)) ttl \(host.ttl) "
                    + "lease \(lease) keylease \(Self.secondsLeft(until: entry.keyExpiry, now: now))")
            for address in host.addresses { lines.append("address \(address)") }
            for service in entry.services.values.sorted(by: { $0.instance.description < $1.instance.description }) {
                var line =
                    "service \(Self.hex(service.instance)) type \(Self.hex(service.serviceType)) port \(service.srv.port) "
                    + "priority \(service.srv.priority) weight \(service.srv.weight) txt \(hexString(service.txt.rdata)) ttl \(service.ttl)"
                for subtype in service.subtypes { line += " sub \(Self.hex(subtype))" }
                lines.append(line)
            }
            for instance in entry.heldInstances.sorted(by: { $0.description < $1.description }) {
                lines.append("held \(Self.hex(instance))")
            }
            lines.append("end")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Takes back a saved state: leases are shortened by the time that passed since it was
    /// saved, what ran out meanwhile is dropped (records) or released (names), and the actions
    /// publish again what is still leased. Everything the machine held before is replaced.
    /// - Throws: ``RegistrarError`` (`damagedState`) when the text is not a saved state; the
    ///   machine is then unchanged.
    public mutating func restore(_ text: String, now: Duration, wallClock: UInt64) throws(RegistrarError) -> [RegistrarAction] {
        let restored = try Self.readState(text, now: now, wallClock: wallClock)
        entries = [:]
        owners = [:]
        var actions: [RegistrarAction] = []
        for var entry in restored {
            if let expiry = entry.leaseExpiry, expiry <= now {
                entry.heldInstances.formUnion(entry.services.keys)
                entry.services = [:]
                entry.leaseExpiry = nil
            }
            guard entry.keyExpiry > now else { continue }
            guard entries[entry.host.name] == nil, !([entry.host.name] + entry.instanceNames).contains(where: { owners[$0] != nil }) else {
                throw RegistrarError(.damagedState, "the saved state gives \(entry.host.name) or one of its names twice")
            }
            entries[entry.host.name] = entry
            for name in [entry.host.name] + entry.instanceNames { owners[name] = entry.host.name }
            if entry.published {
                actions.append(.publishHost(entry.host))
                for service in entry.services.values.sorted(by: { $0.instance.description < $1.instance.description }) {
                    actions.append(.publishService(service))
                }
            }
        }
        return actions
    }

    private static func readState(_ text: String, now: Duration, wallClock: UInt64) throws(RegistrarError) -> [Entry] {
        func damaged(_ why: String, line: Int) -> RegistrarError {
            RegistrarError(.damagedState, "saved registrar state, line \(line): \(why)")
        }
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard lines.first == stateHeader else { throw damaged("not a saved registrar state (no \"\(stateHeader)\")", line: 1) }
        guard lines.count > 1, let saved = field(lines[1], "saved").flatMap({ UInt64($0) }) else {
            throw damaged("no \"saved\" time", line: 2)
        }
        let elapsed = Duration.seconds(Int64(clamping: wallClock >= saved ? wallClock - saved : 0))
        var entries: [Entry] = []
        var current: Entry?
        for (index, line) in lines.enumerated().dropFirst(2) where !line.isEmpty {
            let number = index + 1
            let words = line.split(separator: " ").map(String.init)
            guard let kind = words.first else { continue }
            switch kind {
            case "host":
                guard current == nil else { throw damaged("a host before the previous one's \"end\"", line: number) }
                guard let hostName = name(words, "host"), let zone = name(words, "zone"),
                    let keyBytes = value(words, "key").flatMap(bytes(fromHex:)), let key = KEYData(rdata: keyBytes),
                    let ttl = value(words, "ttl").flatMap({ UInt32($0) }), let leaseText = value(words, "lease"),
                    let keyLease = value(words, "keylease").flatMap({ UInt32($0) })
                else { throw damaged("a host line lacks a field or has one that does not read", line: number) }
                var leaseExpiry: Duration?
                if leaseText != "-" {
                    guard let lease = UInt32(leaseText) else { throw damaged("lease \"\(leaseText)\" is not a number", line: number) }
                    leaseExpiry = now + .seconds(Int64(lease)) - elapsed
                }
                current = Entry(
                    host: SRPHost(name: hostName, zone: zone, addresses: [], key: key, ttl: ttl), services: [:], heldInstances: [],
                    leaseExpiry: leaseExpiry, keyExpiry: now + .seconds(Int64(keyLease)) - elapsed, source: nil)
            case "address":
                guard current != nil, words.count == 2, let address = Self.address(words[1]) else {
                    throw damaged("an address that does not read, or outside a host", line: number)
                }
                current?.host.addresses.append(address)
            case "service":
                guard let entry = current, let instance = name(words, "service"), let type = name(words, "type"),
                    let port = value(words, "port").flatMap({ UInt16($0) }),
                    let priority = value(words, "priority").flatMap({ UInt16($0) }),
                    let weight = value(words, "weight").flatMap({ UInt16($0) }),
                    let txt = value(words, "txt").flatMap(bytes(fromHex:)).flatMap(TXTData.init(rdata:)),
                    let ttl = value(words, "ttl").flatMap({ UInt32($0) })
                else { throw damaged("a service line lacks a field, has one that does not read, or is outside a host", line: number) }
                var subtypes: [DomainName] = []
                var position = 0
                while let at = words[position...].firstIndex(of: "sub") {
                    guard at + 1 < words.count, let subtype = decodeName(words[at + 1]) else {
                        throw damaged("a subtype that does not read", line: number)
                    }
                    subtypes.append(subtype)
                    position = at + 2
                    if position >= words.count { break }
                }
                current?.services[instance] = SRPService(
                    instance: instance, zone: entry.host.zone, serviceType: type, subtypes: subtypes,
                    srv: SRVData(priority: priority, weight: weight, port: port, target: entry.host.name), txt: txt, ttl: ttl)
            case "held":
                guard current != nil, let instance = name(words, "held") else {
                    throw damaged("a held name that does not read, or outside a host", line: number)
                }
                current?.heldInstances.insert(instance)
            case "end":
                guard let entry = current else { throw damaged("\"end\" without a host", line: number) }
                entries.append(entry)
                current = nil
            default:
                throw damaged("unknown line \"\(kind)\"", line: number)
            }
        }
        guard current == nil else { throw damaged("the last host has no \"end\" (a cut-short file)", line: lines.count) }
        return entries
    }

    /// The word after `key` in `words`.
    private static func value(_ words: [String], _ key: String) -> String? {
        guard let index = words.firstIndex(of: key), index + 1 < words.count else { return nil }
        return words[index + 1]
    }

    private static func field(_ line: String, _ key: String) -> String? {
        value(line.split(separator: " ").map(String.init), key)
    }

    private static func name(_ words: [String], _ key: String) -> DomainName? {
        value(words, key).flatMap(decodeName)
    }

    private static func hex(_ name: DomainName) -> String {
        name.isRoot ? "00" : hexString(name.labels.flatMap { [UInt8($0.count)] + $0 } + [0])
    }

    private static func decodeName(_ text: String) -> DomainName? {
        bytes(fromHex: text).flatMap { try? DomainName(wire: $0) }
    }

    private static func address(_ text: String) -> IPAddress? {
        if let v4 = IPv4Address(text) { return .v4(v4) }
        if let v6 = IPv6Address(text) { return .v6(v6) }
        return nil
    }

    /// Whole seconds from `now` to `deadline`, rounded up (a name is held a little long rather
    /// than a little short), 0 when it is past.
    static func secondsLeft(until deadline: Duration, now: Duration) -> UInt32 {
        let left = deadline - now
        guard left > .zero else { return 0 }
        let parts = left.components
        return UInt32(clamping: parts.seconds + (parts.attoseconds > 0 ? 1 : 0))
    }
}
