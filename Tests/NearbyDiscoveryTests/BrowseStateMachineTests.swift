import DNSWire
import MulticastDNS
import Testing

@testable import NearbyDiscovery

/// The browse/resolve state machine driven by hand: observations in batches, a manual clock
/// (plain `Duration`s), and the exact actions it answers with. No threads, no sleeping, no I/O.
@Suite("browse state machine")
struct BrowseStateMachineTests {
    typealias Action = BrowseStateMachine.Action
    typealias Observation = DiscoveryObservation

    let type = try! ServiceType(parsing: "_openagents._tcp")
    let lan1 = NetworkInterface(index: 2, name: "lan1")
    let lan2 = NetworkInterface(index: 3, name: "lan2")
    let box = try! DomainName(parsing: "Box._openagents._tcp.local.")
    let relay = try! DomainName(parsing: "Relay._openagents._tcp.local.")
    let boxHost = try! DomainName(parsing: "buildbox.local.")
    let otherHost = try! DomainName(parsing: "otherbox.local.")
    let txtA = try! TXTData(strings: [Array("v=1".utf8)])
    let txtB = try! TXTData(strings: [Array("v=2".utf8)])
    let v4 = IPAddress.v4(IPv4Address(198, 18, 1, 3))
    let v4b = IPAddress.v4(IPv4Address(198, 18, 1, 4))
    let v4lan2 = IPAddress.v4(IPv4Address(198, 18, 2, 3))
    /// fe80::1 on lan1 (index 2), as the embedded source hands it over.
    let v6 = IPAddress.v6(IPv6Address(bytes: [0xFE, 0x80] + [UInt8](repeating: 0, count: 13) + [1])!, scope: 2)
    let daemonGone = DiscoveryError(.daemonNotRunning, "the daemon went away")

    // MARK: Helpers

    var srv: SRVData { SRVData(port: 9099, target: boxHost) }

    func ms(_ value: Int) -> Duration { .milliseconds(value) }

    func browser(resolve: Bool = true, settle: Duration = .zero) -> BrowseStateMachine {
        BrowseStateMachine(type: type, mode: .browse(resolve: resolve), settleTime: settle)
    }

    func service(_ instance: String = "Box", on interface: NetworkInterface) -> DiscoveredService {
        DiscoveredService(name: instance, type: type, interface: interface)
    }

    func resolved(
        _ instance: String = "Box", on interface: NetworkInterface, host: DomainName? = nil, port: UInt16 = 9099,
        addresses: [IPAddress]? = nil, txt: TXTData? = nil
    ) -> ResolvedService {
        ResolvedService(
            service: service(instance, on: interface), host: host ?? boxHost, port: port, addresses: addresses ?? [v4],
            info: DiscoveryInfo(txt ?? txtA))
    }

    func found(_ resolution: ResolvedService) -> Action { .report(.found(resolution.service, resolution)) }
    func updated(_ resolution: ResolvedService) -> Action { .report(.updated(resolution.service, resolution)) }
    func lost(_ instance: String = "Box", on interface: NetworkInterface) -> Action {
        .report(.lost(service(instance, on: interface)))
    }

    /// SRV, TXT and addresses of `name` on `interface` (the additional records of a PTR answer).
    func records(
        _ name: DomainName, on interface: NetworkInterface, srv: SRVData? = nil, txt: TXTData? = nil,
        addresses: [IPAddress]? = nil
    ) -> [Observation] {
        let srv = srv ?? self.srv
        return [.srvAdded(name, interface, srv), .txtAdded(name, interface, txt ?? txtA)]
            + (addresses ?? [v4]).map { Observation.addressAdded(srv.target, interface, $0) }
    }

    /// A browse (resolving) that has found Box on `interface` from one packet.
    func resolvedBox(on interface: NetworkInterface, settle: Duration = .zero) throws -> BrowseStateMachine {
        var machine = browser(settle: settle)
        _ = machine.start(at: .zero)
        _ = machine.handle([.instanceAdded(box, interface)] + records(box, on: interface), at: .zero)
        if settle > .zero { _ = machine.advance(to: settle) }
        try #require(machine.nextDeadline == nil)
        return machine
    }

    func expect(_ actual: [Action], _ expected: [Action], sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(actual == expected, sourceLocation: sourceLocation)
    }

    // MARK: 1. Every order in which records can arrive

    @Test("browse start issues nothing")
    func browseStartsQuietly() {
        var machine = browser()
        expect(machine.start(at: .zero), [])
        #expect(machine.nextDeadline == nil)
    }

    @Test("SRV, TXT and addresses in the same batch as the PTR: both watches, then found")
    func additionalRecordsWithPTR() {
        var machine = browser()
        _ = machine.start(at: .zero)
        let actions = machine.handle([.instanceAdded(box, lan1)] + records(box, on: lan1), at: ms(5))
        expect(actions, [.watch(.service(box, lan1)), .watch(.host(boxHost, lan1)), found(resolved(on: lan1))])
        #expect(machine.nextDeadline == nil)
    }

    @Test("additional records before the PTR in the same batch: found all the same")
    func additionalRecordsBeforePTRInBatch() {
        var machine = browser()
        let actions = machine.handle(records(box, on: lan1) + [.instanceAdded(box, lan1)], at: .zero)
        expect(actions, [.watch(.service(box, lan1)), .watch(.host(boxHost, lan1)), found(resolved(on: lan1))])
    }

    @Test("PTR first, then SRV, TXT and address in later batches: found with the last one")
    func ptrFirstThenRecords() {
        var machine = browser()
        expect(machine.handle([.instanceAdded(box, lan1)], at: ms(0)), [.watch(.service(box, lan1))])
        expect(machine.handle([.srvAdded(box, lan1, srv)], at: ms(1)), [.watch(.host(boxHost, lan1))])
        expect(machine.handle([.txtAdded(box, lan1, txtA)], at: ms(2)), [])
        expect(machine.handle([.addressAdded(boxHost, lan1, v4)], at: ms(3)), [found(resolved(on: lan1))])
    }

    @Test("PTR last, after SRV, TXT and address came in an earlier batch: watches and found at once")
    func ptrLast() {
        var machine = browser()
        expect(machine.handle(records(box, on: lan1), at: ms(0)), [])
        let actions = machine.handle([.instanceAdded(box, lan1)], at: ms(1))
        expect(actions, [.watch(.service(box, lan1)), .watch(.host(boxHost, lan1)), found(resolved(on: lan1))])
    }

    @Test("SRV before TXT: host watched on the SRV, found on the TXT")
    func srvBeforeTXT() {
        var machine = browser()
        _ = machine.handle([.instanceAdded(box, lan1)], at: ms(0))
        expect(machine.handle([.srvAdded(box, lan1, srv)], at: ms(1)), [.watch(.host(boxHost, lan1))])
        expect(machine.handle([.addressAdded(boxHost, lan1, v4)], at: ms(2)), [])
        expect(machine.handle([.txtAdded(box, lan1, txtA)], at: ms(3)), [found(resolved(on: lan1))])
    }

    @Test("TXT before SRV: nothing on the TXT, host watched on the SRV, found on the address")
    func txtBeforeSRV() {
        var machine = browser()
        _ = machine.handle([.instanceAdded(box, lan1)], at: ms(0))
        expect(machine.handle([.txtAdded(box, lan1, txtA)], at: ms(1)), [])
        expect(machine.handle([.srvAdded(box, lan1, srv)], at: ms(2)), [.watch(.host(boxHost, lan1))])
        expect(machine.handle([.addressAdded(boxHost, lan1, v4)], at: ms(3)), [found(resolved(on: lan1))])
    }

    @Test("addresses before the SRV that names the host: kept, and found with the SRV")
    func addressesBeforeSRV() {
        var machine = browser()
        _ = machine.handle([.instanceAdded(box, lan1)], at: ms(0))
        expect(machine.handle([.addressAdded(boxHost, lan1, v4)], at: ms(1)), [])
        expect(machine.handle([.txtAdded(box, lan1, txtA)], at: ms(2)), [])
        expect(machine.handle([.srvAdded(box, lan1, srv)], at: ms(3)), [.watch(.host(boxHost, lan1)), found(resolved(on: lan1))])
    }

    @Test("an address of another interface does not resolve the service")
    func addressOnOtherInterface() {
        var machine = browser()
        _ = machine.handle([.instanceAdded(box, lan1), .srvAdded(box, lan1, srv), .txtAdded(box, lan1, txtA)], at: ms(0))
        expect(machine.handle([.addressAdded(boxHost, lan2, v4lan2)], at: ms(1)), [])
        expect(machine.handle([.addressAdded(boxHost, lan1, v4)], at: ms(2)), [found(resolved(on: lan1))])
    }

    @Test("a service lost and seen again is resolved afresh: unwatching forgot its records")
    func unwatchForgets() throws {
        var machine = try resolvedBox(on: lan1)
        expect(
            machine.handle([.instanceRemoved(box, lan1)], at: ms(10)),
            [.unwatch(.service(box, lan1)), .unwatch(.host(boxHost, lan1)), lost(on: lan1)])
        // Its SRV, TXT and address were forgotten with the watches: the PTR alone resolves nothing.
        expect(machine.handle([.instanceAdded(box, lan1)], at: ms(20)), [.watch(.service(box, lan1))])
        expect(
            machine.handle([.srvAdded(box, lan1, srv), .txtAdded(box, lan1, txtA)], at: ms(21)),
            [.watch(.host(boxHost, lan1))])
        expect(machine.handle([.addressAdded(boxHost, lan1, v4)], at: ms(22)), [found(resolved(on: lan1))])
    }

    // MARK: 2. Found once, updated on change only

    @Test("found once: an identical SRV, TXT, address or PTR added again reports nothing")
    func identicalReAddIsQuiet() throws {
        var machine = try resolvedBox(on: lan1)
        expect(machine.handle(records(box, on: lan1), at: ms(10)), [])
        expect(machine.handle([.instanceAdded(box, lan1)], at: ms(11)), [])
        expect(machine.handle([.srvAdded(box, lan1, srv)], at: ms(12)), [])
        #expect(machine.nextDeadline == nil)
    }

    @Test("a TXT change is reported as updated")
    func txtChange() throws {
        var machine = try resolvedBox(on: lan1)
        expect(
            machine.handle([.txtRemoved(box, lan1, txtA), .txtAdded(box, lan1, txtB)], at: ms(10)),
            [updated(resolved(on: lan1, txt: txtB))])
    }

    @Test("a new TXT without removal of the old one is reported as updated (the latest counts)")
    func txtReplacedWithoutRemoval() throws {
        var machine = try resolvedBox(on: lan1)
        expect(machine.handle([.txtAdded(box, lan1, txtB)], at: ms(10)), [updated(resolved(on: lan1, txt: txtB))])
    }

    @Test("a port change is reported as updated and keeps the host watch")
    func portChange() throws {
        var machine = try resolvedBox(on: lan1)
        let moved = SRVData(port: 9100, target: boxHost)
        expect(
            machine.handle([.srvRemoved(box, lan1, srv), .srvAdded(box, lan1, moved)], at: ms(10)),
            [updated(resolved(on: lan1, port: 9100))])
    }

    @Test("an address added is reported as updated, with the addresses in arrival order")
    func addressAdded() throws {
        var machine = try resolvedBox(on: lan1)
        expect(
            machine.handle([.addressAdded(boxHost, lan1, v4b)], at: ms(10)),
            [updated(resolved(on: lan1, addresses: [v4, v4b]))])
    }

    @Test("a host change moves the host watch and is reported once the new host has an address")
    func hostChange() throws {
        var machine = try resolvedBox(on: lan1)
        let moved = SRVData(port: 9099, target: otherHost)
        expect(
            machine.handle([.srvRemoved(box, lan1, srv), .srvAdded(box, lan1, moved)], at: ms(10)),
            [.unwatch(.host(boxHost, lan1)), .watch(.host(otherHost, lan1))])
        expect(
            machine.handle([.addressAdded(otherHost, lan1, v4b)], at: ms(11)),
            [updated(resolved(on: lan1, host: otherHost, addresses: [v4b]))])
    }

    // MARK: 3. Records that expire and come back

    @Test("an expired address makes the service unresolved: no report")
    func addressExpires() throws {
        var machine = try resolvedBox(on: lan1)
        expect(machine.handle([.addressRemoved(boxHost, lan1, v4)], at: ms(10)), [])
        #expect(machine.nextDeadline == nil)
    }

    @Test("an expired address that comes back unchanged is not reported again")
    func addressBackUnchanged() throws {
        var machine = try resolvedBox(on: lan1)
        _ = machine.handle([.addressRemoved(boxHost, lan1, v4)], at: ms(10))
        expect(machine.handle([.addressAdded(boxHost, lan1, v4)], at: ms(20)), [])
    }

    @Test("an expired address replaced by another is reported updated")
    func addressBackChanged() throws {
        var machine = try resolvedBox(on: lan1)
        _ = machine.handle([.addressRemoved(boxHost, lan1, v4)], at: ms(10))
        expect(machine.handle([.addressAdded(boxHost, lan1, v4b)], at: ms(20)), [updated(resolved(on: lan1, addresses: [v4b]))])
    }

    @Test("an expired TXT: no report; back unchanged: no report; back changed: updated")
    func txtExpires() throws {
        var machine = try resolvedBox(on: lan1)
        expect(machine.handle([.txtRemoved(box, lan1, txtA)], at: ms(10)), [])
        expect(machine.handle([.txtAdded(box, lan1, txtA)], at: ms(20)), [])
        expect(machine.handle([.txtRemoved(box, lan1, txtA)], at: ms(30)), [])
        expect(machine.handle([.txtAdded(box, lan1, txtB)], at: ms(40)), [updated(resolved(on: lan1, txt: txtB))])
    }

    @Test("an expired SRV drops the host watch (forgetting its addresses); back unchanged: no report")
    func srvExpiresAndComesBack() throws {
        var machine = try resolvedBox(on: lan1)
        expect(machine.handle([.srvRemoved(box, lan1, srv)], at: ms(10)), [.unwatch(.host(boxHost, lan1))])
        expect(machine.handle([.srvAdded(box, lan1, srv)], at: ms(20)), [.watch(.host(boxHost, lan1))])
        expect(machine.handle([.addressAdded(boxHost, lan1, v4)], at: ms(21)), [])
        #expect(machine.nextDeadline == nil)
    }

    @Test("an expired SRV that comes back with another port is reported updated")
    func srvBackChanged() throws {
        var machine = try resolvedBox(on: lan1)
        _ = machine.handle([.srvRemoved(box, lan1, srv)], at: ms(10))
        let moved = SRVData(port: 9100, target: boxHost)
        expect(machine.handle([.srvAdded(box, lan1, moved)], at: ms(20)), [.watch(.host(boxHost, lan1))])
        expect(machine.handle([.addressAdded(boxHost, lan1, v4)], at: ms(21)), [updated(resolved(on: lan1, port: 9100))])
    }

    // MARK: 4. PTR removed

    @Test("PTR removed: lost at once, with the service and host watches stopped")
    func ptrRemoved() throws {
        var machine = try resolvedBox(on: lan1)
        expect(
            machine.handle([.instanceRemoved(box, lan1)], at: ms(10)),
            [.unwatch(.service(box, lan1)), .unwatch(.host(boxHost, lan1)), lost(on: lan1)])
        #expect(machine.nextDeadline == nil)
        expect(machine.advance(to: .seconds(60)), [])
    }

    @Test("PTR removed before the service resolved: watch stopped, nothing reported")
    func ptrRemovedUnresolved() {
        var machine = browser()
        _ = machine.handle([.instanceAdded(box, lan1), .srvAdded(box, lan1, srv)], at: ms(0))
        expect(
            machine.handle([.instanceRemoved(box, lan1)], at: ms(1)),
            [.unwatch(.service(box, lan1)), .unwatch(.host(boxHost, lan1))])
    }

    @Test("a removal of something never added changes nothing")
    func removalOfUnknown() throws {
        var machine = try resolvedBox(on: lan1)
        expect(
            machine.handle(
                [
                    .instanceRemoved(relay, lan1), .instanceRemoved(box, lan2),
                    .srvRemoved(box, lan1, SRVData(port: 1, target: boxHost)),
                    .txtRemoved(box, lan1, txtB), .addressRemoved(boxHost, lan1, v4b),
                ], at: ms(10)),
            [])
    }

    // MARK: 5. Two services at once

    @Test("two services on one host, observations interleaved: one host watch, each found once")
    func twoServicesSharingAHost() {
        var machine = browser()
        let relaySRV = SRVData(port: 7000, target: boxHost)
        expect(
            machine.handle([.instanceAdded(relay, lan1), .instanceAdded(box, lan1)], at: ms(0)),
            [.watch(.service(box, lan1)), .watch(.service(relay, lan1))])
        expect(machine.handle([.srvAdded(box, lan1, srv)], at: ms(1)), [.watch(.host(boxHost, lan1))])
        expect(machine.handle([.srvAdded(relay, lan1, relaySRV)], at: ms(2)), [])
        expect(machine.handle([.txtAdded(relay, lan1, txtB)], at: ms(3)), [])
        expect(
            machine.handle([.addressAdded(boxHost, lan1, v4)], at: ms(4)),
            [found(resolved("Relay", on: lan1, port: 7000, txt: txtB))])
        expect(machine.handle([.txtAdded(box, lan1, txtA)], at: ms(5)), [found(resolved(on: lan1))])
        // A second address of the shared host updates both.
        expect(
            machine.handle([.addressAdded(boxHost, lan1, v6)], at: ms(6)),
            [
                updated(resolved(on: lan1, addresses: [v4, v6])),
                updated(resolved("Relay", on: lan1, port: 7000, addresses: [v4, v6], txt: txtB)),
            ])
        // The host watch stays while one service still needs it.
        expect(machine.handle([.instanceRemoved(box, lan1)], at: ms(7)), [.unwatch(.service(box, lan1)), lost(on: lan1)])
        expect(
            machine.handle([.instanceRemoved(relay, lan1)], at: ms(8)),
            [.unwatch(.service(relay, lan1)), .unwatch(.host(boxHost, lan1)), lost("Relay", on: lan1)])
    }

    @Test("two services resolved by one packet are found in name order")
    func twoServicesInOnePacket() {
        var machine = browser()
        let relaySRV = SRVData(port: 7000, target: otherHost)
        let actions = machine.handle(
            [.instanceAdded(relay, lan1), .instanceAdded(box, lan1)] + records(relay, on: lan1, srv: relaySRV, addresses: [v4b])
                + records(box, on: lan1),
            at: .zero)
        expect(
            actions,
            [
                .watch(.service(box, lan1)), .watch(.service(relay, lan1)), .watch(.host(boxHost, lan1)),
                .watch(.host(otherHost, lan1)), found(resolved(on: lan1)),
                found(resolved("Relay", on: lan1, host: otherHost, port: 7000, addresses: [v4b])),
            ])
    }

    // MARK: 6. Counting

    @Test("an instance added twice (once per IP protocol) and removed once is still there")
    func addedTwiceRemovedOnce() {
        var machine = browser(resolve: false)
        expect(machine.handle([.instanceAdded(box, lan1)], at: ms(0)), [.report(.found(service(on: lan1), nil))])
        expect(machine.handle([.instanceAdded(box, lan1)], at: ms(1)), [])
        expect(machine.handle([.instanceRemoved(box, lan1)], at: ms(2)), [])
        expect(machine.handle([.instanceRemoved(box, lan1)], at: ms(3)), [lost(on: lan1)])
    }

    @Test("resolving: an instance added twice keeps its watches until removed twice")
    func addedTwiceRemovedTwiceResolving() {
        var machine = browser()
        _ = machine.handle([.instanceAdded(box, lan1), .instanceAdded(box, lan1)] + records(box, on: lan1), at: ms(0))
        expect(machine.handle([.instanceRemoved(box, lan1)], at: ms(1)), [])
        expect(
            machine.handle([.instanceRemoved(box, lan1)], at: ms(2)),
            [.unwatch(.service(box, lan1)), .unwatch(.host(boxHost, lan1)), lost(on: lan1)])
    }

    @Test("an SRV added twice and removed once still resolves the service")
    func srvCounted() throws {
        var machine = try resolvedBox(on: lan1)
        expect(machine.handle([.srvAdded(box, lan1, srv)], at: ms(1)), [])
        expect(machine.handle([.srvRemoved(box, lan1, srv)], at: ms(2)), [])
        expect(machine.handle([.srvRemoved(box, lan1, srv)], at: ms(3)), [.unwatch(.host(boxHost, lan1))])
    }

    // MARK: 7. Interfaces

    @Test("the same instance on two interfaces is two services")
    func twoInterfaces() {
        var machine = browser()
        let actions = machine.handle(
            [.instanceAdded(box, lan1), .instanceAdded(box, lan2)] + records(box, on: lan2, addresses: [v4lan2])
                + records(box, on: lan1),
            at: .zero)
        expect(
            actions,
            [
                .watch(.service(box, lan1)), .watch(.service(box, lan2)),
                .watch(.host(boxHost, lan1)), .watch(.host(boxHost, lan2)),
                found(resolved(on: lan1)), found(resolved(on: lan2, addresses: [v4lan2])),
            ])
    }

    @Test("an interface that goes away: its records removed, that service lost, the other one stays")
    func interfaceGoesAway() {
        var machine = browser()
        _ = machine.handle(
            [.instanceAdded(box, lan1), .instanceAdded(box, lan2)] + records(box, on: lan1)
                + records(box, on: lan2, addresses: [v4lan2]),
            at: .zero)
        let gone: [Observation] = [
            .instanceRemoved(box, lan1), .srvRemoved(box, lan1, srv),
            .txtRemoved(box, lan1, txtA), .addressRemoved(boxHost, lan1, v4),
        ]
        expect(machine.handle(gone, at: ms(10)), [.unwatch(.service(box, lan1)), .unwatch(.host(boxHost, lan1)), lost(on: lan1)])
        // The one on lan2 carries on, and changes there are its own.
        expect(
            machine.handle([.txtAdded(box, lan2, txtB)], at: ms(20)),
            [updated(resolved(on: lan2, addresses: [v4lan2], txt: txtB))])
    }

    // MARK: 8. Settle time

    @Test("with a settle time the window opens with the first observation; one found with everything at its end")
    func settleFound() {
        var machine = browser(settle: ms(30))
        expect(machine.handle([.instanceAdded(box, lan1)], at: ms(0)), [.watch(.service(box, lan1))])
        #expect(machine.nextDeadline == ms(30))
        expect(machine.handle([.srvAdded(box, lan1, srv)], at: ms(5)), [.watch(.host(boxHost, lan1))])
        expect(machine.handle([.txtAdded(box, lan1, txtA)], at: ms(10)), [])
        expect(machine.handle([.addressAdded(boxHost, lan1, v4)], at: ms(15)), [])
        expect(machine.handle([.addressAdded(boxHost, lan1, v4b)], at: ms(25)), [])
        #expect(machine.nextDeadline == ms(30))
        expect(machine.advance(to: ms(29)), [])
        expect(machine.advance(to: ms(30)), [found(resolved(on: lan1, addresses: [v4, v4b]))])
        #expect(machine.nextDeadline == nil)
        expect(machine.advance(to: ms(100)), [])
    }

    @Test("embedded (whole packets): a resolution that has an address of each family is reported at once, the other family's packet has come; a daemon's callbacks still wait")
    func settleWholeAtOnce() {
        var machine = BrowseStateMachine(type: type, mode: .browse(resolve: true), settleTime: ms(30), wholeAtOnce: true)
        _ = machine.handle([.instanceAdded(box, lan1), .srvAdded(box, lan1, srv), .txtAdded(box, lan1, txtA)], at: ms(0))
        // python-zeroconf: IPv4 in one packet, IPv6 in the next, a fraction of a millisecond later.
        expect(machine.handle([.addressAdded(boxHost, lan1, v4)], at: ms(1)), [])
        expect(machine.handle([.addressAdded(boxHost, lan1, v6)], at: .microseconds(1500)), [found(resolved(on: lan1, addresses: [v4, v6]))])
        expect(machine.advance(to: ms(30)), [])
        #expect(machine.nextDeadline == nil)
        // avahi-daemon's callbacks: a link-local IPv6 address may come before the routable one.
        var daemon = browser(settle: ms(30))
        _ = daemon.handle([.instanceAdded(box, lan1), .srvAdded(box, lan1, srv), .txtAdded(box, lan1, txtA)], at: ms(0))
        expect(daemon.handle([.addressAdded(boxHost, lan1, v4)], at: ms(1)), [])
        expect(daemon.handle([.addressAdded(boxHost, lan1, v6)], at: ms(2)), [])
        expect(daemon.advance(to: ms(30)), [found(resolved(on: lan1, addresses: [v4, v6]))])
    }

    @Test("with a settle time an answer completed after the window is reported a window after its last part")
    func settleFoundLate() {
        var machine = browser(settle: ms(30))
        _ = machine.handle([.instanceAdded(box, lan1), .srvAdded(box, lan1, srv), .txtAdded(box, lan1, txtA)], at: ms(0))
        expect(machine.advance(to: ms(30)), [])
        #expect(machine.nextDeadline == nil)
        expect(machine.handle([.addressAdded(boxHost, lan1, v4)], at: ms(50)), [])
        #expect(machine.nextDeadline == ms(80))
        expect(machine.advance(to: ms(80)), [found(resolved(on: lan1, addresses: [v4]))])
    }

    @Test("with a settle time several changes within the window make one update")
    func settleUpdate() throws {
        var machine = try resolvedBox(on: lan1, settle: ms(30))
        expect(machine.handle([.txtRemoved(box, lan1, txtA), .txtAdded(box, lan1, txtB)], at: ms(100)), [])
        #expect(machine.nextDeadline == ms(130))
        expect(machine.handle([.addressAdded(boxHost, lan1, v4b)], at: ms(110)), [])
        expect(machine.handle([.srvAdded(box, lan1, SRVData(port: 9100, target: boxHost))], at: ms(120)), [])
        #expect(machine.nextDeadline == ms(130))
        expect(machine.advance(to: ms(131)), [updated(resolved(on: lan1, port: 9100, addresses: [v4, v4b], txt: txtB))])
        #expect(machine.nextDeadline == nil)
    }

    @Test("with a settle time a change undone within the window is not reported")
    func settleUndone() throws {
        var machine = try resolvedBox(on: lan1, settle: ms(30))
        expect(machine.handle([.txtAdded(box, lan1, txtB)], at: ms(100)), [])
        expect(machine.handle([.txtRemoved(box, lan1, txtB)], at: ms(110)), [])
        expect(machine.advance(to: ms(130)), [])
        #expect(machine.nextDeadline == nil)
    }

    @Test("with a settle time lost is reported at once")
    func settleLost() throws {
        var machine = try resolvedBox(on: lan1, settle: ms(30))
        expect(
            machine.handle([.instanceRemoved(box, lan1)], at: ms(100)),
            [.unwatch(.service(box, lan1)), .unwatch(.host(boxHost, lan1)), lost(on: lan1)])
    }

    @Test("with a settle time a service that comes and goes within the window is never reported")
    func settleComesAndGoes() {
        var machine = browser(settle: ms(30))
        _ = machine.handle([.instanceAdded(box, lan1)] + records(box, on: lan1), at: ms(0))
        #expect(machine.nextDeadline == ms(30))
        expect(
            machine.handle([.instanceRemoved(box, lan1)], at: ms(10)),
            [.unwatch(.service(box, lan1)), .unwatch(.host(boxHost, lan1))])
        expect(machine.advance(to: ms(30)), [])
        #expect(machine.nextDeadline == nil)
    }

    @Test("with a settle time a browse without resolve waits too")
    func settleWithoutResolve() {
        var machine = browser(resolve: false, settle: ms(30))
        expect(machine.handle([.instanceAdded(box, lan1)], at: ms(0)), [])
        #expect(machine.nextDeadline == ms(30))
        expect(machine.advance(to: ms(30)), [.report(.found(service(on: lan1), nil))])
    }

    // MARK: 9. Resolve by name

    @Test("resolve: start watches the service on any interface")
    func resolveStart() {
        var machine = BrowseStateMachine(type: type, mode: .resolve(box))
        expect(machine.start(at: .zero), [.watch(.service(box, nil))])
        #expect(machine.nextDeadline == nil)
    }

    @Test("resolve: found carries the interface of the SRV that answered")
    func resolveFound() {
        var machine = BrowseStateMachine(type: type, mode: .resolve(box))
        _ = machine.start(at: .zero)
        expect(machine.handle([.srvAdded(box, lan2, srv)], at: ms(1)), [.watch(.host(boxHost, lan2))])
        expect(machine.handle([.txtAdded(box, lan2, txtA)], at: ms(2)), [])
        expect(
            machine.handle([.addressAdded(boxHost, lan2, v4lan2)], at: ms(3)),
            [found(resolved(on: lan2, addresses: [v4lan2]))])
    }

    @Test("resolve: the SRV that arrived first chooses the interface")
    func resolveFirstSRVWins() {
        var machine = BrowseStateMachine(type: type, mode: .resolve(box))
        _ = machine.start(at: .zero)
        expect(machine.handle([.srvAdded(box, lan2, srv)], at: ms(1)), [.watch(.host(boxHost, lan2))])
        expect(machine.handle([.srvAdded(box, lan1, srv)] + records(box, on: lan1), at: ms(2)), [])
        expect(
            machine.handle([.txtAdded(box, lan2, txtA), .addressAdded(boxHost, lan2, v4lan2)], at: ms(3)),
            [found(resolved(on: lan2, addresses: [v4lan2]))])
    }

    @Test("resolve: a PTR is ignored and records going away are never reported lost")
    func resolveNeverLost() {
        var machine = BrowseStateMachine(type: type, mode: .resolve(box))
        _ = machine.start(at: .zero)
        expect(machine.handle([.instanceAdded(box, lan1)], at: ms(0)), [])
        _ = machine.handle(records(box, on: lan1), at: ms(1))
        expect(machine.handle([.instanceRemoved(box, lan1), .txtRemoved(box, lan1, txtA)], at: ms(2)), [])
        expect(machine.handle([.srvRemoved(box, lan1, srv)], at: ms(3)), [.unwatch(.host(boxHost, lan1))])
        expect(machine.advance(to: .seconds(60)), [])
    }

    @Test("resolve: an interruption and a restoration report no lost, even after the grace")
    func resolveInterruptedNeverLost() {
        var machine = BrowseStateMachine(type: type, mode: .resolve(box))
        _ = machine.start(at: .zero)
        expect(
            machine.handle(records(box, on: lan1), at: ms(1)),
            [.watch(.host(boxHost, lan1)), found(resolved(on: lan1))])
        expect(
            machine.handle([.interrupted(daemonGone)], at: .seconds(1)),
            [.report(.interrupted(daemonGone)), .unwatch(.service(box, nil)), .unwatch(.host(boxHost, lan1))])
        expect(machine.handle([.restored], at: .seconds(2)), [.report(.restored), .watch(.service(box, nil))])
        expect(machine.handle(records(box, on: lan1), at: .seconds(3)), [.watch(.host(boxHost, lan1))])
        expect(machine.advance(to: .seconds(10)), [])
    }

    // MARK: 10. Browse without resolve

    @Test("browse without resolve: found with no resolution on the PTR, no watches, lost on removal")
    func browseWithoutResolve() {
        var machine = browser(resolve: false)
        expect(machine.start(at: .zero), [])
        expect(machine.handle([.instanceAdded(box, lan1)], at: ms(0)), [.report(.found(service(on: lan1), nil))])
        expect(machine.handle(records(box, on: lan1), at: ms(1)), [])
        expect(machine.handle([.instanceRemoved(box, lan1)], at: ms(2)), [lost(on: lan1)])
        #expect(machine.nextDeadline == nil)
    }

    // MARK: 11. Interrupted and restored

    /// Box (on buildbox) and Relay (on otherbox), both resolved on lan1.
    func twoResolved() throws -> BrowseStateMachine {
        var machine = browser()
        let actions = machine.handle(
            [.instanceAdded(box, lan1), .instanceAdded(relay, lan1)] + records(box, on: lan1)
                + records(relay, on: lan1, srv: SRVData(port: 7000, target: otherHost), addresses: [v4b]),
            at: .zero)
        try #require(actions.count == 6)
        return machine
    }

    var relayResolved: ResolvedService { resolved("Relay", on: lan1, host: otherHost, port: 7000, addresses: [v4b]) }

    @Test("interrupted is reported once and stops every watch")
    func interruptedOnce() throws {
        var machine = try twoResolved()
        expect(
            machine.handle([.interrupted(daemonGone)], at: .seconds(1)),
            [
                .report(.interrupted(daemonGone)), .unwatch(.service(box, lan1)), .unwatch(.service(relay, lan1)),
                .unwatch(.host(boxHost, lan1)), .unwatch(.host(otherHost, lan1)),
            ])
        expect(machine.handle([.interrupted(daemonGone)], at: .seconds(2)), [])
        #expect(machine.nextDeadline == nil)
    }

    @Test("nothing is lost or found while interrupted")
    func quietWhileInterrupted() throws {
        var machine = try twoResolved()
        _ = machine.handle([.interrupted(daemonGone)], at: .seconds(1))
        expect(machine.handle([.instanceRemoved(box, lan1), .instanceRemoved(relay, lan1)], at: .seconds(2)), [])
        expect(machine.handle([.instanceAdded(box, lan1)], at: .seconds(3)), [])
        expect(machine.advance(to: .seconds(60)), [])
        #expect(machine.nextDeadline == nil)
    }

    @Test("restored without an interruption reports nothing")
    func restoredWithoutInterruption() throws {
        var machine = try twoResolved()
        expect(machine.handle([.restored], at: .seconds(1)), [])
        #expect(machine.nextDeadline == nil)
    }

    @Test("after restoration a service that reappears unchanged is not reported, its watches are issued again")
    func reappearsUnchanged() throws {
        var machine = try twoResolved()
        _ = machine.handle([.interrupted(daemonGone)], at: .seconds(1))
        expect(machine.handle([.restored], at: .seconds(5)), [.report(.restored)])
        #expect(machine.nextDeadline == .seconds(8))
        expect(machine.handle([.instanceAdded(box, lan1)], at: .seconds(6)), [.watch(.service(box, lan1))])
        expect(
            machine.handle([.srvAdded(box, lan1, srv), .txtAdded(box, lan1, txtA)], at: .seconds(6)),
            [.watch(.host(boxHost, lan1))])
        expect(machine.handle([.addressAdded(boxHost, lan1, v4)], at: .seconds(6)), [])
        expect(
            machine.handle(
                [.instanceAdded(relay, lan1)]
                    + records(relay, on: lan1, srv: SRVData(port: 7000, target: otherHost), addresses: [v4b]),
                at: .seconds(7)),
            [.watch(.service(relay, lan1)), .watch(.host(otherHost, lan1))])
        expect(machine.advance(to: .seconds(8)), [])
        #expect(machine.nextDeadline == nil)
    }

    @Test("after restoration a service that does not reappear within the grace is lost, not before")
    func notReappearingIsLost() throws {
        var machine = try twoResolved()
        _ = machine.handle([.interrupted(daemonGone)], at: .seconds(1))
        _ = machine.handle([.restored], at: .seconds(5))
        _ = machine.handle([.instanceAdded(box, lan1)] + records(box, on: lan1), at: .seconds(6))
        expect(machine.advance(to: .milliseconds(7999)), [])
        #expect(machine.nextDeadline == .seconds(8))
        expect(machine.advance(to: .seconds(8)), [lost("Relay", on: lan1)])
        #expect(machine.nextDeadline == nil)
        expect(machine.advance(to: .seconds(60)), [])
    }

    @Test("after restoration a service that reappears changed is reported updated")
    func reappearsChanged() throws {
        var machine = try twoResolved()
        _ = machine.handle([.interrupted(daemonGone)], at: .seconds(1))
        _ = machine.handle([.restored], at: .seconds(5))
        expect(
            machine.handle([.instanceAdded(box, lan1)] + records(box, on: lan1, txt: txtB), at: .seconds(6)),
            [.watch(.service(box, lan1)), .watch(.host(boxHost, lan1)), updated(resolved(on: lan1, txt: txtB))])
    }

    @Test("after restoration a service that reappears and leaves within the grace is lost at once")
    func reappearsThenLeaves() throws {
        var machine = try twoResolved()
        _ = machine.handle([.interrupted(daemonGone)], at: .seconds(1))
        _ = machine.handle([.restored], at: .seconds(5))
        _ = machine.handle([.instanceAdded(box, lan1)] + records(box, on: lan1), at: .seconds(6))
        expect(
            machine.handle([.instanceRemoved(box, lan1)], at: .seconds(7)),
            [.unwatch(.service(box, lan1)), .unwatch(.host(boxHost, lan1)), lost(on: lan1)])
        expect(machine.advance(to: .seconds(8)), [lost("Relay", on: lan1)])
    }

    @Test("after restoration a service never seen before is found as usual")
    func newAfterRestoration() throws {
        var machine = browser()
        _ = machine.handle([.interrupted(daemonGone)], at: .seconds(1))
        _ = machine.handle([.restored], at: .seconds(5))
        expect(
            machine.handle([.instanceAdded(box, lan1)] + records(box, on: lan1), at: .seconds(6)),
            [.watch(.service(box, lan1)), .watch(.host(boxHost, lan1)), found(resolved(on: lan1))])
        expect(machine.advance(to: .seconds(8)), [])
    }

    // MARK: 12. Address order

    @Test("IPv4 comes before a link-local IPv6 address, whichever arrived first")
    func ipv4First() {
        var machine = browser()
        _ = machine.handle([.instanceAdded(box, lan1), .srvAdded(box, lan1, srv), .txtAdded(box, lan1, txtA)], at: ms(0))
        expect(
            machine.handle([.addressAdded(boxHost, lan1, v6), .addressAdded(boxHost, lan1, v4)], at: ms(1)),
            [found(resolved(on: lan1, addresses: [v4, v6]))])

        var other = browser()
        _ = other.handle([.instanceAdded(box, lan1), .srvAdded(box, lan1, srv), .txtAdded(box, lan1, txtA)], at: ms(0))
        expect(
            other.handle([.addressAdded(boxHost, lan1, v4), .addressAdded(boxHost, lan1, v6)], at: ms(1)),
            [found(resolved(on: lan1, addresses: [v4, v6]))])
    }

    @Test("an IPv4 address arriving after the IPv6 one is put first in the update")
    func ipv4AfterIPv6() {
        var machine = browser()
        expect(
            machine.handle([.instanceAdded(box, lan1)] + records(box, on: lan1, addresses: [v6]), at: ms(0)),
            [.watch(.service(box, lan1)), .watch(.host(boxHost, lan1)), found(resolved(on: lan1, addresses: [v6]))])
        expect(machine.handle([.addressAdded(boxHost, lan1, v4)], at: ms(1)), [updated(resolved(on: lan1, addresses: [v4, v6]))])
    }

    // MARK: Why a service does not resolve (nearby browse --verbose)

    @Test("unresolved services say what they wait for: the SRV, then the TXT and an address, then nothing")
    func unresolvedExplains() {
        var machine = browser()
        _ = machine.handle([.instanceAdded(box, lan1)], at: ms(1))
        #expect(machine.unresolved().map(\.waitingFor) == ["its SRV record (host and port)"])
        _ = machine.handle([.srvAdded(box, lan1, srv)], at: ms(2))
        #expect(machine.unresolved().map(\.waitingFor) == ["its TXT record and an address (A/AAAA) of buildbox.local. on lan1"])
        _ = machine.handle([.txtAdded(box, lan1, txtA)], at: ms(3))
        #expect(machine.unresolved().map(\.waitingFor) == ["an address (A/AAAA) of buildbox.local. on lan1"])
        #expect(machine.unresolved().first?.service == service(on: lan1))
        _ = machine.handle([.addressAdded(boxHost, lan1, v4)], at: ms(4))
        #expect(machine.unresolved().isEmpty)
        // A browse that does not resolve has nothing to explain.
        var plain = browser(resolve: false)
        _ = plain.handle([.instanceAdded(box, lan1)], at: ms(1))
        #expect(plain.unresolved().isEmpty)
    }
}

extension BrowseStateMachineTests {
    @Test("300 services on one host: one watch of the host, one per service; the host's address again changes nothing; all gone, every watch stops")
    func manyServicesOneHost() throws {
        var machine = browser()
        let names = try (1...300).map { try DomainName(parsing: "Service \($0)._openagents._tcp.local.") }
        var actions: [Action] = []
        // The host's addresses first, then each service's records in a batch of its own.
        actions += machine.handle([.addressAdded(boxHost, lan1, v4)], at: ms(0))
        for name in names {
            actions += machine.handle([.instanceAdded(name, lan1), .srvAdded(name, lan1, srv), .txtAdded(name, lan1, txtA)], at: ms(1))
        }
        let watched = actions.compactMap { if case .watch(let watch) = $0 { watch } else { nil } }
        #expect(watched.filter { if case .host = $0 { true } else { false } } == [.host(boxHost, lan1)])
        #expect(watched.count == 301)
        #expect(actions.filter { if case .report(let event) = $0 { event.caseName == "found" } else { false } }.count == 300)
        // The same address once more (over IPv6 transport, or refreshed): no report, no watch.
        #expect(machine.handle([.addressAdded(boxHost, lan1, v4)], at: ms(2)).isEmpty)
        // A new address of the host updates every service on it.
        let more = machine.handle([.addressAdded(boxHost, lan1, v4b)], at: ms(3))
        #expect(more.filter { if case .report(let event) = $0 { event.caseName == "updated" } else { false } }.count == 300)
        var gone: [Action] = []
        for name in names { gone += machine.handle([.instanceRemoved(name, lan1)], at: ms(4)) }
        #expect(gone.filter { if case .report(let event) = $0 { event.caseName == "lost" } else { false } }.count == 300)
        let unwatched = gone.compactMap { if case .unwatch(let watch) = $0 { watch } else { nil } }
        #expect(Set(unwatched) == Set(watched))
        #expect(unwatched.count == watched.count)
    }
}
