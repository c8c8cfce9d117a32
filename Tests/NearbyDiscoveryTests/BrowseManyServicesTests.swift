import DNSWire
import MulticastDNS
import Testing

@testable import NearbyDiscovery

/// Browsing many services of one host: the watches are kept per instance and counted, an
/// address is news only once, and instances waiting for their settle window are judged when
/// it ends. The reports must be exactly those the simple rules give.
extension BrowseStateMachineTests {
    func instance(_ index: Int) throws -> DomainName {
        try ServiceInstanceName("Service \(index)", type: type).domainName
    }

    @Test("200 services on one host: one host watch; a known address again reports nothing; a new one updates each once; the watch ends with the last")
    func manyServicesOnOneHost() throws {
        var machine = browser()
        _ = machine.start(at: .zero)
        let names = try (0..<200).map(instance)
        let burst = names.flatMap { [Observation.instanceAdded($0, lan1)] + records($0, on: lan1) }
        let actions = machine.handle(burst, at: ms(1))
        let watches = actions.filter { if case .watch = $0 { true } else { false } }
        #expect(watches.count == 201)
        #expect(watches.filter { $0 == .watch(.host(boxHost, lan1)) }.count == 1)
        let reports = actions.compactMap { action -> BrowseEvent? in if case .report(let event) = action { event } else { nil } }
        #expect(reports.count == 200)
        #expect(reports.allSatisfy { $0.caseName == "found" && $0.resolved?.addresses == [v4] })
        #expect(Set(reports.compactMap(\.service?.name)) == Set((0..<200).map { "Service \($0)" }))

        // The same address once more (a refresh, or the other IP family's copy): no news.
        expect(machine.handle([.addressAdded(boxHost, lan1, v4)], at: ms(2)), [])
        // A new address: every service on the host is updated, once.
        let updates = machine.handle([.addressAdded(boxHost, lan1, v4b)], at: ms(3))
        #expect(updates.count == 200)
        for update in updates {
            guard case .report(let event) = update else {
                Issue.record("expected an update, got \(update)")
                continue
            }
            #expect(event.caseName == "updated")
            #expect(event.resolved?.addresses == [v4, v4b])
        }
        // One copy of the new address removed while another remains (two sources): no news.
        expect(machine.handle([.addressAdded(boxHost, lan1, v4b)], at: ms(4)), [])
        expect(machine.handle([.addressRemoved(boxHost, lan1, v4b)], at: ms(5)), [])

        // Services go; the host watch stays until the last of them.
        for name in names.dropLast() {
            let gone = machine.handle([.instanceRemoved(name, lan1)], at: ms(6))
            #expect(!gone.contains(.unwatch(.host(boxHost, lan1))))
        }
        let last = try #require(names.last)
        #expect(machine.handle([.instanceRemoved(last, lan1)], at: ms(7)).contains(.unwatch(.host(boxHost, lan1))))
    }

    @Test("a service whose SRV moves to another host leaves the old host's count: its address changes no longer concern it")
    func serviceMovesHost() throws {
        var machine = browser()
        _ = machine.start(at: .zero)
        let first = try instance(1)
        let second = try instance(2)
        _ = machine.handle(
            [.instanceAdded(first, lan1), .instanceAdded(second, lan1)] + records(first, on: lan1) + records(second, on: lan1),
            at: ms(1))
        let moved = SRVData(port: 9099, target: otherHost)
        expect(
            machine.handle([.srvRemoved(second, lan1, srv), .srvAdded(second, lan1, moved), .addressAdded(otherHost, lan1, v4lan2)], at: ms(2)),
            [.watch(.host(otherHost, lan1)), updated(resolved("Service 2", on: lan1, host: otherHost, addresses: [v4lan2]))])
        // An address of the old host concerns the first service only.
        expect(
            machine.handle([.addressAdded(boxHost, lan1, v4b)], at: ms(3)),
            [updated(resolved("Service 1", on: lan1, addresses: [v4, v4b]))])
        // The old host's watch ends with the first service, the new one's with the second.
        expect(
            machine.handle([.instanceRemoved(first, lan1)], at: ms(4)),
            [.unwatch(.service(first, lan1)), .unwatch(.host(boxHost, lan1)), lost("Service 1", on: lan1)])
    }

    @Test("with a settle time, batches about other services do not judge a waiting one early: all waiting are found when the window ends, with what is held then")
    func settleWindowsOfManyServices() throws {
        var machine = browser(settle: ms(30))
        _ = machine.start(at: .zero)
        let first = try instance(1)
        let second = try instance(2)
        let third = try instance(3)
        expect(
            machine.handle([.instanceAdded(first, lan1)] + records(first, on: lan1, addresses: []), at: ms(0)),
            [.watch(.service(first, lan1)), .watch(.host(boxHost, lan1))])
        #expect(machine.nextDeadline == ms(30))
        // The second service arrives while the first waits, and with it the host's address,
        // which the first needed: neither is reported before the window ends.
        expect(
            machine.handle([.instanceAdded(second, lan1)] + records(second, on: lan1), at: ms(20)),
            [.watch(.service(second, lan1))])
        expect(machine.handle([.txtAdded(first, lan1, txtB), .txtRemoved(first, lan1, txtA)], at: ms(25)), [])
        #expect(machine.nextDeadline == ms(30))
        expect(machine.advance(to: ms(29)), [])
        expect(
            machine.advance(to: ms(30)),
            [found(resolved("Service 1", on: lan1, txt: txtB)), found(resolved("Service 2", on: lan1))])
        #expect(machine.nextDeadline == nil)
        // A third one after the window opens a window of its own.
        expect(machine.handle([.instanceAdded(third, lan1)] + records(third, on: lan1), at: ms(40)), [.watch(.service(third, lan1))])
        #expect(machine.nextDeadline == ms(70))
        expect(machine.advance(to: ms(70)), [found(resolved("Service 3", on: lan1))])
    }
}
